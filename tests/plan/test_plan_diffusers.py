"""The planner on diffusers pipelines: every component counted on the meta device from its config, activations for
the resolution, NeuronCores and which component to shard.

The pipelines' configs and their published counts are in tests/fixtures/configs/diffusers (SOURCES.yaml says
where each figure comes from).
"""

from __future__ import annotations

import functools
import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.cli import main
from pipeline.discover import Candidate
from pipeline.errors import ConfigError, PlanError
from pipeline.hardware import GiB
from pipeline.plan import (
    Plan,
    index_entries,
    plan_config,
    plan_model,
    plan_pipeline,
    runner_label,
    weight_files,
)
from pipeline.plan import components as components_module
from pipeline.queue import HubPlanner, build_queue
from pipeline.workload import Workload
from tests import FIXTURES

PIPELINES = FIXTURES / "configs" / "diffusers"
SOURCES: dict[str, dict[str, Any]] = yaml.safe_load((PIPELINES / "SOURCES.yaml").read_text(encoding="utf-8"))
TTI = "text-to-image"


@functools.cache
def planned(name: str, **options: Any) -> Plan:
    return plan_model(PIPELINES / name, task=TTI, **options)


def counts(plan: Plan) -> dict[str, int]:
    assert plan.components is not None
    return {c["name"]: c["params"] for c in plan.components}


def agrees(count: int, entry: dict[str, Any]) -> bool:
    """Within 1 % of the published figure, or, for a figure rounded coarser than that, rounding to it."""
    if "precision" in entry:
        return float(f"{count:.{entry['precision']}g}") == entry["published"]
    return abs(count - entry["published"]) <= 0.01 * entry["published"]


def test_at_least_five_real_pipelines_with_a_source_for_every_figure() -> None:
    assert {p.name for p in PIPELINES.iterdir() if p.is_dir()} == set(SOURCES)
    assert len(SOURCES) >= 5
    for name, entry in SOURCES.items():
        assert entry["repo"].count("/") == 1
        index = json.loads((PIPELINES / name / "model_index.json").read_text(encoding="utf-8"))
        assert set(entry["components"]) <= {n for n, _, _ in index_entries(index)}
        assert all(figure["source"] for figure in entry["components"].values())


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_component_count_agrees_with_the_published_figure(name: str) -> None:
    plan, entry = planned(name), SOURCES[name]
    assert plan.source == "meta-device"
    counted = counts(plan)
    assert set(counted) == set(entry["components"]), "every weight-bearing component has a published figure"
    for component, figure in entry["components"].items():
        assert agrees(counted[component], figure), (component, counted[component], figure["published"])


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_total_agrees_with_the_published_figures(name: str) -> None:
    plan, entry = planned(name), SOURCES[name]
    assert plan.params == sum(counts(plan).values()) == plan.active_params
    if "total" in entry:
        assert agrees(plan.params, entry["total"])
    figures = entry["components"].values()
    if all("precision" not in f for f in figures):
        published = sum(f["published"] for f in figures)
        assert abs(plan.params - published) <= 0.01 * published, (plan.params, published)


def test_at_least_five_pipelines_are_held_to_one_percent_throughout() -> None:
    exact = [n for n, e in SOURCES.items() if all("precision" not in f for f in e["components"].values())]
    assert len(exact) >= 5, exact


def test_the_resolution_is_the_pipelines_own_default_else_the_workloads() -> None:
    sides = {name: planned(name).workload["image_size"] for name in SOURCES}
    assert sides == {
        "stable-diffusion-v1-5": 512,  # unet sample_size 64 x VAE scale 8
        "stable-diffusion-2-1": 768,
        "stable-diffusion-xl-base-1.0": 1024,
        "sdxl-turbo": 512,
        "stable-diffusion-3-medium-diffusers": 1024,
        "PixArt-XL-2-1024-MS": 1024,
        "Sana_600M_1024px_diffusers": 1024,  # sample_size 32 x the deep-compression VAE's 32
        "FLUX.1-schnell": 512,  # its configs state no sample_size: the workload's fallback
    }
    asked = Workload(batch_size=1, input_tokens=77, output_tokens=0, image_size=1024, steps=4)
    assert planned("FLUX.1-schnell", workload=asked).workload == asked.to_dict()
    assert planned("sdxl-turbo", workload=asked).workload["image_size"] == 512  # its own default wins


def test_activations_grow_with_the_resolution_and_the_batch() -> None:
    small = planned("FLUX.1-schnell")
    large = planned("FLUX.1-schnell", workload=Workload(input_tokens=77, output_tokens=0, image_size=1024, steps=4))
    batch = planned("FLUX.1-schnell", workload=Workload(batch_size=4, input_tokens=77, output_tokens=0, image_size=512))
    assert small.activations is not None and large.activations is not None and batch.activations is not None
    for stage in ("denoiser", "vae_decode"):
        assert small.activations[stage] < large.activations[stage]
        assert small.activations[stage] < batch.activations[stage]
    assert large.per_core_bytes > small.per_core_bytes


