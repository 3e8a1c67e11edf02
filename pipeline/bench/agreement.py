"""Does the device give the right answer? Its output against a CPU float32 reference of the same inputs.

A model that runs but computes garbage does not "run". After the timed calls the child captures its answer for
the fixed inputs (each task's :meth:`~pipeline.bench.tasks.base.TaskRunner.capture`): for the generation tasks
the logits of the first generated step (the last prompt position) and the greedy tokens; for
sentence-embeddings the embeddings of the batch; for text-to-image the second denoising step's update of the
latents (from the same initial noise). The same capture on the CPU in float32 is the reference, computed once
per model, revision, task and workload on the runner host and cached (:func:`reference_key`). :func:`compare`
gives the record's ``agreement``: the cosine of the two answers (the smallest over the batch) in the task's
field (``logits_cosine``, ``embedding_cosine``, ``denoiser_cosine``) and, for generation, how many leading
greedy tokens equal the reference's. Below the task's threshold the verdict is ``fail`` at stage ``accuracy``.

The threshold: bfloat16 weights and activations move logits by a few percent at most, which keeps the cosine of
a correct model far above 0.98 (docs/methodology.md, "The answer check"); a wrong kernel, a wrong attention
mask or a lost weight drops it well below. Embeddings must agree to 0.99 (issue 13: a sentence embedding is
compared by cosine, so that is what its users lose). Greedy tokens may diverge after a near tie without any
bug, so the prefix length is recorded, not judged.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from pipeline.workload import task_source

#: A generation pass needs at least this cosine between the device's and the reference's first-step logits
#: (each task's own threshold: :attr:`pipeline.workload.TaskSource.cosine_threshold`).
COSINE_THRESHOLD = task_source("text-generation").cosine_threshold
#: The reference runs the whole model in float32 on the host: skipped (with the reason in the record) when its
#: weights alone would take more than this many bytes (64 GiB: 16B parameters).
REFERENCE_MAX_BYTES = 64 * 1024**3
#: What the reference is, as the record states it.
REFERENCE_KIND = "cpu-float32"


def reference_key(*, model_id: str, revision: str, task: str, workload: dict[str, Any]) -> str:
    """The cache key of a reference answer: one per model, revision, task and workload."""
    text = json.dumps([model_id, revision, task, workload], sort_keys=True, separators=(",", ":"))
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


def compare(device: Path, reference: Path, *, task: str = "text-generation") -> dict[str, Any]:
    """The record's ``agreement`` from a device capture and a reference capture of ``task``.

    A generation capture holds ``logits`` ([batch, vocab]) and greedy ``tokens``; the other tasks' hold one
    ``output`` tensor whose first dimension is the batch (embeddings; the second denoising step's update).

    Returns:
        ``{"reference", "logits_cosine", "prefix_tokens", "compared_tokens", "threshold", "skipped"}`` plus the
        task's own cosine field; the cosine is the smallest over the batch, the prefix the shortest.
    """
    import torch

    from pipeline.bench.tasks.base import cosine_rows

    ours = torch.load(device, weights_only=True)
    theirs = torch.load(reference, weights_only=True)
    out = skipped(None, task=task)
    if "output" in ours or "output" in theirs:
        cosine = cosine_rows(ours["output"], theirs["output"])
        out[task_source(task).cosine_field] = round(cosine, 6) if math.isfinite(cosine) else None
        return out
    a, b = ours["logits"].double(), theirs["logits"].double()
    if a.shape != b.shape:
        raise ValueError(f"logit shapes differ: device {tuple(a.shape)}, reference {tuple(b.shape)}")
    cosine = torch.nn.functional.cosine_similarity(a, b, dim=-1).min().item()
    mine, ref = ours["tokens"], theirs["tokens"]
    compared = min(mine.shape[-1], ref.shape[-1])
    prefix = compared
    for row in range(mine.shape[0]):
        equal = (mine[row, :compared] == ref[row, :compared]).tolist()
        prefix = min(prefix, equal.index(False) if False in equal else compared)
    out.update(
        logits_cosine=round(cosine, 6) if math.isfinite(cosine) else None,
        prefix_tokens=int(prefix),
        compared_tokens=int(compared),
    )
    return out


def skipped(reason: str | None, *, task: str = "text-generation") -> dict[str, Any]:
    """The record's ``agreement`` of ``task`` with nothing compared (yet), and why (None: not skipped)."""
    source = task_source(task)
    out: dict[str, Any] = {
        "reference": REFERENCE_KIND,
        "logits_cosine": None,
        "prefix_tokens": None,
        "compared_tokens": None,
        "threshold": source.cosine_threshold,
        "skipped": reason,
    }
    out[source.cosine_field] = None
    return out


def disagrees(agreement: dict[str, Any] | None, *, task: str = "text-generation") -> bool:
    """Whether an agreement says the answer is wrong (a cosine below the threshold; NaN counts too)."""
    if not agreement or agreement.get("skipped"):
        return False
    cosine = agreement.get(task_source(task).cosine_field)
    return cosine is None or cosine < agreement.get("threshold", task_source(task).cosine_threshold)
