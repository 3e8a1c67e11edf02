"""Every tolerance the answer check grades with, in one table, each with the published source it is quoted from.

The values are the field's, not this project's: vLLM Neuron's logit validation (the top-k tolerance map and its
three-way rule's σ-ratio and Bhattacharyya thresholds), NxD Inference's accuracy check (the divergence difference
tolerance) and InferenceX's eval floors (the task score, not applied yet: it needs a serving endpoint). The two
cosine thresholds the embedding and text-to-image checks keep, and the speech-recognition check's largest word error
rate against the reference's transcripts, are this project's own (docs/methodology.md, "The
answer check"). ``tests/bench/test_tolerances.py`` checks the table against the quoted text; docs/methodology.md
explains each row.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.taskspec import TASK_SOURCES

VLLM_NEURON_DOC = "aws-neuron-sdk: vllm-neuron/docs/design/accuracy/logit_validation_design.md"
VLLM_NEURON_CODE = "vllm-neuron: vllm_neuron/accuracy/logit_validation.py"
NXDI = "neuronx-distributed-inference: src/neuronx_distributed_inference/utils/accuracy.py"
INFERENCEX = "InferenceX: utils/evals/thresholds.yaml"
PROJECT = "trncat: docs/methodology.md, 'The answer check'"


@dataclass(frozen=True)
class Tolerance:
    """One row: its value, where it is published and the published text it is read from (verbatim)."""

    value: float
    source: str
    quote: str
    used: bool = True


#: name -> the row. Top-k rows hold the relative tolerance (rtol); their absolute one is ``TOPK_ATOL``.
TOLERANCES: dict[str, Tolerance] = {
    "topk_atol": Tolerance(1e-5, VLLM_NEURON_DOC, '"5": (1e-5, 0.011)'),
    "top5_rtol": Tolerance(0.011, VLLM_NEURON_DOC, '"5": (1e-5, 0.011)'),
    "top50_rtol": Tolerance(0.02, VLLM_NEURON_DOC, '"50": (1e-5, 0.02)'),
    "top1000_rtol": Tolerance(0.03, VLLM_NEURON_DOC, '"1000": (1e-5, 0.03)'),
    "all_rtol": Tolerance(0.05, VLLM_NEURON_DOC, '"all": (1e-5, 0.05)'),
    "sigma_ratio_max": Tolerance(1.0, VLLM_NEURON_DOC, "aggregate σ-ratio ≤ `1.0` (`agg_sigma_ratio_threshold`)"),
    "bc_min": Tolerance(0.99, VLLM_NEURON_DOC, "aggregate BC ≥ `0.99` (`agg_bc_threshold`)"),
    "bc_bins": Tolerance(
        100, VLLM_NEURON_CODE, "def _compute_bc(errors1: np.ndarray, errors2: np.ndarray, num_bins: int = 100)"
    ),
    "divergence_difference_tol": Tolerance(0.001, NXDI, "divergence_difference_tol: float = 0.001"),
    "bfloat16_mantissa_bits": Tolerance(7, VLLM_NEURON_CODE, "BF16 = 7, FP16 = 10, FP32 = 23"),
    "gsm8k_floor": Tolerance(0.90, INFERENCEX, "gsm8k: 0.90", used=False),
    # each task's own (the generation tasks' logits cosine is recorded, their grade decides): its spec's threshold
    **{f"{s.cosine_field}_{'min' if s.cosine_field.endswith('cosine') else 'max'}": Tolerance(
        s.cosine_threshold, PROJECT, f"{s.cosine_threshold:g}") for s in TASK_SOURCES.values()
       if s.cosine_field != "logits_cosine"},
}  # fmt: skip

#: The top-k groups of the rule, in the published order of strictness: (group, atol, rtol).
TOPK_GROUPS: tuple[tuple[str, float, float], ...] = tuple(
    (group, TOLERANCES["topk_atol"].value, TOLERANCES[f"top{group}_rtol" if group != "all" else "all_rtol"].value)
    for group in ("5", "50", "1000", "all")
)
