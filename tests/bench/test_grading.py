"""The graded verdict (pipeline.bench.grading): device answers perturbed on purpose against a float32 reference,
with a bfloat16 run beside it. The tiny Llama's own logits, teacher-forced, and bfloat16's own noise."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pipeline.bench.grading import bhattacharyya, grade_generation, grade_output, sigma_ratio
from pipeline.bench.tasks.generation import force_tokens
from pipeline.bench.tasks.perturb import SWAP_STEP, perturb_logits
from pipeline.taskspec import task_source

STEPS, PROMPT = 12, 16


def _teacher_forced(folder: Path, *, dtype: torch.dtype, attention: str, tokens: torch.Tensor | None) -> dict:
    """The tiny Llama's logits of every step (``[steps, 1, vocab]``) and greedy tokens, fed ``tokens`` when given."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attention).eval()
    ids = torch.arange(3, 3 + PROMPT)[None]
    kwargs = {"max_new_tokens": STEPS, "min_new_tokens": STEPS, "do_sample": False, "pad_token_id": 0}
    if tokens is not None:
        kwargs["logits_processor"] = force_tokens(tokens, prompt=PROMPT)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), output_logits=True,
                             return_dict_in_generate=True, **kwargs)  # fmt: skip
    return {"logits": torch.stack([s.float() for s in out.logits]), "tokens": out.sequences[:, PROMPT:]}


@pytest.fixture(scope="module")
def answers(tiny_models: dict[str, Path]) -> dict[str, torch.Tensor]:
    """float32 (the reference), bfloat16 (the noise run) and bfloat16 through another attention kernel (a device
    whose rounding differs from the CPU's), each fed the reference's greedy tokens."""
    folder = tiny_models["text-generation"]
    ref = _teacher_forced(folder, dtype=torch.float32, attention="sdpa", tokens=None)
    noise = _teacher_forced(folder, dtype=torch.bfloat16, attention="sdpa", tokens=ref["tokens"])
    device = _teacher_forced(folder, dtype=torch.bfloat16, attention="eager", tokens=ref["tokens"])
    assert torch.equal(noise["tokens"], ref["tokens"]) and torch.equal(device["tokens"], ref["tokens"])  # forced
    return {"ref": ref["logits"], "noise": noise["logits"], "device": device["logits"]}


def test_the_reference_itself_is_exact(answers: dict[str, torch.Tensor]) -> None:
    graded = grade_generation(answers["ref"], answers["ref"].clone(), answers["noise"])
    assert graded["grade"] == "exact" and graded["greedy_match_rate"] == 1.0 and graded["first_divergence_step"] is None
    assert graded["steps"] == STEPS and graded["sigma_ratio"] == 0.0
    assert [g["k"] for g in graded["topk"]] == ["5", "50", "1000", "all"]
    assert all(g["max_abs_error"] == 0 and g["max_rel_error"] == 0 for g in graded["topk"])


def test_bfloat16_noise_grades_bfloat16_noise_or_better(answers: dict[str, torch.Tensor]) -> None:
    """A bfloat16 device (another kernel's rounding) and the bfloat16 CPU run itself."""
    for device in (answers["device"], answers["noise"]):
        graded = grade_generation(answers["ref"], device, answers["noise"])
        assert graded["grade"] in ("exact", "within tolerance", "bfloat16 noise"), graded
        assert graded["failed_step"] is None
    # The CPU bfloat16 run against itself: the σ-ratio is 1 and the distributions are one.
    same = grade_generation(answers["ref"], answers["noise"], answers["noise"])
    assert same["sigma_ratio"] == pytest.approx(1.0) and same["bc"] == pytest.approx(1.0)
    # Logits rounded to bfloat16 from the float32 ones: less than bfloat16's accumulated noise.
    rounded = grade_generation(answers["ref"], answers["ref"].bfloat16().float(), answers["noise"])
    assert rounded["grade"] in ("exact", "within tolerance", "bfloat16 noise") and rounded["sigma_ratio"] < 1


