"""The tolerance table holds the cited values: each row against the published text it quotes, and that text
against the sources as published (copied here from the pages, so a row edited by hand fails twice)."""

from __future__ import annotations

import ast
import re

from pipeline.bench import tolerances as t

#: vLLM Neuron's logit validation design (aws-neuron-sdk, vllm-neuron/docs/design/accuracy/
#: logit_validation_design.md), "Default Tolerances", verbatim.
VLLM_NEURON_MAP = """DEFAULT_TOLERANCE_MAP = {
    "5": (1e-5, 0.011),
    "50": (1e-5, 0.02),
    "1000": (1e-5, 0.03),
    "all": (1e-5, 0.05),
}"""
#: The same page, "Two-Way vs Three-Way Comparison", verbatim.
VLLM_NEURON_ROUTES = """- aggregate σ-ratio ≤ `1.0` (`agg_sigma_ratio_threshold`), **or**
- aggregate BC ≥ `0.99` (`agg_bc_threshold`)."""
#: neuronx-distributed-inference, src/neuronx_distributed_inference/utils/accuracy.py, check_accuracy_logits.
NXDI_SIGNATURE = "    divergence_difference_tol: float = 0.001,"
#: InferenceX, utils/evals/thresholds.yaml.
INFERENCEX = "default:\n  gsm8k: 0.90\n"


def _number(text: str) -> float:
    return float(re.findall(r"\d+(?:\.\d+)?(?:e-?\d+)?", text)[-1])


def test_the_top_k_rows_are_vllm_neurons_published_map() -> None:
    published = ast.literal_eval(VLLM_NEURON_MAP.split("=", 1)[1].strip())
    assert [(g, a, r) for g, (a, r) in published.items()] == list(t.TOPK_GROUPS)
    for group, (atol, rtol) in published.items():
        row = t.TOLERANCES["all_rtol" if group == "all" else f"top{group}_rtol"]
        assert row.value == rtol and row.source == t.VLLM_NEURON_DOC
        assert row.quote in VLLM_NEURON_MAP  # the row quotes the page, verbatim
        assert ast.literal_eval(row.quote.split(":", 1)[1].strip()) == (atol, rtol)
    assert t.TOLERANCES["topk_atol"].value == 1e-5


def test_the_three_way_and_divergence_rows_are_the_published_values() -> None:
    for name, value in (("sigma_ratio_max", 1.0), ("bc_min", 0.99)):
        row = t.TOLERANCES[name]
        assert row.quote in VLLM_NEURON_ROUTES and row.value == value == _number(row.quote.split("`")[1])
    row = t.TOLERANCES["divergence_difference_tol"]
    assert row.quote in NXDI_SIGNATURE and row.value == 0.001 == _number(row.quote)
    assert row.source == t.NXDI
    floor = t.TOLERANCES["gsm8k_floor"]
    assert floor.quote in INFERENCEX and floor.value == 0.90 and not floor.used  # the task score: not applied yet


def test_every_row_names_a_source_and_quotes_its_value() -> None:
    for name, row in t.TOLERANCES.items():
        assert row.source in {t.VLLM_NEURON_DOC, t.VLLM_NEURON_CODE, t.NXDI, t.INFERENCEX, t.PROJECT}, name
        if name == "topk_atol":
            assert "(1e-5," in row.quote and row.value == 1e-5
        elif name != "bfloat16_mantissa_bits":
            assert _number(row.quote) == row.value, name
    assert t.TOLERANCES["bfloat16_mantissa_bits"].quote.startswith("BF16 = 7")
    assert (t.TOLERANCES["embedding_cosine_min"].value, t.TOLERANCES["denoiser_cosine_min"].value) == (0.99, 0.98)