def test_flux_shards_its_transformer_with_diffusers_tensor_parallel_plan() -> None:
    plan = planned("FLUX.1-schnell")
    assert plan.fits and plan.cores == plan.tp_degree and plan.cores > 1
    assert 24 % plan.cores == 0  # diffusers requires the degree to divide the attention heads
    assert plan.per_core_bytes <= plan.memory_per_core_bytes
    assert plan.advice.startswith(f"needs {plan.cores} NeuronCores on a trn2.48xlarge: shard the transformer")
    assert f"parallel_config=TensorParallelConfig(tp_degree={plan.cores})" in plan.advice
    assert f"torchrun --nproc-per-node {plan.cores}" in plan.advice
    assert "text_encoder_2 (8.9 GiB)" in plan.advice and "stay whole on every core" in plan.advice
    assert plan.components is not None
    assert [c["name"] for c in plan.components if c["sharded"]] == ["transformer"]
    assert runner_label(plan) == f"trn2-{plan.cores}c"
    # What the plan leaves whole (T5, the transformer's modulation layers, ...) is held in full on every core.
    assert plan.weights_bytes / plan.cores < plan.replicated_weights_bytes < plan.weights_bytes


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_byte_counts_add_up(name: str) -> None:
    plan = planned(name)
    assert plan.total_bytes == plan.per_core_bytes * plan.cores
    assert plan.total_bytes == plan.weights_bytes + plan.kv_cache_bytes + plan.overhead_bytes
    assert plan.kv_cache_bytes == 0 and plan.weights_bytes == plan.params * 2
    assert plan.activations is not None and plan.per_core_bytes > max(plan.activations.values())


@pytest.mark.parametrize("name", [n for n in sorted(SOURCES) if n != "FLUX.1-schnell"])
def test_the_other_pipelines_fit_one_core_in_bfloat16(name: str) -> None:
    plan = planned(name)
    assert plan.fits and plan.cores == 1, plan.advice
    assert plan.advice == "fits on one NeuronCore (trn2, LNC=2, 24 GiB)"


def test_a_denoiser_without_a_tensor_parallel_plan_is_named_as_the_component_to_shard() -> None:
    # SD3-medium in float32 needs ~31 GiB: more than one core, and diffusers has no tp plan for SD3Transformer2DModel.
    plan = planned("stable-diffusion-3-medium-diffusers", dtype="float32")
    assert not plan.fits and plan.tp_degree is None
    assert "to shard the transformer (SD3Transformer2DModel" in plan.advice
    assert "diffusers has no tensor-parallel plan for SD3Transformer2DModel" in plan.advice
    assert "would fit with bfloat16 weights (1 NeuronCore)" in plan.advice


def test_weights_outside_the_plan_larger_than_a_core_are_named() -> None:
    # At LNC=1 a core has 12 GiB: T5 and the transformer's own layers outside its plan (15.4 GiB) hold no core.
    plan = planned("FLUX.1-schnell", instance="trn2.3xlarge", lnc=1)
    assert not plan.fits and plan.tp_degree is None
    assert "to shard the transformer (FluxTransformer2DModel, 22.1 GiB), but 15.4 GiB of its weights" in plan.advice
    assert "6.1 GiB of the transformer outside the plan, text_encoder_2 (8.9 GiB)" in plan.advice


def test_a_pipeline_larger_than_the_instance_says_so_and_names_the_component_to_shard() -> None:
    plan = planned("FLUX.1-schnell", instance="trn1.2xlarge")
    assert not plan.fits
    assert plan.advice.startswith("does not fit one trn1.2xlarge: needs ")
    assert plan.advice.endswith("the transformer (FluxTransformer2DModel, 22.1 GiB) is the component to shard")
    assert planned("FLUX.1-schnell", instance="trn2.3xlarge").fits  # its 4 NeuronCores of 24 GiB hold it


