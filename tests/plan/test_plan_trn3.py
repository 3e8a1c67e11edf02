"""The planner on Trainium3 (trn3.48xlarge): a dense model, an MoE and MX-quantized checkpoints, beside Trainium2.

The configs are the published ones of tests/fixtures/configs (SOURCES.yaml); the MXFP8 block is the shape
compressed-tensors writes for an MX checkpoint (format ``mxfp8-quantized``, one 8-bit scale per 32 weights), as
vLLM Neuron's Qwen3 MXFP8 recipe builds one (docs/neuron-facts.md, "Trainium3").
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from pipeline.discover import Candidate
from pipeline.hardware import GiB
from pipeline.plan import Plan, plan_config, runner_label
from pipeline.queue import build_queue
from tests import FIXTURES
from tests.support.records import fake_revision

CONFIGS = FIXTURES / "configs"
TRN3, TRN2 = "trn3.48xlarge", "trn2.48xlarge"

MXFP8: dict[str, Any] = {
    "config_groups": {
        "group_0": {
            "format": "mxfp8-quantized",
            "input_activations": None,
            "output_activations": None,
            "targets": ["Linear"],
            "weights": {"dynamic": False, "group_size": 32, "num_bits": 8, "scale_dtype": "torch.uint8",
                        "strategy": "group", "symmetric": True, "type": "float"},
        }
    },
    "format": "mxfp8-quantized", "ignore": ["lm_head"], "kv_cache_scheme": None,
    "quant_method": "compressed-tensors", "quantization_status": "compressed",
}  # fmt: skip


@functools.cache
def load(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def mx(name: str) -> dict[str, Any]:
    return load(name) | {"quantization_config": MXFP8}


@functools.cache
def planned(name: str, instance: str, lnc: int | None = None, quantized: bool = False) -> Plan:
    return plan_config(mx(name) if quantized else load(name), instance=instance, lnc=lnc)


def test_a_dense_27b_needs_half_the_trainium3_cores_of_trainium2() -> None:
    trn3, trn2 = planned("gemma-3-27b-it", TRN3), planned("gemma-3-27b-it", TRN2)
    assert (trn3.instance, trn3.lnc, trn3.memory_per_core_bytes) == (TRN3, 2, 36 * GiB)
    assert trn3.fits and trn2.fits and trn3.params == trn2.params
    # ~60 GiB in bfloat16: two 36 GiB logical cores hold it, 24 GiB ones need four.
    assert (trn3.cores, trn2.cores) == (2, 4)
    assert 24 * GiB < trn3.per_core_bytes <= 36 * GiB
    assert runner_label(trn3) == f"trn3-{trn3.cores}c" and runner_label(trn2) == f"trn2-{trn2.cores}c"
    assert "trn3.48xlarge" in trn3.advice
    seventy = planned("llama-3.1-70b", TRN3)
    assert seventy.fits and seventy.per_core_bytes <= 36 * GiB < planned("llama-3.1-70b", TRN2).per_core_bytes * 2


def test_lnc1_on_trainium3_halves_the_memory_of_each_core() -> None:
    plan = planned("llama-3.1-8b", TRN3, lnc=1)
    default = planned("llama-3.1-8b", TRN3)
    assert (plan.lnc, plan.memory_per_core_bytes) == (1, 18 * GiB)
    assert plan.fits and plan.cores >= default.cores
    assert runner_label(plan).startswith("trn3-lnc1-")


def test_an_moe_fits_trainium3_with_expert_parallelism_on_fewer_cores() -> None:
    trn3, trn2 = planned("qwen3-30b-a3b", TRN3), planned("qwen3-30b-a3b", TRN2)
    assert trn3.fits and trn2.fits
    assert trn3.cores <= trn2.cores
    assert trn3.per_core_bytes <= trn3.memory_per_core_bytes
    assert trn3.active_params < trn3.params
    big = planned("gpt-oss-120b", TRN3)
    assert big.fits and big.ep_degree is not None and 128 % big.ep_degree == 0


def test_an_mxfp8_checkpoint_fits_trainium3_in_its_mx_format() -> None:
    plan, bf16 = planned("llama-3.1-70b", TRN3, quantized=True), planned("llama-3.1-70b", TRN3)
    q = plan.quantization
    assert q is not None and (q["method"], q["mx_format"], q["held_as"]) == ("compressed-tensors", "mxfp8", "mxfp8")
    assert q["support"] == "unverified" and "Trainium3 runs MXFP8 natively" in q["reason"]
    assert plan.fits and not plan.advice.startswith("cannot load")
    # The Linear weights at 8.25 bits, the embeddings and norms in bfloat16: about half the bf16 weights.
    assert 0.5 * bf16.weights_bytes < plan.weights_bytes < 0.6 * bf16.weights_bytes
    assert plan.cores < bf16.cores and plan.per_core_bytes <= 36 * GiB
    assert abs(plan.download_bytes - plan.weights_bytes) < 0.01 * plan.weights_bytes  # held as it is stored


def test_an_mxfp8_checkpoint_is_refused_on_trainium2_with_the_reason() -> None:
    plan = planned("llama-3.1-70b", TRN2, quantized=True)
    q = plan.quantization
    assert q is not None and (q["support"], q["held_as"], q["mx_format"]) == ("unsupported", None, "mxfp8")
    assert "MX quantization is only supported on trn3 and above" in q["reason"] and "aws-neuron-sdk#1366" in q["reason"]
    assert plan.advice.startswith("cannot load its compressed-tensors checkpoint on a trn2.48xlarge (the MX formats")
    for name in ("trn2.3xlarge", "trn1.32xlarge"):
        assert plan_config(mx("llama-3.1-8b"), instance=name).quantization["support"] == "unsupported"  # type: ignore[index]


def test_an_mx_moe_fits_trainium3_and_not_trainium2() -> None:
    trn3, trn2 = planned("qwen3-30b-a3b", TRN3, quantized=True), planned("qwen3-30b-a3b", TRN2, quantized=True)
    assert trn3.quantization["support"] == "unverified" and trn3.fits  # type: ignore[index]
    assert trn2.quantization["support"] == "unsupported"  # type: ignore[index]
    assert trn3.weights_bytes < planned("qwen3-30b-a3b", TRN3).weights_bytes


def test_gpt_oss_mxfp4_is_dequantized_by_transformers_on_both_and_says_why() -> None:
    trn3, trn2 = planned("gpt-oss-20b", TRN3), planned("gpt-oss-20b", TRN2)
    for plan in (trn3, trn2):
        q = plan.quantization
        assert q is not None and (q["support"], q["held_as"], q["mx_format"]) == ("dequantized", "bfloat16", "mxfp4")
        assert plan.weights_bytes == plan.params * 2
    assert trn3.quantization["reason"].startswith("Trainium3 runs MXFP4 natively, but")  # type: ignore[index]
    assert "aws-neuron-sdk#1366" in trn2.quantization["reason"]  # type: ignore[index]


@pytest.mark.parametrize(("instance", "kept"), [(TRN3, True), (TRN2, False)])
def test_the_queue_sends_an_mx_checkpoint_to_trainium3_only(instance: str, kept: bool) -> None:
    rev = fake_revision("m")
    candidates = [Candidate(model_id="org/llama-mxfp8", task="text-generation", view="trending", rank=1, sha=rev)]
    queue = build_queue(
        candidates=candidates,
        dataset_root=None,
        toolchain={"transformers": "5.0.0"},
        planner=lambda c: plan_config(mx("llama-3.1-8b"), instance=instance),
        instance=instance,
    )
    assert [e["model_id"] for e in queue.entries] == (["org/llama-mxfp8"] if kept else [])
    if kept:
        assert queue.entries[0]["runner"].startswith("trn3-")
    else:
        (skipped,) = queue.skipped
        assert skipped["reason"].startswith("unsupported quantization: compressed-tensors: the MX formats")


def test_trncat_plan_prints_the_mx_weights_it_holds_on_trainium3(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from pipeline.cli import main

    (tmp_path / "config.json").write_text(json.dumps(mx("llama-3.1-8b")))
    assert main(["plan", str(tmp_path), "--instance", TRN3]) == 0
    text = capsys.readouterr().out
    assert "held as mxfp8 on the device (Neuron support: unverified: Trainium3 runs MXFP8 natively" in text
    assert "mxfp8 weights, bfloat16 compute: weights " in text and "trn3.48xlarge, LNC=2, 36 GiB per NeuronCore" in text
    assert main(["plan", str(tmp_path), "--instance", TRN2]) == 0
    assert "not loadable on the device (Neuron support: unsupported: the MX formats run on Trainium3 only" in (
        capsys.readouterr().out
    )