def test_a_swapped_top_token_at_step_5_diverges_at_step_5(answers: dict[str, torch.Tensor]) -> None:
    swapped = perturb_logits(answers["noise"], "perturb-swap")
    graded = grade_generation(answers["ref"], swapped, answers["noise"])
    assert (graded["grade"], graded["failed_step"]) == ("diverges", SWAP_STEP)
    assert graded["first_divergence_step"] == SWAP_STEP
    assert graded["topk"][0]["step"] == SWAP_STEP and graded["topk"][0]["max_rel_error"] > 0.011
    # One token among steps x vocab moves the aggregate little: the swap is judged on its own, never rescued.
    assert graded["bc"] >= 0.99


def test_a_lost_weight_fails_at_step_0(answers: dict[str, torch.Tensor]) -> None:
    lost = answers["noise"].clone()
    lost += torch.randn(lost.shape, generator=torch.Generator().manual_seed(1)) * lost.std()
    graded = grade_generation(answers["ref"], lost, answers["noise"])
    assert (graded["grade"], graded["failed_step"]) == ("diverges", 0)
    assert graded["sigma_ratio"] > 1 and graded["bc"] < 0.99


def test_a_drift_after_an_agreeing_first_step_fails_where_todays_rule_passes(answers: dict[str, torch.Tensor]) -> None:
    drift = perturb_logits(answers["noise"], "perturb-drift")
    first = torch.nn.functional.cosine_similarity(drift[0].double(), answers["ref"][0].double(), dim=-1).min()
    # the first step agrees: the first-step cosine rule of older records passes it
    assert first >= task_source("text-generation").cosine_threshold
    graded = grade_generation(answers["ref"], drift, answers["noise"])
    assert graded["grade"] == "diverges" and graded["failed_step"] > 0


def test_without_a_noise_run_nothing_is_rescued(answers: dict[str, torch.Tensor]) -> None:
    noisy = answers["ref"] + answers["ref"].std() * 0.05 * torch.randn(answers["ref"].shape)
    assert grade_generation(answers["ref"], noisy, None)["grade"] == "diverges"
    graded = grade_generation(answers["ref"], answers["noise"], None)
    assert graded["sigma_ratio"] is None and graded["bc"] is None


def test_a_near_tie_within_the_divergence_tolerance_is_within_tolerance() -> None:
    ref = torch.zeros(3, 1, 8)
    ref[:, 0, 2] = 1.0
    ref[:, 0, 5] = 1.0 - 1e-6  # a near tie: the reference picks 2
    device = ref.clone()
    device[1, 0, 5] = 1.0 + 5e-4  # the device picks 5, its own logits 0.0005 apart: NxD Inference's 0.001 holds
    graded = grade_generation(ref, device, None)
    assert graded["grade"] == "within tolerance" and graded["first_divergence_step"] == 1
    device[1, 0, 5] = 1.0 + 5e-3  # 0.005 apart: beyond the tolerance, and no noise run to tell bfloat16's from it
    assert grade_generation(ref, device, None)["grade"] == "diverges"


def test_the_figures_themselves() -> None:
    a = torch.tensor([0.0, 0.0, 1.0, 1.0])
    assert bhattacharyya(a, a) == pytest.approx(1.0) and bhattacharyya(a, a + 10) == 0.0
    assert bhattacharyya(torch.ones(4), torch.ones(4)) == 1.0
    assert sigma_ratio(2 * a, a) == pytest.approx(2.0) and sigma_ratio(torch.zeros(2), torch.zeros(2)) == 0.0
    out = torch.randn(4, 32, generator=torch.Generator().manual_seed(0))
    assert grade_output(out, out.clone(), None, cosine=1.0, threshold=0.99)["grade"] == "exact"
    noisy = out + 1e-3 * torch.randn(4, 32)
    assert grade_output(out, noisy, noisy.clone(), cosine=0.5, threshold=0.99)["grade"] == "bfloat16 noise"
    assert grade_output(out, torch.roll(out, 1, -1), noisy, cosine=0.1, threshold=0.99)["grade"] == "diverges"