def test_trncat_plan_plans_a_pipeline_folder(capsys: pytest.CaptureFixture[str]) -> None:
    folder = str(PIPELINES / "stable-diffusion-xl-base-1.0")
    assert main(["plan", "--task", TTI, folder]) == 0
    text = capsys.readouterr().out
    assert "StableDiffusionXLPipeline, 3.47B parameters (source: meta-device)" in text
    assert "unet UNet2DConditionModel 2.57B" in text and "at 1024 x 1024, 20 steps" in text
    assert "fits on one NeuronCore" in text
    assert main(["plan", "--task", TTI, folder, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["architecture"] == "StableDiffusionXLPipeline" and data["cores"] == 1
    assert {c["name"]: c["params"] for c in data["components"]}["text_encoder_2"] == 694_659_840
    assert set(data["activations"]) == {"text_encoders", "denoiser", "vae_decode"}


def test_a_folder_with_model_index_and_no_config_is_planned_as_a_pipeline_without_a_task() -> None:
    assert plan_model(PIPELINES / "stable-diffusion-v1-5").architecture == "StableDiffusionPipeline"


def test_one_config_json_cannot_stand_for_a_pipeline() -> None:
    with pytest.raises(PlanError, match="diffusers pipeline, planned from model_index.json"):
        plan_config({"model_type": "bert"}, task=TTI)


def test_a_hub_id_needs_a_hub_and_asks_nothing_without_one() -> None:
    with pytest.raises(ConfigError, match="needs a Hub client"):
        plan_model("stabilityai/sdxl-turbo", task=TTI)


def _copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(PIPELINES / name, tmp_path / name))


def test_a_component_from_another_library_is_refused_before_anything_is_imported(tmp_path: Path) -> None:
    folder = _copy("stable-diffusion-v1-5", tmp_path)
    index = json.loads((folder / "model_index.json").read_text())
    (folder / "model_index.json").write_text(json.dumps(index | {"unet": ["unet_hostile", "HostileUNet"]}))
    with pytest.raises(PlanError, match="comes from 'unet_hostile'.*never runs remote code"):
        plan_model(folder, task=TTI)


def test_a_missing_component_config_is_a_plan_error(tmp_path: Path) -> None:
    folder = _copy("stable-diffusion-v1-5", tmp_path)
    (folder / "vae" / "config.json").unlink()
    with pytest.raises(PlanError, match="no vae/config.json"):
        plan_model(folder, task=TTI)


def _safetensors(path: Path, shapes: dict[str, list[int]]) -> None:
    """A safetensors file of float16 tensors of ``shapes`` (zeros)."""
    header: dict[str, Any] = {}
    offset = 0
    for name, shape in shapes.items():
        size = 2 * (shape[0] * shape[1])
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def _with_unknown_component(folder: Path) -> None:
    """A component whose class the installed diffusers lacks, with its weights in two variants."""
    index = json.loads((folder / "model_index.json").read_text())
    (folder / "model_index.json").write_text(json.dumps(index | {"refiner": ["diffusers", "TrncatFutureModel"]}))
    _safetensors(folder / "refiner" / "diffusion_pytorch_model.safetensors", {"w": [100, 10], "b": [1, 10]})
    _safetensors(folder / "refiner" / "diffusion_pytorch_model.fp16.safetensors", {"w": [100, 10], "b": [1, 10]})


def test_a_class_the_libraries_lack_is_counted_from_one_variant_of_its_safetensors(tmp_path: Path) -> None:
    folder = _copy("stable-diffusion-v1-5", tmp_path)
    _with_unknown_component(folder)
    plan = plan_model(folder, task=TTI)
    assert plan.source == "safetensors"
    assert counts(plan)["refiner"] == 1010  # once, not once per variant
    assert plan.params == planned("stable-diffusion-v1-5").params + 1010


def test_weight_files_take_one_variant() -> None:
    names = ["diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.fp16.safetensors", "config.json"]
    assert weight_files(names) == ["diffusion_pytorch_model.safetensors"]
    shards = ["model.fp16-00002-of-00002.safetensors", "model.fp16-00001-of-00002.safetensors"]
    assert weight_files(shards) == sorted(shards)
    assert weight_files(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]) == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]


