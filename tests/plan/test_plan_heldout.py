"""The planner on the published configs of models that trend now: MoE, expert parallelism, quantized checkpoints.

The configs and their published figures are in tests/fixtures/configs (SOURCES.yaml says where each comes from).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.cli import main
from pipeline.discover import Candidate
from pipeline.hardware import GiB
from pipeline.plan import Plan, plan_config, plan_model, runner_label
from pipeline.queue import build_queue
from tests import FIXTURES
from tests.support.records import fake_revision

CONFIGS = FIXTURES / "configs"
HELD_OUT: dict[str, dict[str, Any]] = yaml.safe_load((CONFIGS / "SOURCES.yaml").read_text())
WITH_ACTIVE = sorted(name for name, entry in HELD_OUT.items() if "active" in entry)

#: The quantization_config blocks of published quantized checkpoints, attached to the fixture of their base
#: model: one per method the planner must recognise (mxfp4 and fp8 are the held-out gpt-oss and DeepSeek-V3).
QUANTIZED: dict[str, tuple[str, dict[str, Any]]] = {
    "bitsandbytes": (  # unsloth/Llama-3.2-1B-Instruct-bnb-4bit
        "llama-3.2-1b",
        {
            "_load_in_4bit": True, "_load_in_8bit": False, "bnb_4bit_compute_dtype": "bfloat16",
            "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
            "llm_int8_enable_fp32_cpu_offload": False, "llm_int8_has_fp16_weight": False,
            "llm_int8_skip_modules": None, "llm_int8_threshold": 6.0, "load_in_4bit": True, "load_in_8bit": False,
            "quant_method": "bitsandbytes",
        },
    ),
    "gptq": (  # Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4
        "qwen2.5-7b-instruct",
        {
            "bits": 4, "damp_percent": 0.01, "desc_act": False, "group_size": 128, "modules_in_block_to_quantize": None,
            "quant_method": "gptq", "static_groups": False, "sym": True, "true_sequential": True,
        },
    ),
    "awq": (  # Qwen/Qwen2.5-7B-Instruct-AWQ
        "qwen2.5-7b-instruct",
        {"bits": 4, "group_size": 128, "modules_to_not_convert": None, "quant_method": "awq", "version": "gemm",
         "zero_point": True},
    ),
    "compressed-tensors": (  # RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic
        "llama-3.1-8b",
        {
            "config_groups": {
                "group_0": {
                    "input_activations": {"dynamic": True, "num_bits": 8, "strategy": "token", "symmetric": True,
                                          "type": "float"},
                    "output_activations": None,
                    "targets": ["Linear"],
                    "weights": {"dynamic": False, "num_bits": 8, "observer": "minmax", "strategy": "channel",
                                "symmetric": True, "type": "float"},
                }
            },
            "format": "float-quantized", "ignore": ["lm_head"], "kv_cache_scheme": None,
            "quant_method": "compressed-tensors", "quantization_status": "compressed",
        },
    ),
}  # fmt: skip


@functools.cache
def load(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@functools.cache
def planned(name: str) -> Plan:
    return plan_config(load(name))


def quantized_config(method: str) -> dict[str, Any]:
    base, block = QUANTIZED[method]
    return load(base) | {"quantization_config": block}


def test_at_least_twelve_held_out_configs_across_families() -> None:
    assert len(HELD_OUT) >= 12
    assert {p.stem for p in CONFIGS.glob("*.json")} >= set(HELD_OUT)
    families = {load(name)["model_type"] for name in HELD_OUT}
    assert {
        "gpt_oss",
        "qwen3_moe",
        "deepseek_v3",
        "mixtral",
        "llama4",
        "qwen2_5_vl",
        "gemma3",
        "qwen3_next",
    } <= families
    for entry in HELD_OUT.values():
        assert entry["repo"].count("/") == 1 and entry["source"]


@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_params_within_one_percent_of_the_published_total(name: str) -> None:
    plan, entry = planned(name), HELD_OUT[name]
    assert plan.source == "meta-device"
    assert abs(plan.params - entry["total"]) <= entry["total_tolerance"] * entry["total"], plan.params


@pytest.mark.parametrize("name", WITH_ACTIVE)
def test_active_params_match_the_published_convention(name: str) -> None:
    plan, entry = planned(name), HELD_OUT[name]
    convention = entry["active_convention"]
    counted = plan.active_params if convention == "with_embedding" else plan.active_params_without_embedding
    assert plan.active_params_without_embedding < plan.active_params < plan.params
    assert abs(counted - entry["active"]) <= entry["active_tolerance"] * entry["active"], (convention, counted)


def test_gpt_oss_active_counts_are_openais_to_the_ten_million() -> None:
    assert round(planned("gpt-oss-20b").active_params_without_embedding, -7) == 3_610_000_000
    assert round(planned("gpt-oss-120b").active_params_without_embedding, -7) == 5_130_000_000


@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_total_bytes_are_within_twice_weights_and_kv_cache(name: str) -> None:
    plan = planned(name)
    assert (
        plan.weights_bytes + plan.kv_cache_bytes <= plan.total_bytes <= 2 * (plan.weights_bytes + plan.kv_cache_bytes)
    )
    assert plan.total_bytes == plan.per_core_bytes * plan.cores
    assert plan.total_bytes == plan.weights_bytes + plan.kv_cache_bytes + plan.overhead_bytes


def test_gpt_oss_20b_fits_a_trn2_48xlarge_with_expert_parallelism() -> None:
    plan = planned("gpt-oss-20b")
    assert plan.instance == "trn2.48xlarge" and plan.fits
    assert plan.ep_degree == plan.tp_degree == plan.cores == 2
    assert plan.per_core_bytes <= plan.memory_per_core_bytes
    assert "expert parallelism" in plan.advice
    assert "distributed_config=DistributedConfig(tp_size=2, ep_size=2), torchrun --nproc-per-node 2" in plan.advice
    assert runner_label(plan) == "trn2-2c"


def test_gpt_oss_120b_splits_its_128_experts_over_16_cores() -> None:
    plan = planned("gpt-oss-120b")
    assert plan.fits and plan.ep_degree == 16
    assert plan.total_bytes < 2 * plan.weights_bytes  # no copies of the experts on cores the layout does not use


def test_expert_parallel_degrees_split_the_experts_evenly() -> None:
    # 24 experts: degree 16 would not split them, so the planner must stop at 8.
    config = load("gpt-oss-120b") | {"num_local_experts": 24}
    plan = plan_config(config)
    assert plan.ep_degree is None or 24 % plan.ep_degree == 0


def test_a_model_without_an_ep_plan_is_never_planned_expert_parallel() -> None:
    for name in ("llama-4-scout-17b-16e-instruct", "qwen2.5-vl-72b-instruct", "gemma-3-27b-it"):
        assert planned(name).ep_degree is None


def test_a_model_that_fits_nowhere_reports_the_smallest_layout_not_the_widest_copies() -> None:
    plan = planned("deepseek-v3")
    assert not plan.fits and plan.tp_degree is None
    # The bytes of a layout that would hold it, not 64 copies of every weight outside the tp plan.
    assert plan.total_bytes < 1.3 * (plan.weights_bytes + plan.kv_cache_bytes)
    assert "outside transformers' tensor-parallel plan, whole on every core" in plan.advice


def test_gpt_oss_download_is_the_published_checkpoint_size() -> None:
    for name in ("gpt-oss-20b", "gpt-oss-120b"):
        plan = planned(name)
        assert abs(plan.download_bytes / GiB - HELD_OUT[name]["download_gib"]) <= 0.02 * HELD_OUT[name]["download_gib"]
        assert plan.weights_bytes == plan.params * 2  # held dequantized, in bfloat16


@pytest.mark.parametrize(
    ("method", "support"),
    [("bitsandbytes", "unsupported"), ("gptq", "unsupported"), ("awq", "unsupported"),
     ("compressed-tensors", "unverified")],
)  # fmt: skip
def test_each_quantization_method_is_recognised(method: str, support: str) -> None:
    plan = plan_config(quantized_config(method))
    assert plan.quantization is not None
    assert (plan.quantization["method"], plan.quantization["support"]) == (method, support)
    assert plan.download_bytes < plan.weights_bytes  # quantized on disk, 16-bit or wider in memory
    assert (plan.quantization["held_as"] is None) == (support == "unsupported")
    if support == "unsupported":
        assert plan.advice.startswith(f"cannot load its {method} checkpoint on Neuron")


def test_four_bit_checkpoints_download_about_a_quarter_of_their_bf16_weights() -> None:
    for method in ("gptq", "awq"):
        plan = plan_config(quantized_config(method))
        # Qwen2.5-7B-Instruct's 4-bit checkpoints hold its embeddings and head in 16 bits: ~5.6 GB published.
        assert 5.2e9 < plan.download_bytes < 6.0e9, plan.download_bytes


@pytest.mark.parametrize(
    ("name", "method"),
    [("gpt-oss-20b", "mxfp4"), ("deepseek-v3", "fp8"), ("bitsandbytes", "bitsandbytes"), ("gptq", "gptq"),
     ("awq", "awq"), ("compressed-tensors", "compressed-tensors")],
)  # fmt: skip
def test_trncat_plan_prints_both_sizes_and_the_device_support(
    name: str, method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = quantized_config(name) if name in QUANTIZED else load(name)
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["plan", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    plan = plan_model(tmp_path)
    assert plan.quantization is not None
    line = next(line for line in text.splitlines() if line.startswith(f"{method} checkpoint: download "))
    assert f"Neuron support: {plan.quantization['support']}" in line
    assert ("not loadable on the device" in line) == (plan.quantization["support"] == "unsupported")
    assert "weights " in text  # the in-memory size
    assert main(["plan", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["download_bytes"] == plan.download_bytes and data["quantization"]["method"] == method


def test_queue_records_an_unsupported_quantization_as_excluded() -> None:
    def planner(candidate: Candidate) -> Plan:
        name = "bitsandbytes" if candidate.model_id.startswith("bnb/") else "compressed-tensors"
        return plan_config(quantized_config(name))

    rev = fake_revision("q")
    candidates = [
        Candidate(model_id=m, task="text-generation", view="trending", rank=i, sha=rev)
        for i, m in enumerate(["bnb/llama-4bit", "redhat/llama-fp8"], 1)
    ]
    queue = build_queue(candidates=candidates, dataset_root=None, toolchain={"transformers": "5.0.0"}, planner=planner)
    assert [e["model_id"] for e in queue.entries] == ["redhat/llama-fp8"]  # unverified: the benchmark tells
    (skipped,) = queue.skipped
    assert skipped["model_id"] == "bnb/llama-4bit"
    assert skipped["reason"].startswith("unsupported quantization: bitsandbytes: ")


def test_a_local_checkpoint_reports_its_exact_download_bytes(tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    files = list(tmp_path.glob("*.safetensors"))
    on_disk = sum(f.stat().st_size - 8 - int.from_bytes(f.read_bytes()[:8], "little") for f in files)
    plan = plan_model(tmp_path)
    assert plan.download_bytes == on_disk
    assert plan.quantization is None
