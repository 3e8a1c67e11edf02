"""Does the device give the right answer? Its first-step logits and greedy tokens against a CPU float32 reference.

A model that runs but computes garbage does not "run". After the timed calls the child captures, for the same
prompt, the logits of the first generated step (the last prompt position) and the greedy tokens of the workload
(:func:`capture`). The same capture on the CPU in float32 is the reference, computed once per model, revision,
task and workload on the runner host and cached (:func:`reference_key`). :func:`compare` gives the record's
``agreement``: the cosine of the two logit vectors (the smallest over the batch) and how many leading greedy
tokens equal the reference's. Below :data:`COSINE_THRESHOLD` the verdict is ``fail`` at stage ``accuracy``.

The threshold: bfloat16 weights and activations move logits by a few percent at most, which keeps the cosine of
a correct model far above 0.98 (docs/methodology.md, "The answer check"); a wrong kernel, a wrong attention
mask or a lost weight drops it well below. Greedy tokens may diverge after a near tie without any bug, so the
prefix length is recorded, not judged.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

#: A pass needs at least this cosine between the device's and the reference's first-step logits.
COSINE_THRESHOLD = 0.98
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


def capture(model: Any, inputs: dict[str, Any], kwargs: dict[str, Any], *, path: Path, perturb: bool = False) -> None:
    """Save the first-step logits (last prompt position, float32) and the greedy tokens of one ``generate()``.

    Args:
        model: The prepared model (on any device).
        inputs: Model inputs on its device.
        kwargs: ``generate()`` arguments of the workload (greedy, fixed length).
        path: Where to save (``torch.save``: ``{"logits": [batch, vocab], "tokens": [batch, new]}``).
        perturb: Tests only: a model that runs but answers wrong.
    """
    import torch

    out = model.generate(**inputs, **kwargs, output_logits=True, return_dict_in_generate=True)
    logits = out.logits[0].detach().float().cpu()
    if perturb:
        logits = torch.roll(logits, shifts=1, dims=-1)
    prompt = inputs["input_ids"].shape[-1]
    tokens = out.sequences[:, prompt:].detach().cpu()
    torch.save({"logits": logits, "tokens": tokens}, path)


def compare(device: Path, reference: Path) -> dict[str, Any]:
    """The record's ``agreement`` from a device capture and a reference capture.

    Returns:
        ``{"reference", "logits_cosine", "prefix_tokens", "compared_tokens", "threshold", "skipped"}``; the
        cosine is the smallest over the batch, the prefix the shortest.
    """
    import torch

    ours = torch.load(device, weights_only=True)
    theirs = torch.load(reference, weights_only=True)
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
    return {
        "reference": REFERENCE_KIND,
        "logits_cosine": round(cosine, 6) if math.isfinite(cosine) else None,
        "prefix_tokens": int(prefix),
        "compared_tokens": int(compared),
        "threshold": COSINE_THRESHOLD,
        "skipped": None,
    }


def skipped(reason: str) -> dict[str, Any]:
    """The record's ``agreement`` when no reference was compared, with why."""
    return {
        "reference": REFERENCE_KIND,
        "logits_cosine": None,
        "prefix_tokens": None,
        "compared_tokens": None,
        "threshold": COSINE_THRESHOLD,
        "skipped": reason,
    }


def disagrees(agreement: dict[str, Any] | None) -> bool:
    """Whether an agreement says the answer is wrong (a cosine below the threshold; NaN logits count too)."""
    if not agreement or agreement.get("skipped"):
        return False
    cosine = agreement.get("logits_cosine")
    return cosine is None or cosine < agreement.get("threshold", COSINE_THRESHOLD)
