"""Does the device give the right answer? Its output against a CPU float32 reference of the same inputs, graded.

A model that runs but computes garbage does not "run". After the timed calls the child captures its answer for
the fixed inputs (each task's :meth:`~pipeline.bench.tasks.base.TaskRunner.capture`): for the generation tasks
the logits of every generated step and the greedy tokens; for sentence-embeddings the embeddings of the batch; for
text-to-image the second denoising step's update of the latents (from the same initial noise); for
automatic-speech-recognition the clips' transcripts (graded by word error rate). The same capture on
the CPU in float32 is the reference, and the same again on the CPU in bfloat16, fed the reference's greedy tokens,
is the noise run (what bfloat16 alone does to the answer); both are computed once per model, revision, task and
workload on the runner host and cached (:func:`reference_key`).

:func:`compare` gives the record's ``agreement``: the grade and its figures (:mod:`pipeline.bench.grading`, every
tolerance from :mod:`pipeline.bench.tolerances`), beside the figures older records carry (the first step's logit
cosine, the leading greedy tokens that match; the embeddings' and the denoiser's cosine). A ``diverges`` grade is
a ``fail`` at stage ``accuracy`` (:func:`failure`). The logits are compared teacher-forced: the device's tokens
must be the reference's at every step before it, which a free-running capture is when its tokens equal the
reference's; otherwise the device's logits are captured again with the reference's tokens forced
(:mod:`pipeline.bench.verify`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pipeline.taskspec import task_source

#: The reference runs the whole model in float32 on the host: skipped (with the reason in the record) when its
#: weights alone would take more than this many bytes (64 GiB: 16B parameters).
REFERENCE_MAX_BYTES = 64 * 1024**3
#: What the reference is, as the record states it.
REFERENCE_KIND = "cpu-float32"
#: The noise run: the same capture on the CPU in bfloat16, fed the reference's greedy tokens.
NOISE_KIND = "cpu-bfloat16"
NOISE_DTYPE = "bfloat16"
#: The capture's format, part of the cache key: a reference cached in an older format (version 1: the first
#: step's logits only) is never compared with a newer capture.
CAPTURE_FORMAT = 2
#: The graded check's fields (optional): a record holds the ones with a value (as a row gives them back).
GRADED_FIELDS = (
    "grade", "failed_step", "steps", "teacher_forced", "greedy_match_rate", "first_divergence_step", "topk",
    "sigma_ratio", "bc", "noise_reference", "noise_skipped", "noise_wer",
)  # fmt: skip


def reference_key(*, model_id: str, revision: str, task: str, workload: dict[str, Any], dtype: str = "float32") -> str:
    """The cache key of a reference answer: one per model, revision, task, workload and dtype (float32: the
    reference; bfloat16: the noise run)."""
    parts = [model_id, revision, task, workload, dtype, CAPTURE_FORMAT]
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def skip_reason(*, params: int | None, device: str, dtype: str) -> str | None:
    """Why the reference is not computed for a run, or None when it is.

    Args:
        params: The model's parameter count (None when unknown: the reference is tried).
        device: The run's device.
        dtype: The run's dtype.
    """
    if device == "cpu" and dtype == "float32":
        return "the run itself is the CPU float32 reference"
    if params is not None and params * 4 > REFERENCE_MAX_BYTES:
        need, limit = params * 4 / 1024**3, REFERENCE_MAX_BYTES >> 30
        return f"a float32 CPU reference needs {need:.0f} GiB of host memory, over the {limit} GiB limit"
    return None


def noise_skip_reason(*, dtype: str) -> str | None:
    """Why no bfloat16 noise run is made for a run of ``dtype``, or None when one is."""
    if dtype != NOISE_DTYPE:
        return f"the run is {dtype}: the bfloat16 noise test applies to bfloat16 runs only"
    return None


def load(path: Path) -> dict[str, Any]:
    """A saved capture (tensors only: ``torch.load(weights_only=True)``)."""
    import torch

    loaded: dict[str, Any] = torch.load(path, weights_only=True)
    return loaded


def teacher_forced(device: dict[str, Any], reference: dict[str, Any]) -> bool:
    """Whether a device capture's logits are teacher-forced by the reference's tokens: forced, or free-running
    with the reference's tokens at every step (then every step saw the reference's context)."""
    if device.get("teacher_forced"):
        return True
    mine, ref = device["tokens"], reference["tokens"]
    return bool(mine.shape == ref.shape and (mine == ref).all())


def _prefix(mine: Any, ref: Any) -> tuple[int, int]:
    compared = min(mine.shape[-1], ref.shape[-1])
    prefix = compared
    for row in range(mine.shape[0]):
        equal = (mine[row, :compared] == ref[row, :compared]).tolist()
        prefix = min(prefix, equal.index(False) if False in equal else compared)
    return int(prefix), int(compared)


def compare(
    device: Path, reference: Path, *, task: str = "text-generation", noise: Path | None = None,
    noise_skipped: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The record's ``agreement`` from a device capture, the reference capture of ``task`` and the noise run's.

    A generation capture holds ``logits`` (``[steps, batch, vocab]``) and greedy ``tokens``; the other tasks' hold
    one ``output`` tensor whose first dimension is the batch (embeddings; the second denoising step's update).

    Returns:
        The older fields (``reference``, ``logits_cosine``: the first step's, ``prefix_tokens``,
        ``compared_tokens``, ``threshold``, ``skipped``, the task's cosine) and the grade with its figures
        (:func:`pipeline.bench.grading.grade_generation`, :func:`~pipeline.bench.grading.grade_output`), the noise
        run named (``noise_reference``) or why there is none (``noise_skipped``).
    """
    from pipeline.bench.grading import finite, grade_generation, grade_output, grade_transcripts
    from pipeline.bench.tasks.base import cosine_rows

    ours, theirs = load(device), load(reference)
    base = load(noise) if noise is not None else None
    out = skipped(None, task=task)
    out.update(noise_reference=NOISE_KIND if base is not None else None, noise_skipped=noise_skipped)
    source = task_source(task)
    if "transcripts" in ours or "transcripts" in theirs:
        noise_texts = list(base["transcripts"]) if base is not None else None
        out.update(grade_transcripts(list(theirs["transcripts"]), list(ours["transcripts"]), noise_texts,
                                     threshold=source.cosine_threshold))  # fmt: skip
    elif "output" in ours or "output" in theirs:
        out[source.cosine_field] = finite(cosine_rows(ours["output"], theirs["output"]))
        out.update(grade_output(theirs["output"], ours["output"], base["output"] if base else None,
                                cosine=out[source.cosine_field], threshold=source.cosine_threshold))  # fmt: skip
    else:
        mine, ref = ours["logits"], theirs["logits"]
        if mine.shape[1:] != ref.shape[1:] or mine.shape[0] < 1:
            raise ValueError(f"logit shapes differ: device {tuple(mine.shape)}, reference {tuple(ref.shape)}")
        prefix, compared = _prefix(ours["tokens"], theirs["tokens"])
        forced = teacher_forced(ours, theirs)
        # A free-running capture whose tokens parted from the reference's saw the reference's context up to and
        # with the step they parted at only: the steps after it are not compared.
        steps = min(mine.shape[0], ref.shape[0]) if forced else min(prefix + 1, mine.shape[0], ref.shape[0])
        noise_logits = base["logits"][:steps] if base is not None else None
        if noise_logits is not None and noise_logits.shape[0] < steps:
            noise_logits, out["noise_reference"] = None, None
            out["noise_skipped"] = "the bfloat16 run holds fewer steps than the reference"
        out.update(
            logits_cosine=finite(cosine_rows(mine[0], ref[0])),
            prefix_tokens=prefix,
            compared_tokens=compared,
            teacher_forced=forced,
            **grade_generation(ref[:steps], mine[:steps], noise_logits),
        )
    return {k: v for k, v in out.items() if v is not None or k not in GRADED_FIELDS}  # the graded ones with a value


