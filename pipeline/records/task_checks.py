"""Semantic checks of a record that depend on its task: the metric sets of schema 1.2 and the answer check."""

from __future__ import annotations

from typing import Any

from pipeline.workload import task_source


def task_metric_problems(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The schema 1.2 metric sets: latency per batch size ordered and at the workload's batch sizes, the VAE
    decode within one image. Returns ``(field, problem)`` pairs."""
    out: list[tuple[str, str]] = []
    metrics = record["metrics"]
    by_batch = metrics.get("latency_by_batch_s")
    if by_batch is not None:
        sizes = [item["batch_size"] for item in by_batch]
        for index, item in enumerate(by_batch):
            if item["p50"] > item["p90"]:
                out.append((f"metrics.latency_by_batch_s.{index}.p50", "p50 exceeds p90"))
        if len(set(sizes)) != len(sizes) or set(sizes) != set(record["workload"].get("batch_sizes") or ()):
            out.append(("metrics.latency_by_batch_s", f"batch sizes {sizes} are not the workload's batch_sizes"))
    image, decode = metrics.get("seconds_per_image"), metrics.get("vae_decode_s")
    if image is not None and decode is not None and decode > image * 1.000001 + 1e-9:
        out.append(("metrics.vae_decode_s", f"{decode} s exceeds seconds_per_image {image} s"))
    return out


def agreement_problems(record: dict[str, Any]) -> list[tuple[str, str]]:
    """A pass agrees with its reference (in the task's cosine field); a failure at stage accuracy carries the
    agreement that failed."""
    out: list[tuple[str, str]] = []
    agreement = record.get("agreement")
    if agreement and agreement["skipped"] is None:
        name = task_source(record["task"]).cosine_field
        cosine = agreement.get(name)
        wrong = cosine is None or cosine < agreement["threshold"]
        if wrong and record["status"] == "pass":
            out.append((f"agreement.{name}", f"a pass must agree with the reference (cosine {cosine})"))
    failure = record["failure"]
    if failure and failure["stage"] == "accuracy" and not agreement:
        out.append(("agreement", "a failure at stage accuracy carries the agreement that failed"))
    return out
