"""Semantic checks of a serving record (its ``serving`` section) that a schema cannot express: the sweep's points
ascend in concurrency, each point's percentiles are ordered, a point's tok/s per chip is its output tok/s over the
record's chips and at most what its users could receive (:data:`USERS_SLACK`) and its chips' memory bandwidth allows
(:func:`peak_steps_per_s`), and the headline is one of the points; a task score (``serving.eval``) passes exactly
when it reaches its floor, and never stands below it beside a pass; an image workload (``serving.workload.images``)
is the image-text-to-text task's, and only its."""

from __future__ import annotations

from typing import Any

from pipeline.backends import gpu_bandwidth
from pipeline.hardware import FAMILY_OF_ACCELERATOR, chip_bandwidth, family_of

_PERCENTILE_FIELDS = ("ttft_s", "tpot_ms", "itl_ms", "e2e_s")
#: A point's output tok/s is what its ``concurrency`` users received, each at about ``tok_s_per_user`` (1 / median
#: TPOT; prefill and ramp-up only lower the total): a total above twice that was never measured (issue 47.1: a
#: community record's tok/s per chip inflated alone).
USERS_SLACK = 2.0
#: A decode step reads every active weight once for the whole batch, so a point's users get at most
#: ``peak_steps_per_s`` tokens per second each, its total at most ``concurrency`` times that; a measured point
#: stands below, never :data:`HARDWARE_SLACK` times above (room for speculative decoding's few tokens per step and
#: for the published peaks' rounding: the NKI guide gives Trainium2 3 TB/s where its architecture page gives 2.9).
HARDWARE_SLACK = 4.0
#: Bytes of one weight of the record's ``weight_dtype``; another dtype counts half a byte (4 bits: the narrowest).
WEIGHT_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "float8_e4m3fn": 1.0, "float8_e5m2": 1.0}


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1.0)


def serving_problems(record: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, problem)`` pairs of the ``serving`` section; none when the record has none."""
    serving = record.get("serving")
    if not serving:
        return []
    out: list[tuple[str, str]] = []
    points = serving["points"]
    levels = [p["concurrency"] for p in points]
    if levels != sorted(set(levels)):
        out.append(("serving.points", f"concurrencies {levels} do not ascend"))
    chips = serving["chips"]
    peak, bound = peak_steps_per_s(record)
    if peak is None and record["device"] in ("neuron", "cuda") and record["run"]["source"] != "ci" and points:
        out.append(("serving.active_params", f"a {record['run']['source']} serving record that cannot be bounded: "
                    f"{bound}"))  # fmt: skip
    if record["cores"] != chips:
        out.append(("cores", f"{record['cores']} is not the serving run's chips ({chips})"))
    for index, point in enumerate(points):
        for name in _PERCENTILE_FIELDS:
            values = [point[name][p] for p in ("p50", "p90", "p99")]
            known = [v for v in values if v is not None]
            if known != sorted(known):
                out.append((f"serving.points.{index}.{name}", f"percentiles {values} are not ordered"))
        speed, per_chip = point["output_tok_s"], point["tok_s_per_chip"]
        if (speed is None) != (per_chip is None) or (speed is not None and not _close(speed / chips, per_chip)):
            out.append((f"serving.points.{index}.tok_s_per_chip", f"{per_chip} is not output_tok_s / {chips} chips"))
        bad = [name for name, v in (point.get("spread") or {}).items() if isinstance(v, list) and v[0] > v[1]]
        out.extend((f"serving.points.{index}.spread.{name}", f"its interval {point['spread'][name]} is reversed")
                   for name in bad)  # fmt: skip
        user = point["tok_s_per_user"]
        if speed is not None and user is not None and speed > point["concurrency"] * user * USERS_SLACK:
            out.append((f"serving.points.{index}.output_tok_s", f"{speed} tok/s: more than {point['concurrency']} "
                        f"user(s) at {user} tok/s each could receive"))  # fmt: skip
        for name, most in (("tok_s_per_user", peak), ("output_tok_s", peak * point["concurrency"])) if peak else ():
            if (point[name] or 0) > most * HARDWARE_SLACK:
                out.append((f"serving.points.{index}.{name}", f"{point[name]} tok/s: more than {HARDWARE_SLACK:g} x "
                            f"the {most:.4g} its chips' memory bandwidth allows for {bound}"))  # fmt: skip
    best = serving["headline"]
    if best["concurrency"] is not None:
        match = [p for p in points if p["concurrency"] == best["concurrency"]]
        if not match or match[0]["tok_s_per_chip"] != best["tok_s_per_chip"]:
            out.append(("serving.headline", "the headline is not one of the measured points"))
    elif best["tok_s_per_chip"] is not None or best["usd_per_million_tokens"] is not None:
        out.append(("serving.headline", "a headline without a concurrency carries no figures"))
    out.extend(_eval_problems(record, serving.get("eval")))
    out.extend(_image_problems(record, serving["workload"].get("images")))
    return out


def peak_steps_per_s(record: dict[str, Any]) -> tuple[float | None, str]:
    """The decode steps per second a serving record's chips allow at most (issue 47.1): its chips' published HBM
    bandwidth (a Trainium chip's, ``pipeline/hardware.py``; a GPU's datasheet figure) over the bytes of the weights
    one token reads (``serving.active_params``, else ``metrics.params``, at :data:`WEIGHT_BYTES`); None (and why)
    for a CPU, a chip without a published figure, or no parameter count. What it was computed for, else why not."""
    serving, hardware = record["serving"], record["hardware"]
    params = serving.get("active_params") or (record.get("metrics") or {}).get("params")
    accelerator = str(hardware.get("accelerator") or "")
    family = FAMILY_OF_ACCELERATOR.get(accelerator.lower()) or family_of(hardware.get("instance_type"))
    bandwidth = {"neuron": chip_bandwidth(family), "cuda": gpu_bandwidth(accelerator)}.get(record["device"])
    if not params or not bandwidth:
        return None, f"no parameter count ({params}) or no published bandwidth for {record['device']} {accelerator!r}"
    weight = WEIGHT_BYTES.get(serving["weight_dtype"], 0.5)
    return serving["chips"] * bandwidth / (params * weight), f"{params} active weights of {weight:g} byte(s)"


def _eval_problems(record: dict[str, Any], evaluation: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The task score: its verdict is the score against the floor, and a score below the floor never
    stands beside a pass."""
    if evaluation is None:
        return []
    out: list[tuple[str, str]] = []
    score, floor, passed = evaluation["score"], evaluation["floor"], evaluation["passed"]
    if (score is None) != (passed is None) or (score is not None and passed != (score >= floor)):
        out.append(("serving.eval.passed", f"{passed} is not whether the score {score} reaches the floor {floor}"))
    if passed is False and record["status"] == "pass":
        out.append(("status", f"a pass with its task score {score} below the floor {floor}"))
    return out


def _image_problems(record: dict[str, Any], images: dict[str, Any] | None) -> list[tuple[str, str]]:
    """An image workload serves an image-text-to-text model; an image-text-to-text model is served
    with images (a text-only sweep of it would say nothing of its image path)."""
    if (images is not None) == (record["task"] == "image-text-to-text"):
        return []
    return [("serving.workload.images", f"a {record['task']} serving record with images {images is not None}")]
