"""Issue 13 end to end on the CPU: sentence-embeddings (sentence-transformers) and text-to-image (diffusers).

Each tiny model passes with its task's own metric set and a valid record; its answer check runs against the CPU
float32 reference; a broken config fails at load with a classified reason; remote code is refused before any
import; the workload follows the pipeline.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.backends import get_backend
from pipeline.bench.run import BenchOptions, bench_model
from pipeline.plan import FEW_STEPS, resolve_workload
from pipeline.records import parse_record, validate_record
from pipeline.workload import Workload
from tests.support import hostile

SE, T2I = "sentence-embeddings", "text-to-image"
#: Small workloads of the tests (the catalog's are 128 tokens at batch 1 and 32; 20 steps).
WORKLOADS = {
    SE: Workload(batch_size=4, input_tokens=24, output_tokens=0, batch_sizes=(1, 4)),
    T2I: Workload(batch_size=1, input_tokens=77, output_tokens=0, image_size=32, steps=4),
}


def _bench(folder: Path, tmp_path: Path, task: str, **kwargs) -> dict:
    kwargs.setdefault("workload", WORKLOADS[task])
    kwargs.setdefault("iterations", 2)
    out = tmp_path / f"{folder.name}-{kwargs.get('dtype', 'float32')}.json"
    record = bench_model(str(folder), task=task, backend=get_backend("cpu"), out=out, options=BenchOptions(**kwargs))
    assert parse_record(out.read_text()) == record
    assert validate_record(record) == []
    return record


def test_a_tiny_sentence_transformers_model_passes_with_its_metric_set(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    record = _bench(tiny_models[SE], tmp_path, SE)
    assert record["status"] == "pass", record["failure"]
    m = record["metrics"]
    model = SentenceTransformer(str(tiny_models[SE]), device="cpu", trust_remote_code=False)
    assert m["params"] == sum(p.numel() for p in model.parameters())
    assert m["embedding_dim"] == 32
    assert [b["batch_size"] for b in m["latency_by_batch_s"]] == [1, 4]
    assert m["latency_s"] == {k: m["latency_by_batch_s"][1][k] for k in ("p50", "p90")}
    assert m["sentences_per_s"] == pytest.approx(4 / m["latency_s"]["p50"])
    assert m["ttft_s"] is None and m["decode_tokens_per_s"] is None and m["roofline_fraction"] is None
    assert record["versions"]["sentence_transformers"] and "diffusers" not in record["versions"]
    assert record["workload"]["batch_sizes"] == [1, 4] and record["workload"]["output_tokens"] == 0
    assert record["agreement"]["skipped"] == "the run itself is the CPU float32 reference"
    # Schema 1.3's family: the transformer's (modules.json points at it), not the sentence-transformers wrapper.
    assert (record["architecture"], record["model_type"]) == ("BertModel", "bert")


def test_a_tiny_diffusers_pipeline_passes_at_its_own_resolution(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = _bench(tiny_models[T2I], tmp_path, T2I, workload=None)  # the workload the catalog gives it
    assert record["status"] == "pass", record["failure"]
    m, workload = record["metrics"], record["workload"]
    assert workload["image_size"] == 32 and workload["steps"] == 20  # UNet sample 16 x VAE factor 2; 20 steps
    assert "guidance_scale" not in workload  # the pipeline's default guidance
    assert m["seconds_per_image"] == m["latency_s"]["p50"]
    assert 0 < m["vae_decode_s"] < m["seconds_per_image"]
    assert m["steps_per_s"] > 20 / m["seconds_per_image"]  # the steps alone run faster than the whole image
    assert m["params"] > 1_000_000  # every component counts: UNet, VAE and text encoder
    assert record["versions"]["diffusers"] and "sentence_transformers" not in record["versions"]
    assert record["architecture"] == "StableDiffusionPipeline" and "model_type" not in record  # a pipeline has none


@pytest.mark.parametrize("task", [SE, T2I])
def test_the_answer_check_compares_with_the_cpu_float32_reference(
    task: str, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    field = {SE: "embedding_cosine", T2I: "denoiser_cosine"}[task]
    quick = {"iterations": 1, "warmup": 0}  # the check runs after the timed calls: their number does not matter
    record = _bench(tiny_models[task], tmp_path, task, dtype="bfloat16", **quick)
    assert record["status"] == "pass", record["failure"]
    agreement = record["agreement"]
    assert agreement["skipped"] is None and agreement[field] >= agreement["threshold"]
    assert agreement["threshold"] == {SE: 0.99, T2I: 0.98}[task]
    wrong = _bench(tiny_models[task], tmp_path / "wrong", task, dtype="bfloat16", fault="perturb", **quick)
    assert (wrong["status"], wrong["failure"]["stage"], wrong["failure"]["code"]) == (
        "fail",
        "accuracy",
        "wrong_answer",
    )
    assert wrong["agreement"][field] < wrong["agreement"]["threshold"]
    assert wrong["metrics"]["latency_s"] is not None  # it ran: the speed it measured stays beside the verdict


@pytest.mark.parametrize("task", [SE, T2I])
def test_a_broken_config_fails_at_load_with_a_classified_reason(
    task: str, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    folder = hostile.break_config(shutil.copytree(tiny_models[task], tmp_path / "broken"))
    record = _bench(folder, tmp_path, task)
    assert (record["status"], record["failure"]["stage"], record["failure"]["code"]) == ("fail", "load", "bad_config")
    speed = {SE: "sentences_per_s", T2I: "seconds_per_image"}[task]
    assert record["metrics"][speed] is None and record["metrics"]["latency_s"] is None


def test_a_sentence_transformers_module_from_the_repo_is_refused_before_any_import(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    """Attack: modules.json names a module class of the repo's own; sentence-transformers would import it."""
    sentinel = tmp_path / "repo-code-ran"
    folder = shutil.copytree(tiny_models[SE], tmp_path / "hostile")
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["type"] = "evil_pooling.Pooling"
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "evil_pooling.py").write_text(f"import pathlib\npathlib.Path({str(sentinel)!r}).write_text('ran')\n")
    record = _bench(folder, tmp_path, SE)
    assert (record["status"], record["failure"]["code"]) == ("fail", "remote_code")
    assert "evil_pooling.Pooling" in record["failure"]["message"]
    assert not sentinel.exists()


