"""Semantic checks of a record that depend on its task: each task's metric set and the answer check."""

from __future__ import annotations

import copy
from typing import Any

from pipeline.taskspec import REGISTRY, task_source

#: The JSON Schema of a task field's value, by its column kind (:class:`pipeline.taskspec.Field`).
_JSON: dict[str, dict[str, Any]] = {
    "float64": {"type": ["number", "null"], "minimum": 0},
    "int64": {"type": ["integer", "null"], "minimum": 0},
    "string": {"type": ["string", "null"], "maxLength": 200},
    "ints": {"type": ["array", "null"], "items": {"type": "integer", "minimum": 1}},
}


def with_tasks(schema: dict[str, Any]) -> dict[str, Any]:
    """The result schema with every task of :mod:`pipeline.taskspec` it does not name yet: the task's name, its
    fields (typed from their kind), the fields its records carry and, in another task's record, none of them (a
    schema without a task, the others', as it is)."""
    known = schema["properties"]["task"]["enum"] if "task" in schema.get("properties", {}) else REGISTRY
    added = [spec for name, spec in REGISTRY.items() if name not in known]
    if not added:
        return schema
    schema = copy.deepcopy(schema)
    props = schema["properties"]
    props["task"]["enum"] = [*known, *(spec.name for spec in added)]
    for spec in added:
        own: dict[str, Any] = {}
        others: dict[str, Any] = {}
        for f in spec.fields:
            section, key = f.path
            props[section]["properties"][key] = {**_JSON[f.kind], "$comment": f"{spec.name}: {f.unit or f.column}"}
            if f.required:
                own.setdefault(section, {"required": []})["required"].append(key)
            others.setdefault(section, {"properties": {}})["properties"][key] = False
        task = {"properties": {"task": {"const": spec.name}}, "required": ["task"]}
        schema["allOf"] += [
            {"$comment": f"a {spec.name} record carries its own fields", "if": task, "then": {"properties": own}},
            {"$comment": f"a record of another task carries none of {spec.name}'s fields",
             "if": {"properties": {"task": {"not": {"const": spec.name}}}, "required": ["task"]},
             "then": {"properties": others}},
        ]  # fmt: skip
    return schema


def task_metric_problems(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The metric sets: latency per batch size ordered and at the workload's batch sizes, the VAE
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
    """A pass agrees with its reference: by its grade (never ``diverges``), or, in an older record
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
    # a served model's task score below its floor (serving.eval) is the accuracy that failed there
    scored = ((record.get("serving") or {}).get("eval") or {}).get("passed") is False
    if failure and failure["stage"] == "accuracy" and not agreement and not scored:
        out.append(("agreement", "a failure at stage accuracy carries the agreement that failed"))
    if failure and failure["stage"] == "accuracy" and graded and agreement["grade"] != "diverges":
        out.append(("agreement.grade", "a failure at stage accuracy is graded diverges"))
    return out