def test_counts_are_cached_per_class_and_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second plan of the same pipeline builds no component again: the counts come from the cache (shown by
    counting the builds, not by timing them, so a loaded machine cannot fail it)."""
    components_module._cache.clear()
    count = components_module._count
    built: list[str] = []

    def counting(library: str, class_name: str, config: dict) -> tuple:
        built.append(class_name)
        return count(library, class_name, config)

    monkeypatch.setattr(components_module, "_count", counting)
    first = plan_model(PIPELINES / "FLUX.1-schnell", task=TTI)
    builds = len(built)
    again = plan_model(PIPELINES / "FLUX.1-schnell", task=TTI)
    assert first == again
    assert builds > 0 and len(built) == builds, built  # every component counted once, none again


def test_a_quantized_component_puts_its_support_in_the_advice(tmp_path: Path) -> None:
    folder = _copy("FLUX.1-schnell", tmp_path)
    config = json.loads((folder / "transformer" / "config.json").read_text())
    quantization = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    (folder / "transformer" / "config.json").write_text(json.dumps(config | {"quantization_config": quantization}))
    plan = plan_model(folder, task=TTI)
    assert plan.quantization is not None and plan.quantization["method"] == "bitsandbytes"
    assert plan.advice.startswith("cannot load its bitsandbytes checkpoint on Neuron")


def _publish(localhub: Any, repo: str, folder: Path) -> str:
    localhub.store.create_repo(repo, metadata={"pipeline_tag": TTI, "library_name": "diffusers"})
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    return localhub.store.commit_files(repo, files)


def test_a_hub_pipeline_is_planned_from_its_json_files_only(localhub: Any) -> None:
    sha = _publish(localhub, "org/sd15", PIPELINES / "stable-diffusion-v1-5")
    localhub.server.requests.clear()
    plan = plan_model("org/sd15", revision=sha, task=TTI, hub=localhub.client)
    assert (plan.model, plan.revision, plan.params) == ("org/sd15", sha, planned("stable-diffusion-v1-5").params)
    fetched = [path for method, path in localhub.server.requests if method == "GET" and "/resolve/" in path]
    assert fetched and all(path.endswith(".json") for path in fetched), fetched


def test_a_hub_component_the_libraries_lack_is_counted_from_its_safetensors_headers(
    localhub: Any, tmp_path: Path
) -> None:
    folder = _copy("stable-diffusion-v1-5", tmp_path)
    _with_unknown_component(folder)
    sha = _publish(localhub, "org/sd15-future", folder)
    plan = plan_model("org/sd15-future", revision=sha, hub=localhub.client, task="text-to-image")
    assert counts(plan)["refiner"] == 1010 and plan.source == "safetensors"


def test_the_queue_plans_pipelines_and_notes_one_that_is_not(localhub: Any) -> None:
    flux = _publish(localhub, "org/flux", PIPELINES / "FLUX.1-schnell")
    sdxl = _publish(localhub, "org/sdxl", PIPELINES / "sdxl-turbo")
    localhub.store.create_repo("org/single-file", metadata={"pipeline_tag": TTI, "library_name": "diffusers"})
    single = localhub.store.commit_files("org/single-file", {"model.safetensors": b"not a pipeline"})
    candidates = [
        Candidate(model_id="org/flux", task=TTI, view="trending", rank=1, sha=flux),
        Candidate(model_id="org/sdxl", task=TTI, view="trending", rank=2, sha=sdxl),
        Candidate(model_id="org/single-file", task=TTI, view="trending", rank=3, sha=single),
    ]
    queue = build_queue(
        candidates=candidates,
        dataset_root=None,
        toolchain={"transformers": "5.0.0"},
        planner=HubPlanner(hub=localhub.client),
    )
    entries = {e["model_id"]: e for e in queue.entries}
    assert entries["org/sdxl"]["cores"] == planned("sdxl-turbo").cores == 1
    assert entries["org/sdxl"]["runner"] == runner_label(planned("sdxl-turbo"))
    assert entries["org/single-file"]["cores"] == 1
    assert "model_index.json" in entries["org/single-file"]["note"]
    # FLUX.1 needs 4 cores; diffusers' tensor parallelism is not what the benchmark runs: skipped, with why
    [skip] = [s for s in queue.skipped if s["model_id"] == "org/flux"]
    assert planned("FLUX.1-schnell").cores > 1
    assert skip["reason"].startswith(f"needs {planned('FLUX.1-schnell').cores} NeuronCores; diffusers models")


def test_plan_pipeline_is_pure_and_takes_the_configs() -> None:
    folder = PIPELINES / "sdxl-turbo"
    index = json.loads((folder / "model_index.json").read_text())
    configs = {
        n: json.loads((folder / n / "config.json").read_text())
        for n in ("unet", "vae", "text_encoder", "text_encoder_2")
    }
    plan = plan_pipeline(index, configs)
    assert plan.params == planned("sdxl-turbo").params and plan.model is None
    assert plan.total_bytes < 12 * GiB
    with pytest.raises(PlanError, match="no text_encoder_2/config.json"):
        plan_pipeline(index, {k: v for k, v in configs.items() if k != "text_encoder_2"})
    with pytest.raises(PlanError, match="comes from 'unet_hostile'"):  # judged before any class is looked up
        plan_pipeline(index | {"unet": ["unet_hostile", "HostileUNet"]}, configs)


def test_instantiating_a_component_quiets_both_libraries_and_restores_their_verbosity() -> None:
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as hf_logging

    from pipeline.plan.params import quiet

    before = (hf_logging.get_verbosity(), diffusers_logging.get_verbosity())
    with quiet("diffusers"):
        assert hf_logging.get_verbosity() == diffusers_logging.get_verbosity() == hf_logging.ERROR
    assert (hf_logging.get_verbosity(), diffusers_logging.get_verbosity()) == before