def test_the_workload_follows_the_pipeline_and_few_step_models(tmp_path: Path) -> None:
    folder = tmp_path / "pipe"
    (folder / "unet").mkdir(parents=True)
    (folder / "vae").mkdir()
    (folder / "unet" / "config.json").write_text(json.dumps({"sample_size": 128}))
    (folder / "vae" / "config.json").write_text(json.dumps({"block_out_channels": [128, 256, 512, 512]}))
    sdxl = resolve_workload(T2I, folder=folder, model_id="stabilityai/stable-diffusion-xl-base-1.0")
    assert (sdxl.image_size, sdxl.steps, sdxl.guidance_scale) == (1024, 20, None)
    turbo = resolve_workload(T2I, folder=folder, model_id="stabilityai/sdxl-turbo")
    assert (turbo.image_size, turbo.steps, turbo.guidance_scale) == (1024, FEW_STEPS, 0.0)
    assert (
        resolve_workload(T2I, folder=tmp_path / "none", model_id="black-forest-labs/FLUX.1-schnell").image_size == 512
    )
    assert resolve_workload(SE, folder=folder, model_id="a/b").batch_sizes == (1, 32)


def test_a_library_without_tensor_parallelism_is_not_escalated_to_more_cores(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    from pipeline.bench.escalation import run_with_escalation
    from pipeline.bench.spec import BenchSpec
    from pipeline.models import resolve_local
    from tests.support.records import sample_failure

    calls: list[int] = []

    def out_of_memory(spec: BenchSpec) -> dict:
        calls.append(spec.cores)
        return sample_failure(status="fail", stage="oom", code="device_oom", cores=spec.cores)

    spec = BenchSpec(path=str(tiny_models[T2I]), task=T2I, device="cpu", dtype="float32", workload=WORKLOADS[T2I])
    model_id = resolve_local(tiny_models[T2I]).model_id
    record = run_with_escalation(
        spec, attempt=out_of_memory, backend=get_backend("cpu"), model_id=model_id, max_cores=8
    )
    assert calls == [1] and record["failure"]["code"] == "device_oom"


def test_a_hub_pipeline_fetches_only_its_components_default_weights(
    localhub, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    """A diffusers repo also holds fp16 variants and single-file checkpoints at its root (several GB each on the
    Hub): the benchmark fetches model_index.json, then only the configs and default weights it names."""
    from pipeline.models import resolve_hub

    folder = tiny_models[T2I]
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    files["v1-5-pruned.safetensors"] = files["unet/diffusion_pytorch_model.safetensors"]
    files["unet/diffusion_pytorch_model.fp16.safetensors"] = files["unet/diffusion_pytorch_model.safetensors"]
    files["unet/modeling_evil.py"] = b"raise SystemExit"
    localhub.store.create_repo("acme/pipe", metadata={"pipeline_tag": T2I, "library_name": "diffusers"})
    sha = localhub.store.commit_files("acme/pipe", files, message="upload")
    resolved = resolve_hub("acme/pipe", hub=localhub.client, task=T2I)
    assert resolved.error is None and resolved.revision == sha
    fetched = {p.relative_to(resolved.path).as_posix() for p in resolved.path.rglob("*") if p.is_file()}
    assert "unet/diffusion_pytorch_model.safetensors" in fetched and "model_index.json" in fetched
    assert (
        not {"v1-5-pruned.safetensors", "unet/diffusion_pytorch_model.fp16.safetensors", "unet/modeling_evil.py"}
        & fetched
    )

    # A pipeline naming the repo's own code is judged from model_index.json alone: no weight is downloaded.
    hostile_src = hostile.add_hostile_pipeline_index(tmp_path / "hostile-src", sentinel=tmp_path / "ran")
    files["model_index.json"] = (hostile_src / "model_index.json").read_bytes()
    localhub.store.create_repo("acme/hostile", metadata={"pipeline_tag": T2I, "library_name": "diffusers"})
    localhub.store.commit_files("acme/hostile", files, message="upload")
    refused = resolve_hub("acme/hostile", hub=localhub.client, task=T2I)
    assert [p.name for p in refused.path.rglob("*") if p.is_file()] == ["model_index.json"]
