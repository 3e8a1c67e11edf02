"""The memory planner: exact parameter counts, bytes, NeuronCores, advice and runner labels."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import ConfigError, PlanError
from pipeline.hardware import GiB
from pipeline.plan import format_plan, normalize_dtype, plan_config, plan_model, runner_label
from pipeline.plan import params as params_module
from pipeline.workload import Workload
from tests import FIXTURES as TEST_FIXTURES
from tests import ROOT

FIXTURES = TEST_FIXTURES / "configs"

#: fixture -> (Hub id, published parameter count). Counts are the Hub's safetensors totals shown on each
#: model page ("Model size"), which equal the model cards' figures at their precision; GPT-2's is
#: OpenAI's 124M (the Hub's 137M also counts the stored attention-mask buffers).
PUBLISHED: dict[str, tuple[str, int]] = {
    "llama-3.1-8b": ("meta-llama/Llama-3.1-8B", 8_030_261_248),
    "llama-3.1-70b": ("meta-llama/Llama-3.1-70B", 70_553_706_496),
    "llama-3.2-1b": ("meta-llama/Llama-3.2-1B", 1_235_814_400),
    "qwen2.5-7b-instruct": ("Qwen/Qwen2.5-7B-Instruct", 7_615_616_512),
    "qwen2.5-0.5b": ("Qwen/Qwen2.5-0.5B", 494_032_768),
    "mistral-7b-v0.1": ("mistralai/Mistral-7B-v0.1", 7_241_732_096),
    "gemma-2-9b": ("google/gemma-2-9b", 9_241_705_984),
    "gemma-2-2b": ("google/gemma-2-2b", 2_614_341_888),
    "phi-3-mini-4k-instruct": ("microsoft/Phi-3-mini-4k-instruct", 3_821_079_552),
    "mixtral-8x7b-v0.1": ("mistralai/Mixtral-8x7B-v0.1", 46_702_792_704),
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B", 30_532_122_624),
    "llava-1.5-7b-hf": ("llava-hf/llava-1.5-7b-hf", 7_063_427_072),
    "qwen2-vl-2b-instruct": ("Qwen/Qwen2-VL-2B-Instruct", 2_208_985_600),
    "smolvlm-instruct": ("HuggingFaceTB/SmolVLM-Instruct", 2_246_272_880),
    "gpt2": ("openai-community/gpt2", 124_000_000),
}
#: MoE active parameters per token as published: Mixtral "12.9B active", Qwen3-30B-A3B "3.3B activated".
PUBLISHED_ACTIVE: dict[str, tuple[int, float]] = {
    "mixtral-8x7b-v0.1": (12_900_000_000, 0.005),
    # Qwen rounds to two significant digits; 3.35B counted with both embedding tables.
    "qwen3-30b-a3b": (3_300_000_000, 0.02),
}
REQUIRED_KEYS = {
    "params", "active_params", "weights_bytes", "kv_cache_bytes", "overhead_bytes", "total_bytes", "cores",
    "instance", "lnc", "fits", "advice", "source", "tp_degree", "kv_replication", "dtype",
}  # fmt: skip


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_every_fixture_has_a_published_count() -> None:
    import yaml

    held_out = yaml.safe_load((FIXTURES / "SOURCES.yaml").read_text())  # checked in test_plan_heldout.py
    assert {p.stem for p in FIXTURES.glob("*.json")} == set(PUBLISHED) | set(held_out)
    assert len(PUBLISHED) >= 10


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_match_the_published_count(name: str) -> None:
    plan = plan_config(load(name))
    published = PUBLISHED[name][1]
    assert plan.source == "meta-device"
    assert abs(plan.params - published) <= 0.005 * published, (plan.params, published)


@pytest.mark.parametrize("name", sorted(PUBLISHED_ACTIVE))
def test_moe_active_params_match_the_published_count(name: str) -> None:
    plan = plan_config(load(name))
    published, tolerance = PUBLISHED_ACTIVE[name]
    assert plan.active_params < plan.params
    assert abs(plan.active_params - published) <= tolerance * published, plan.active_params


def test_dense_models_use_every_parameter_per_token() -> None:
    plan = plan_config(load("llama-3.1-8b"))
    assert plan.active_params == plan.params


# ---- tiny models built here: params equal what the instantiated model holds (must-hold 1) ----


def _tiny_llama(**overrides: Any) -> Any:
    from transformers import LlamaConfig

    sizes = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    return LlamaConfig(**{**sizes, "num_attention_heads": 4, "num_key_value_heads": 2, **overrides})


def _tiny_configs() -> dict[str, Any]:
    from transformers import CLIPVisionConfig, LlavaConfig, MixtralConfig

    vision = CLIPVisionConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=32, patch_size=8
    )
    return {
        "llama": _tiny_llama(),
        "llama-tied": _tiny_llama(tie_word_embeddings=True),
        "llava": LlavaConfig(text_config=_tiny_llama(), vision_config=vision, image_token_index=127),
        "mixtral": MixtralConfig(
            vocab_size=128,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
        ),  # fmt: skip
    }


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    built = {}
    for name, config in _tiny_configs().items():
        torch.manual_seed(0)
        auto = AutoModelForImageTextToText if name == "llava" else AutoModelForCausalLM
        model = auto.from_config(config)
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        built[name] = (folder, model)
    return built


@pytest.mark.parametrize("name", ["llama", "llama-tied", "llava", "mixtral"])
def test_tiny_model_params_equal_the_instantiated_numel(name: str, tiny_models: dict[str, Any]) -> None:
    folder, model = tiny_models[name]
    plan = plan_model(folder)
    assert plan.params == sum(p.numel() for p in model.parameters())
    assert plan.source == "meta-device"
    assert plan.model == str(folder)
    assert plan.architecture == type(model).__name__


def test_tied_embeddings_count_once(tiny_models: dict[str, Any]) -> None:
    untied = plan_model(tiny_models["llama"][0]).params
    tied = plan_model(tiny_models["llama-tied"][0]).params
    assert untied - tied == 128 * 32  # one vocab x hidden matrix


def test_tiny_moe_active_params_are_top_k_of_the_experts(tiny_models: dict[str, Any]) -> None:
    folder, model = tiny_models["mixtral"]
    experts = sum(p.numel() for n, p in model.named_parameters() if "experts" in n.split("."))
    total = sum(p.numel() for p in model.parameters())
    assert experts > 0
    assert plan_model(folder).active_params == total - experts + experts * 2 // 4


def test_unknown_architecture_in_a_folder_counts_safetensors_headers(
    tiny_models: dict[str, Any], tmp_path: Path
) -> None:
    folder, model = tiny_models["llama"]
    for file in folder.iterdir():
        (tmp_path / file.name).write_bytes(file.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="trncat_unknown", architectures=["TrncatUnknownForCausalLM"])
    (tmp_path / "config.json").write_text(json.dumps(config))
    plan = plan_model(tmp_path)
    assert plan.source == "safetensors"
    assert plan.params == sum(p.numel() for p in model.parameters())


# ---- Hub ids go through the injected Hub; nothing leaves this machine ----


class FakeHub:
    """The two Hub reads the planner makes, answered from memory and recorded."""

    def __init__(self, config: dict[str, Any], params: int | None = None) -> None:
        self.config, self.params = config, params
        self.calls: list[tuple[str, str, str | None]] = []

    def fetch_json(self, model_id: str, filename: str, *, revision: str | None = None) -> dict[str, Any]:
        self.calls.append(("config" if filename == "config.json" else filename, model_id, revision))
        return self.config

    def fetch_safetensors_params(self, model_id: str, *, revision: str | None = None) -> int | None:
        self.calls.append(("params", model_id, revision))
        return self.params


def test_hub_id_fetches_the_config_and_never_the_safetensors_of_a_known_architecture() -> None:
    hub = FakeHub(load("mistral-7b-v0.1"))
    plan = plan_model("mistralai/Mistral-7B-v0.1", revision="a" * 40, hub=hub)  # type: ignore[arg-type]
    assert hub.calls == [("config", "mistralai/Mistral-7B-v0.1", "a" * 40)]
    assert (plan.model, plan.revision, plan.params) == ("mistralai/Mistral-7B-v0.1", "a" * 40, 7_241_732_096)


def test_hub_id_of_an_unknown_architecture_uses_safetensors_metadata() -> None:
    config = {"model_type": "trncat_unknown", "architectures": ["X"], "num_hidden_layers": 2, "hidden_size": 64}
    hub = FakeHub(config, params=3_000_000_000)
    plan = plan_model("org/custom", hub=hub)  # type: ignore[arg-type]
    assert [c[0] for c in hub.calls] == ["config", "params"]
    assert (plan.source, plan.params, plan.active_params) == ("safetensors", 3_000_000_000, 3_000_000_000)
    assert plan.weights_bytes == 6_000_000_000


def test_a_hub_id_without_a_hub_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="needs a Hub client"):
        plan_model("org/custom")


def test_unknown_architecture_without_safetensors_metadata_is_a_plan_error() -> None:
    config = {"model_type": "trncat_unknown", "architectures": ["X"]}
    with pytest.raises(PlanError, match="trncat_unknown"):
        plan_model("org/custom", hub=FakeHub(config, params=None))  # type: ignore[arg-type]
    with pytest.raises(PlanError, match="cannot count"):
        plan_config(config)


@pytest.mark.parametrize(
    ("contents", "match"),
    [(None, "no config.json"), ("{not json", "unreadable config.json"), ("[1, 2]", "not a JSON object")],
)
def test_bad_local_folders_are_plan_errors(tmp_path: Path, contents: str | None, match: str) -> None:
    if contents is not None:
        (tmp_path / "config.json").write_text(contents)
    with pytest.raises(PlanError, match=match):
        plan_model(tmp_path)


def test_missing_path_is_a_plan_error_not_a_hub_call(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="no such folder"):
        plan_model(tmp_path / "missing", hub=FakeHub({}))  # type: ignore[arg-type]


def test_config_without_model_type_or_architecture_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="neither a model_type nor an architecture"):
        plan_config({"hidden_size": 8})


# ---- the cache: equal configs share one count, different sizes stay exact ----


def test_cache_hits_equal_configs_and_ignores_names() -> None:
    config = load("llama-3.1-8b")
    renamed = dict(copy.deepcopy(config), _name_or_path="someone/finetune", transformers_version="9.9")
    assert params_module.describe(config) is params_module.describe(renamed)


def test_varied_sizes_are_counted_exactly() -> None:
    base = load("llama-3.1-8b")
    per_layer = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336 + 2 * 4096
    counts = [plan_config(dict(base, num_hidden_layers=n)).params for n in (30, 31, 32)]
    assert counts == [8_030_261_248 - 2 * per_layer, 8_030_261_248 - per_layer, 8_030_261_248]


# ---- bytes ----


def test_kv_cache_follows_the_formula_for_gqa() -> None:
    plan = plan_config(load("llama-3.1-8b"), workload=Workload(batch_size=2, input_tokens=100, output_tokens=28))
    # layers x kv heads x head dim x tokens x batch x 2 (k and v) x bf16 bytes
    assert plan.kv_cache_bytes == 32 * 8 * 128 * 128 * 2 * 2 * 2


def test_sliding_window_layers_cache_at_most_the_window() -> None:
    long = Workload(input_tokens=8000, output_tokens=192)
    mistral = plan_config(load("mistral-7b-v0.1"), workload=long)
    assert mistral.kv_cache_bytes == 32 * 8 * 128 * 4096 * 2 * 2
    gemma = plan_config(load("gemma-2-2b"), workload=long)  # alternating sliding (4096) and global layers
    assert gemma.kv_cache_bytes == 13 * 4 * 256 * (4096 + 8192) * 2 * 2


def test_image_tokens_join_the_kv_cache_of_vision_models() -> None:
    plan = plan_config(load("llava-1.5-7b-hf"))
    assert plan.workload["image_size"] == 224  # the image-text-to-text default workload
    tokens = 64 + 32 + 576  # prompt + output + LLaVA-1.5's 24 x 24 patches
    assert plan.kv_cache_bytes == 32 * 32 * 128 * tokens * 2 * 2


@pytest.mark.parametrize(("dtype", "weight_bytes", "kv_bytes"), [("float32", 4, 4), ("fp16", 2, 2), ("fp8", 1, 2)])
def test_dtype_sets_weight_and_cache_bytes(dtype: str, weight_bytes: int, kv_bytes: int) -> None:
    bf16 = plan_config(load("llama-3.2-1b"))
    plan = plan_config(load("llama-3.2-1b"), dtype=dtype)
    assert plan.weights_bytes == plan.params * weight_bytes
    assert plan.kv_cache_bytes == bf16.kv_cache_bytes // 2 * kv_bytes
    assert plan.dtype == normalize_dtype(dtype)


def test_unknown_dtype_and_instance_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown dtype"):
        plan_config(load("llama-3.2-1b"), dtype="int3")
    with pytest.raises(ConfigError, match="unknown instance"):
        plan_config(load("llama-3.2-1b"), instance="trn9.huge")


def test_totals_add_up() -> None:
    for name in ("llama-3.1-70b", "llava-1.5-7b-hf", "mixtral-8x7b-v0.1"):
        plan = plan_config(load(name))
        assert plan.total_bytes == plan.weights_bytes + plan.kv_cache_bytes + plan.overhead_bytes
        assert plan.total_bytes == plan.per_core_bytes * plan.cores
        assert plan.overhead_bytes > 0
        assert plan.per_core_bytes <= plan.memory_per_core_bytes


# ---- cores, advice and labels ----


def test_small_model_fits_one_core() -> None:
    plan = plan_config(load("llama-3.1-8b"))
    assert (plan.fits, plan.cores, plan.tp_degree, plan.kv_replication) == (True, 1, 1, 1)
    assert plan.advice == "fits on one NeuronCore (trn2, LNC=2, 24 GiB)"
    assert runner_label(plan) == "trn2-1c"


def test_large_model_gets_tensor_parallel_advice() -> None:
    plan = plan_config(load("llama-3.1-70b"))
    assert (plan.fits, plan.cores, plan.tp_degree) == (True, 8, 8)
    assert plan.advice == (
        "needs 8 NeuronCores on a trn2.48xlarge: shard with tensor parallelism "
        "(tp_plan='auto', torchrun --nproc-per-node 8)"
    )
    assert runner_label(plan) == "trn2-8c"
    assert plan_config(load("llama-3.1-70b"), instance="trn2.3xlarge", dtype="fp8").cores == 4


def test_lnc1_halves_the_memory_per_core() -> None:
    plan = plan_config(load("llama-3.1-8b"), lnc=1)
    assert plan.memory_per_core_bytes == 12 * GiB
    assert (plan.cores, plan.lnc) == (2, 1)
    assert runner_label(plan) == "trn2-lnc1-2c"


def test_more_cores_than_kv_heads_replicates_them_and_says_so() -> None:
    plan = plan_config(load("llama-3.1-70b"), instance="trn1.32xlarge")
    assert (plan.cores, plan.kv_replication, plan.num_key_value_heads) == (16, 2, 8)
    assert "each key/value head is replicated on 2 cores" in plan.advice
    assert runner_label(plan) == "trn1-16c"


def test_one_kv_head_is_replicated_on_every_core() -> None:
    """Multi-query attention (one kv head) on 2 cores keeps that head on both: the plan says replication 2, not 1."""
    mqa = {"hidden_size": 128 * 128, "num_attention_heads": 128, "num_key_value_heads": 1, "head_dim": 128,
           "intermediate_size": 8 * 8192, "num_hidden_layers": 2, "vocab_size": 1024}  # fmt: skip
    plan = plan_config(load("llama-3.2-1b") | mqa, instance="trn1.32xlarge")
    assert (plan.tp_degree, plan.kv_replication) == (2, 2)
    assert "each key/value head is replicated on 2 cores" in plan.advice


def test_model_too_big_for_the_instance_says_by_how_much_and_what_would_help() -> None:
    # Llama-3.1-405B's shape at twice its depth: 0.8T parameters.
    big = {"hidden_size": 16384, "intermediate_size": 53248, "num_attention_heads": 128, "num_hidden_layers": 252}
    plan = plan_config(load("llama-3.1-70b") | big)
    assert not plan.fits and plan.tp_degree is None and plan.cores > 64
    assert plan.advice.startswith("does not fit one trn2.48xlarge: needs ")
    assert "more than its 1.5 TiB" in plan.advice
    assert "float8" not in plan.advice  # neuronx-cc has no float8_e4m3fn on Trainium2 (NCC_EVRF051)
    assert "no layout transformers runs unmodified holds it" in plan.advice
    assert "splitting its layers across 2 trn2.48xlarge instances (pipeline parallelism) would" in plan.advice
    with pytest.raises(PlanError, match="no runner label"):
        runner_label(plan)


def test_small_instance_suggests_the_large_one() -> None:
    plan = plan_config(load("llama-3.1-70b"), instance="trn2.3xlarge")
    assert not plan.fits
    assert "does not fit one trn2.3xlarge" in plan.advice
    assert "a trn2.48xlarge (8 NeuronCores)" in plan.advice
    assert "float8" not in plan.advice
    assert "pipeline" not in plan.advice  # one larger instance is enough


def test_head_count_limits_the_degree() -> None:
    # 28 heads / 4 kv heads: only degrees 1, 2 and 4 split them evenly, and 8 cores' worth of weights.
    plan = plan_config(dict(load("qwen2.5-7b-instruct"), num_hidden_layers=200))
    assert not plan.fits and plan.cores == 8
    assert "its 28 attention and 4 key/value heads allow tensor parallelism over at most 4" in plan.advice
    assert "splitting its layers over 8 NeuronCores (pipeline parallelism) would, but transformers" in plan.advice


def test_weights_outside_the_tp_plan_stay_whole_on_every_core() -> None:
    config = load("llava-1.5-7b-hf")
    # A vision tower as large as a 20B LLM: transformers' tp plan shards only the language model.
    config["vision_config"].update(hidden_size=5120, intermediate_size=13824, num_hidden_layers=64)
    plan = plan_config(config)
    assert plan.replicated_weights_bytes > 24 * GiB
    assert not plan.fits
    assert "of its weights are outside transformers' tensor-parallel plan, whole on every core" in plan.advice


def test_architecture_without_tp_plan_cannot_shard() -> None:
    plan = plan_config(dict(load("gpt2"), n_embd=4096, n_head=32, n_layer=100))
    assert not plan.fits
    assert plan.replicated_weights_bytes == plan.weights_bytes
    assert "no tensor-parallel plan" in plan.advice


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    heads=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96, 128]),
    kv_choice=st.integers(0, 10),
    head_dim=st.sampled_from([64, 128]),
    width=st.integers(1, 12),
    instance=st.sampled_from(["trn2.48xlarge", "trn2.3xlarge", "trn1.32xlarge"]),
)
def test_chosen_degree_always_splits_the_heads(
    heads: int, kv_choice: int, head_dim: int, width: int, instance: str
) -> None:
    kv_options = [k for k in range(1, heads + 1) if heads % k == 0]
    kv = kv_options[kv_choice % len(kv_options)]
    config = load("llama-3.2-1b") | {
        "hidden_size": heads * head_dim, "num_attention_heads": heads, "num_key_value_heads": kv,
        "head_dim": head_dim, "intermediate_size": width * 8192, "num_hidden_layers": 2, "vocab_size": 1024,
    }  # fmt: skip
    plan = plan_config(config, instance=instance)
    if plan.fits:
        tp = plan.tp_degree
        assert tp is not None and tp == plan.cores and tp & (tp - 1) == 0
        assert heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)
        assert plan.kv_replication == (tp // kv if tp > kv else 1)
        assert ("replicated" in plan.advice) == (plan.kv_replication > 1)
    else:
        assert plan.tp_degree is None


def test_to_dict_is_json_with_the_contract_keys() -> None:
    data = plan_config(load("mixtral-8x7b-v0.1")).to_dict()
    assert REQUIRED_KEYS <= set(data)
    assert json.loads(json.dumps(data)) == data
    assert data["source"] == "meta-device" and data["instance"] == "trn2.48xlarge" and data["lnc"] == 2


def test_format_plan_is_a_few_human_lines() -> None:
    plan = plan_config(load("mixtral-8x7b-v0.1"))
    text = format_plan(plan)
    lines = text.splitlines()
    assert 3 <= len(lines) <= 6
    assert "46.70B parameters (12.88B active per token, 12.75B without the embedding table)" in lines[0]
    assert "meta-device" in lines[0]
    assert lines[-1] == plan.advice
    assert "8 NeuronCores" in text and "bfloat16" in text


# ---- the calibration script ----


def _calibration_module() -> Any:
    import importlib.util

    path = ROOT / "benchmarks" / "plan_calibration.py"
    spec = importlib.util.spec_from_file_location("plan_calibration", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve string annotations through sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _record(model: str, status: str, cores: int, plan_cores: int | None, attempts: list[Any] | None = None) -> dict:
    return {
        "model_id": model, "task": "text-generation", "dtype": "bfloat16", "status": status, "cores": cores,
        "hardware": {"instance_type": "trn2.48xlarge"}, "attempts": attempts or [],
        "plan": None if plan_cores is None else {"cores": plan_cores, "fits": True, "advice": "x"},
    }  # fmt: skip


def test_calibration_counts_right_under_and_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    oom = {"cores": 1, "status": "fail", "stage": "oom", "code": "NCC_EOOM001"}
    records = [
        _record("a/right", "pass", 1, 1),
        _record("b/under", "pass", 2, 1, attempts=[oom, {"cores": 2, "status": "pass", "stage": None, "code": None}]),
        _record("c/over", "pass", 8, 8),
        _record("c/over", "pass", 4, 8),
        _record("d/nopass", "fail", 1, 1),
    ]
    (tmp_path / "many.json").write_text(json.dumps(records[:4]))
    (tmp_path / "one.json").write_text(json.dumps(records[4]))
    (tmp_path / "broken.json").write_text("{")
    module = _calibration_module()
    assert module.main([str(p) for p in sorted(tmp_path.iterdir())]) == 0
    out = capsys.readouterr()
    assert "3 with both a plan and a passing run" in out.out
    assert "plan right: 1/3 (33%)" in out.out
    assert "under-planned: 1, over-planned: 1, no passing run: 1" in out.out
    assert "over: c/over [text-generation, trn2.48xlarge, bfloat16] planned 8, smallest passing 4" in out.out
    assert "broken.json: skipped" in out.err


def test_calibration_with_no_records_fails_loudly(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text("[]")
    assert _calibration_module().main([str(tmp_path / "empty.json")]) == 1


def test_a_corrupt_safetensors_header_is_no_crash(tmp_path: Path) -> None:
    # A length field of 2**63 once reached file.read() and raised OverflowError out of the planner.
    (tmp_path / "config.json").write_text('{"model_type": "trncat_unknown", "architectures": ["X"]}')
    (tmp_path / "model.safetensors").write_bytes((2**63).to_bytes(8, "little") + b"{}")
    with pytest.raises(PlanError, match="no safetensors metadata"):
        plan_model(tmp_path)


# -- issue 22.4: a config-size bomb -------------------------------------------------------------------------


def _bomb(**sizes: int) -> dict[str, Any]:
    return {**json.loads((FIXTURES / "llama-3.2-1b.json").read_text()), **sizes}


def test_a_config_with_millions_of_layers_is_refused_before_it_is_built(tmp_path: Path) -> None:
    """Issue 22.4: the planner built any config on the meta device (about a millisecond and 35 KB per layer), so a
    config.json asking for millions of layers ran the daily discover out of time or memory before anything was
    queued. It is refused at once now, naming the count and its bound."""
    import subprocess

    folder = tmp_path / "bomb"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_bomb(num_hidden_layers=5_000_000)))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    planned = subprocess.run([sys.executable, "-m", "pipeline", "plan", str(folder)], capture_output=True,
                             text=True, timeout=120, env=env)  # fmt: skip
    assert planned.returncode == 2, planned.stderr
    assert "num_hidden_layers is 5000000, more than the planner's bound of 1024" in planned.stderr


def test_layer_expert_head_and_size_bounds_cover_nested_configs_and_real_models_pass() -> None:
    from pipeline.errors import PlanLimitError
    from pipeline.plan import MAX_EXPERTS, MAX_HEADS, MAX_LAYERS, config_problem

    for name in sorted(p.stem for p in FIXTURES.glob("*.json")):  # every real architecture stays well inside
        assert config_problem(json.loads((FIXTURES / f"{name}.json").read_text())) is None, name
    bombs = {
        "text_config.num_hidden_layers": {"text_config": {"num_hidden_layers": MAX_LAYERS + 1}},
        "num_local_experts": {"num_local_experts": MAX_EXPERTS + 1},
        "num_key_value_heads": {"num_key_value_heads": MAX_HEADS + 1},
        "n_head": {"n_head": MAX_HEADS * 10},
        "layers of": {"num_hidden_layers": 1000, "num_experts": 4000},
        "bytes of JSON": {"layer_types": ["full_attention"] * 100_000},
    }
    for needle, extra in bombs.items():
        problem = config_problem(_bomb(**extra))
        assert problem is not None and needle in problem, (needle, problem)
        with pytest.raises(PlanLimitError, match="refusing to build this config"):
            plan_config(_bomb(**extra), dtype="bfloat16")


def test_each_build_runs_under_a_time_and_a_memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever slips past the bounds is stopped by the child's limits, and one model never stops the queue."""
    from pipeline.discover import Candidate
    from pipeline.errors import PlanLimitError
    from pipeline.plan import limits
    from pipeline.queue import build_queue

    def hog() -> int:
        return len(bytearray(2 * GiB))

    monkeypatch.setattr(limits, "PLAN_MEMORY_BYTES", 256 * 1024 * 1024)
    with pytest.raises(PlanLimitError, match="more than 268435456 bytes of host memory"):
        limits.limited(hog, what="a hog")
    monkeypatch.setattr(limits, "PLAN_TIME_LIMIT_S", 0.1)
    with pytest.raises(PlanLimitError, match="took longer than 0.1 s"):
        limits.limited(__import__("time").sleep, 30, what="a sleeper")
    with pytest.raises(PlanError, match="ZeroDivisionError"):
        limits.limited(lambda: 1 // 0, what="a bug")
    assert limits.limited(lambda: 41 + 1, what="an answer") == 42

    slow = _bomb(num_hidden_layers=1024, vocab_size=12_345)  # inside the bounds; 0.1 s is too short for it
    candidates = [Candidate(model_id=f"acme/m{i}", task="text-generation", view="trending", rank=i + 1,
                            sha=f"{i:040x}") for i in range(2)]  # fmt: skip
    configs = {"acme/m0": slow, "acme/m1": json.loads((FIXTURES / "qwen2.5-0.5b.json").read_text())}

    def planner(candidate: Candidate):
        # The bomb gets the short limit; the real config a generous one, so a loaded machine cannot fail it.
        monkeypatch.setattr(limits, "PLAN_TIME_LIMIT_S", 0.1 if candidate.model_id == "acme/m0" else 600)
        return plan_config(configs[candidate.model_id], dtype="bfloat16")

    queue = build_queue(candidates=candidates, dataset_root=None, toolchain={"neuronx_cc": "2.28.7631.0"},
                        planner=planner)  # fmt: skip
    skipped = {s["model_id"]: s["reason"] for s in queue.skipped}
    assert skipped["acme/m0"].startswith("unplannable config: building LlamaForCausalLM took longer than 0.1 s")
    assert [e["model_id"] for c in queue.chunks for e in c["include"]] == ["acme/m1"]
