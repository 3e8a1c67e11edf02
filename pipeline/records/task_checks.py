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
    """A pass agrees with its reference: by its grade (schema 1.4: never ``diverges``), or, in an older record
    without one, by the task's cosine; a failure at stage accuracy carries the agreement that failed (graded
    ``diverges`` when graded), or a served model's task score below its floor; a skipped check has no grade."""
    out: list[tuple[str, str]] = []
    agreement: dict[str, Any] = record.get("agreement") or {}
    graded = "grade" in agreement
    if agreement and agreement["skipped"] is None and not graded:
        name = task_source(record["task"]).cosine_field
        cosine = agreement.get(name)
        wrong = cosine is None or cosine < agreement["threshold"]
        if wrong and record["status"] == "pass":
            out.append((f"agreement.{name}", f"a pass must agree with the reference (cosine {cosine})"))
    if graded:
        grade = agreement["grade"]
        if agreement["skipped"] is not None and grade is not None:
            out.append(("agreement.grade", "a skipped check has no grade"))
        if grade == "diverges" and record["status"] == "pass":
            out.append(("agreement.grade", "a pass never diverges from the reference"))
        if agreement["skipped"] is None and grade is None and record["status"] == "pass":
            out.append(("agreement.grade", "a compared answer has a grade"))
    failure = record["failure"]
    # a served model's task score below its floor (schema 1.5, serving.eval) is the accuracy that failed there
    scored = ((record.get("serving") or {}).get("eval") or {}).get("passed") is False
    if failure and failure["stage"] == "accuracy" and not agreement and not scored:
        out.append(("agreement", "a failure at stage accuracy carries the agreement that failed"))
    if failure and failure["stage"] == "accuracy" and graded and agreement["grade"] != "diverges":
        out.append(("agreement.grade", "a failure at stage accuracy is graded diverges"))
    return out
