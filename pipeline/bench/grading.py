"""The graded verdict of an answer: the device's against the CPU float32 reference, with a bfloat16 CPU run beside.

Pure tensor arithmetic (it runs in the parent after the children saved their answers); every threshold comes from
:data:`pipeline.bench.tolerances.TOLERANCES`. docs/methodology.md, "The answer check", says the same in words.

Generation (``logits`` of shape ``[steps, batch, vocab]``, teacher-forced: every step saw the reference's greedy
tokens before it):

- per step and row, for each top-k group of the reference's logits, the largest absolute error
  ``max |device - reference|`` and the relative one ``(max |device - reference| - atol) / max |reference|`` over
  the group (vLLM Neuron's definition); a step keeps the **top-k rule** when every group's relative error is at
  most its ``rtol`` and the device's greedy token is the reference's, or the device's own logits of the two
  tokens differ by at most NxD Inference's divergence difference tolerance;
- the **three-way** figures against the bfloat16 CPU run of the same teacher-forced tokens: the σ-ratio (RMS of
  the device's absolute errors over every step and token, over the bfloat16 run's) and the Bhattacharyya
  coefficient of the two error distributions at each step (histograms of 100 bins over their common range; the
  smallest over the steps is recorded);
- the grade: ``exact`` (the top-k rule at every step, and every greedy token the reference's), ``within
  tolerance`` (the top-k rule at every step), ``bfloat16 noise`` (σ-ratio ≤ 1.0 or every step's coefficient ≥
  0.99, the published rule's rescue, and no greedy token swapped beyond bfloat16's own reach) or ``diverges``.

Transcripts (automatic-speech-recognition) are graded by word error rate: :func:`grade_transcripts`.

A swapped greedy token is judged on its own: one swapped token among ``steps x vocab`` errors moves neither
aggregate, so the rescue never covers it. It is bfloat16 noise when the bfloat16 CPU run picks the same token, or
when the reference's own margin between the two tokens is within the bfloat16 run's largest top-5 error at that
step or one bfloat16 unit in the last place of the reference's top logit (the design doc: a top-1/top-2 gap below
one ULP "could lead to wrong token selection due to precision issues").
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.bench.tolerances import TOLERANCES, TOPK_GROUPS


def finite(value: float | None, digits: int = 6) -> float | None:
    return round(value, digits) if value is not None and math.isfinite(value) else None


#: The grades short of ``diverges``, strictest first.
GRADES = ("exact", "within tolerance", "bfloat16 noise")


def _grade(*holds: bool) -> str:
    """The strictest grade of :data:`GRADES` whose test holds (one test per grade, in order), else ``diverges``."""
    return next((grade for grade, held in zip(GRADES, holds, strict=True) if held), "diverges")


def _three_way(device_errors: Any, noise_errors: Any) -> tuple[float, float | None, bool]:
    """The σ-ratio of two runs' absolute errors, the smallest Bhattacharyya coefficient over their first dimension
    (each step, or each batch row), and whether either says bfloat16 noise."""
    ratio = sigma_ratio(device_errors, noise_errors)
    bc = min((bhattacharyya(device_errors[i], noise_errors[i]) for i in range(device_errors.shape[0])), default=None)
    rescued = ratio <= TOLERANCES["sigma_ratio_max"].value or (bc is not None and bc >= TOLERANCES["bc_min"].value)
    return ratio, bc, rescued


def bhattacharyya(a: Any, b: Any, *, bins: int = int(TOLERANCES["bc_bins"].value)) -> float:
    """The Bhattacharyya coefficient of two samples' histograms over their common range (1: the same
    distribution, 0: no overlap). Two samples of one and the same value are the same distribution."""
    import torch

    x, y = a.double().flatten(), b.double().flatten()
    if x.numel() == 0 or y.numel() == 0:
        return 0.0
    low, high = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    if not (math.isfinite(low) and math.isfinite(high)):
        return 0.0
    if high <= low:
        return 1.0
    p = torch.histc(x, bins=bins, min=low, max=high)
    q = torch.histc(y, bins=bins, min=low, max=high)
    p, q = p / p.sum(), q / q.sum()
    return float(torch.sqrt(p * q).sum().clamp(0.0, 1.0))


def sigma_ratio(device_errors: Any, noise_errors: Any) -> float:
    """RMS of the device's absolute errors over the bfloat16 run's (inf when the noise is 0 and the device's is
    not; 0 when both are 0)."""
    device_rms = float(device_errors.double().pow(2).mean().sqrt())
    noise_rms = float(noise_errors.double().pow(2).mean().sqrt())
    if noise_rms == 0:
        return 0.0 if device_rms == 0 else math.inf
    return device_rms / noise_rms


def grade_generation(reference: Any, device: Any, noise: Any | None) -> dict[str, Any]:
    """The graded comparison of teacher-forced logits (``[steps, batch, vocab]`` each).

    Args:
        reference: The CPU float32 run's logits.
        device: The device's.
        noise: The bfloat16 CPU run's, or None when there is none (then no three-way figures and no rescue).

    Returns:
        ``grade``, ``failed_step`` (the first step the verdict fails at; None unless ``diverges``), ``steps``,
        ``greedy_match_rate``, ``first_divergence_step``, ``topk`` (per group: ``k``, ``atol``, ``rtol``,
        ``max_abs_error``, ``max_rel_error`` and the ``step`` of the latter), ``sigma_ratio`` and ``bc``.
    """
    import torch

    ref, dev = reference.double(), device.double()
    if ref.shape != dev.shape or ref.dim() != 3:
        raise ValueError(f"logit shapes differ: device {tuple(dev.shape)}, reference {tuple(ref.shape)}")
    steps, vocab = ref.shape[0], ref.shape[-1]
    ref_token, dev_token = ref.argmax(-1), dev.argmax(-1)  # [steps, batch]
    match = dev_token == ref_token
    step_fails = torch.zeros(steps, dtype=torch.bool)
    groups = []
    for group, atol, rtol in TOPK_GROUPS:
        k = vocab if group == "all" else min(int(group), vocab)
        index = ref.topk(k, dim=-1).indices
        expected, actual = ref.gather(-1, index), dev.gather(-1, index)
        abs_error = (actual - expected).abs().amax(-1)  # [steps, batch]
        rel_error = (abs_error - atol) / expected.abs().amax(-1).clamp_min(1e-30)
        per_step = rel_error.nan_to_num(math.inf).amax(-1)  # the worst row of each step
        step_fails |= per_step > rtol
        worst = int(per_step.argmax())
        groups.append(
            {
                "k": group,
                "atol": atol,
                "rtol": rtol,
                "max_abs_error": finite(float(abs_error.nan_to_num(math.inf).max())),
                "max_rel_error": finite(max(0.0, float(per_step[worst]))),
                "step": worst,
            }
        )
    # NxD Inference's divergence difference: how far apart the device's own logits of its token and the reference's.
    gap = dev.gather(-1, dev_token[..., None])[..., 0] - dev.gather(-1, ref_token[..., None])[..., 0]
    swapped = ~match & ~(gap <= TOLERANCES["divergence_difference_tol"].value)
    step_fails |= swapped.any(-1)
    top = ref.gather(-1, ref_token[..., None])[..., 0]
    margin = top - ref.gather(-1, dev_token[..., None])[..., 0]
    # Within one bfloat16 unit in the last place of the reference's top logit.
    exponent = torch.floor(torch.log2(top.abs().clamp_min(1e-30)))
    within_precision = margin <= torch.pow(2.0, exponent - TOLERANCES["bfloat16_mantissa_bits"].value)
    ratio = bc = None
    noise_ok = False
    if noise is not None:
        base = noise.double()
        if base.shape != ref.shape:
            raise ValueError(f"logit shapes differ: bfloat16 run {tuple(base.shape)}, reference {tuple(ref.shape)}")
        noise_errors = (base - ref).abs()
        ratio, bc, noise_ok = _three_way((dev - ref).abs(), noise_errors)
        top5 = ref.topk(min(5, vocab), dim=-1).indices
        reach = noise_errors.gather(-1, top5).amax(-1)
        within_precision |= (base.argmax(-1) == dev_token) | (margin <= reach)
    bad_swap = swapped & ~within_precision
    first = torch.nonzero(~match.all(-1))
    passes = not step_fails.any()
    grade = _grade(passes and bool(match.all()), passes, noise_ok and not bad_swap.any())
    failed = int(torch.nonzero(bad_swap.any(-1) if noise_ok else step_fails)[0]) if grade == "diverges" else None
    return {
        "grade": grade,
        "failed_step": failed,
        "steps": steps,
        "greedy_match_rate": round(float(match.double().mean()), 6),
        "first_divergence_step": int(first[0]) if first.numel() else None,
        "topk": groups,
        "sigma_ratio": finite(ratio),
        "bc": finite(bc),
    }


def grade_output(
    reference: Any, device: Any, noise: Any | None, *, cosine: float | None, threshold: float
) -> dict[str, Any]:
    """The graded comparison of an output whose first dimension is the batch (embeddings, a denoising update).

    ``exact`` when the device's output is the reference's, ``within tolerance`` when the cosine (the smallest over
    the batch) reaches the task's threshold, ``bfloat16 noise`` by the same three-way rule as generation (σ-ratio,
    or the Bhattacharyya coefficient of every batch row), else ``diverges``.
    """
    ref, dev = reference.double().flatten(1), device.double().flatten(1)
    ratio = bc = None
    noise_ok = False
    if noise is not None and noise.shape == reference.shape:
        ratio, bc, noise_ok = _three_way((dev - ref).abs(), (noise.double().flatten(1) - ref).abs())
    exact = ref.shape == dev.shape and bool((ref == dev).all())
    grade = _grade(exact, cosine is not None and cosine >= threshold, noise_ok)
    return {
        "grade": grade,
        "failed_step": None,
        "sigma_ratio": finite(ratio),
        "bc": finite(bc),
    }


def grade_transcripts(
    reference: list[str], device: list[str], noise: list[str] | None, *, threshold: float
) -> dict[str, Any]:
    """The graded comparison of transcripts (automatic-speech-recognition), by word error rate against the CPU
    float32 reference's (:mod:`pipeline.bench.wer`).

    ``exact`` when every transcript is the reference's word for word, ``within tolerance`` when the WER is at most
    ``threshold``, ``bfloat16 noise`` when it is at most the CPU bfloat16 run's own WER against the reference (the
    words bfloat16 alone changes), else ``diverges``.

    Raises:
        ValueError: the device or the noise run transcribed another number of clips than the reference.
    """
    from pipeline.bench.wer import word_error_rate

    wer = word_error_rate(reference, device)
    noise_wer = word_error_rate(reference, noise) if noise is not None else None
    grade = _grade(wer == 0, wer <= threshold, noise_wer is not None and wer <= noise_wer)
    return {"grade": grade, "failed_step": None, "transcript_wer": round(wer, 6), "noise_wer": noise_wer}