def skipped(reason: str | None, *, task: str = "text-generation") -> dict[str, Any]:
    """The record's ``agreement`` of ``task`` with nothing compared (yet), and why (None: not skipped)."""
    source = task_source(task)
    out: dict[str, Any] = dict.fromkeys(("logits_cosine", "prefix_tokens", "compared_tokens", source.cosine_field))
    return {**out, "reference": REFERENCE_KIND, "threshold": source.cosine_threshold, "skipped": reason}


def disagrees(agreement: dict[str, Any] | None) -> bool:
    """Whether an agreement says the answer is wrong: graded ``diverges`` (a skipped one has no grade)."""
    return agreement is not None and agreement.get("grade") == "diverges"


def _figure(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def failure_message(agreement: dict[str, Any], *, task: str) -> str:
    """The ``accuracy`` failure's message: where the answer diverges and the figures that say so."""
    source = task_source(task)
    if agreement.get("noise_reference"):
        sigma, bc = _figure(agreement.get("sigma_ratio")), _figure(agreement.get("bc"))
        three_way = f"σ-ratio {sigma}, Bhattacharyya {bc} against the CPU bfloat16 run"
    else:
        three_way = f"no bfloat16 noise run ({agreement.get('noise_skipped')})"
    if source.cosine_field == "transcript_wer":
        wer, noise_wer = _figure(agreement.get("transcript_wer")), _figure(agreement.get("noise_wer"))
        noise = f"the CPU bfloat16 run's is {noise_wer}" if agreement.get("noise_reference") else three_way
        return (
            f"{source.answer}: word error rate {wer} against the CPU float32 reference's transcripts, above "
            f"{source.cosine_threshold}; {noise}"
        )
    if agreement.get("topk") is None:
        cosine, threshold = agreement.get(source.cosine_field), source.cosine_threshold
        return f"{source.answer}: cosine {cosine} with the CPU float32 reference, below {threshold}; {three_way}"
    step = agreement.get("failed_step")
    groups = ", ".join(f"top-{g['k']} {_figure(g['max_rel_error'])} (rtol {g['rtol']:g})" for g in agreement["topk"])
    return (
        f"{source.answer}: diverges from the CPU float32 reference at step {step}: largest relative errors {groups}; "
        f"{three_way}; greedy tokens match at a rate of {_figure(agreement.get('greedy_match_rate'))} over "
        f"{agreement.get('steps')} steps, first parting at step {agreement.get('first_divergence_step')}"
    )
