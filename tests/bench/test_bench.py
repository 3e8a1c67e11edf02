"""The CPU harness end to end: tiny models pass, and every broken model or dying child gives a valid record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.backends import get_backend
from pipeline.bench.run import BenchOptions, bench_model
from pipeline.cli import main
from pipeline.records import parse_record, validate_record
from pipeline.testing import tiny
from pipeline.workload import Workload
from tests.support import hostile

SMALL = Workload(batch_size=1, input_tokens=16, output_tokens=8)
SMALL_VLM = Workload(batch_size=1, input_tokens=16, output_tokens=8, image_size=64)


def _bench(folder: Path, tmp_path: Path, *, task: str = "text-generation", **kwargs) -> dict:
    kwargs.setdefault("workload", SMALL if task == "text-generation" else SMALL_VLM)
    kwargs.setdefault("iterations", 2)
    out = tmp_path / f"{folder.name}.json"
    record = bench_model(str(folder), task=task, backend=get_backend("cpu"), out=out, options=BenchOptions(**kwargs))
    on_disk = parse_record(out.read_text())
    assert on_disk == record
    assert validate_record(on_disk) == []
    return record


@pytest.mark.parametrize("task", ["text-generation", "image-text-to-text"])
def test_tiny_models_pass_with_all_metrics(task: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    import torch
    import transformers

    record = _bench(tiny_models[task], tmp_path, task=task)
    assert record["status"] == "pass", record["failure"]
    m = record["metrics"]
    auto = transformers.AutoModelForCausalLM if task == "text-generation" else transformers.AutoModelForImageTextToText
    model = auto.from_pretrained(tiny_models[task], trust_remote_code=False)
    assert m["params"] == sum(p.numel() for p in model.parameters())
    assert m["weights_bytes"] >= m["params"] * torch.finfo(torch.float32).bits // 8
    assert 0 < m["ttft_s"] <= m["latency_s"]["p50"] <= m["latency_s"]["p90"]
    assert m["decode_tokens_per_s"] > 0 and m["load_s"] > 0 and m["compile_s"] == 0.0
    assert m["wall_s"] >= m["load_s"]
    assert m["peak_host_memory_bytes"] > 50 * 1024**2
    assert record["workload"]["input_tokens"] == 16 and record["workload"]["output_tokens"] == 8
    assert len(record["revision"]) == 40
    assert record["model_id"].startswith("local/")
    assert record["versions"]["torch"] == torch.__version__
    assert record["threads"] == record["cores"] == 1  # torch held to the record's cores, and the record says so
    family = ("LlamaForCausalLM", "llama") if task == "text-generation" else ("LlavaForConditionalGeneration", "llava")
    assert (record["architecture"], record["model_type"]) == family and "base_model" not in record


def test_local_folder_identity_is_deterministic_and_overridable(tiny_models: dict[str, Path]) -> None:
    from pipeline.models import resolve_local

    folder = tiny_models["text-generation"]
    first, second = resolve_local(folder), resolve_local(folder)
    assert first == second and len(first.revision) == 40
    custom = resolve_local(folder, model_id="acme/tiny", revision="a" * 40)
    assert (custom.model_id, custom.revision) == ("acme/tiny", "a" * 40)


def _assert_failure(record: dict, status: str, stage: str, code: str) -> None:
    assert record["status"] == status, record
    assert (record["failure"]["stage"], record["failure"]["code"]) == (stage, code), record["failure"]
    assert record["failure"]["message"]
    assert record["metrics"]["decode_tokens_per_s"] is None


def test_unknown_architecture(tmp_path: Path) -> None:
    record = _bench(hostile.build_unknown_architecture(tmp_path / "unknown"), tmp_path)
    _assert_failure(record, "fail", "load", "unknown_architecture")


def test_corrupt_weights(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "corrupt"
    tiny.build_tiny_llama(folder)
    record = _bench(hostile.corrupt_weights(folder), tmp_path)
    _assert_failure(record, "fail", "load", "corrupt_weights")


def test_missing_tokenizer(tmp_path: Path) -> None:
    folder = tmp_path / "no-tokenizer"
    tiny.build_tiny_llama(folder)
    record = _bench(hostile.remove_tokenizer(folder), tmp_path)
    _assert_failure(record, "fail", "load", "missing_tokenizer")


def test_remote_code_is_refused_before_any_import(tmp_path: Path) -> None:
    sentinel = tmp_path / "remote-code-ran"
    folder = hostile.build_remote_code_model(tmp_path / "remote", sentinel=sentinel)
    record = _bench(folder, tmp_path)
    _assert_failure(record, "fail", "load", "remote_code")
    assert not sentinel.exists()


def test_declared_remote_code_on_a_known_architecture_runs_on_transformers_code(tmp_path: Path) -> None:
    folder = tmp_path / "llama-with-auto-map"
    tiny.build_tiny_llama(folder)
    sentinel = tmp_path / "remote-code-ran"
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_custom.CustomLlama"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_custom.py").write_text(f"open({str(sentinel)!r}, 'w').write('ran')\n")
    record = _bench(folder, tmp_path)
    assert record["status"] == "pass", record["failure"]
    assert not sentinel.exists()


def test_timeout_gives_a_record(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = _bench(tiny_models["text-generation"], tmp_path, fault="hang", timeout_s=2)
    _assert_failure(record, "fail", "timeout", "timeout")


@pytest.mark.parametrize(
    ("fault", "status", "stage", "code"),
    # A SIGKILL comes from another process (issue 29.17): the run was stopped, an error retried, never a fail.
    [("segfault", "fail", "crash", "signal_sigsegv"), ("sigkill", "error", "load", "killed_sigkill")],
)
def test_child_killed_by_signal_gives_a_crash_record(
    fault: str, status: str, stage: str, code: str, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    record = _bench(tiny_models["text-generation"], tmp_path, fault=fault)
    _assert_failure(record, status, stage, code)


def test_memory_limit_gives_a_host_oom_record(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = _bench(tiny_models["text-generation"], tmp_path, fault="allocate", memory_limit_bytes=512 * 1024**2)
    _assert_failure(record, "fail", "oom", "host_oom")


def test_exception_in_child_is_classified_with_its_stage(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = _bench(tiny_models["text-generation"], tmp_path, fault="raise")
    assert record["status"] == "fail"
    assert record["failure"]["stage"] == "load"
    assert "injected failure" in record["failure"]["message"]


def test_cli_bench_exits_zero_on_a_fail_record_and_goes_on(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    broken = hostile.build_unknown_architecture(tmp_path / "broken")
    out_broken, out_good = tmp_path / "broken.json", tmp_path / "good.json"
    common = ["--task", "text-generation", "--device", "cpu", "--iterations", "1", "--warmup", "0"]
    assert main(["bench", str(broken), *common, "--out", str(out_broken)]) == 0
    assert main(["bench", str(tiny_models["text-generation"]), *common, "--out", str(out_good)]) == 0
    assert parse_record(out_broken.read_text())["status"] == "fail"
    assert parse_record(out_good.read_text())["status"] == "pass"


def test_cli_bench_without_a_record_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["bench", "not a model id", "--task", "text-generation", "--device", "cpu", "--out", str(tmp_path / "x.json")]
    )
    assert code != 0
    assert not (tmp_path / "x.json").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "model id" in err[0]


def _upload(localhub, repo_id: str, folder: Path, **extra: bytes) -> str:
    files: dict[str, Path | bytes] = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    files.update(extra)
    localhub.store.create_repo(repo_id, metadata={"pipeline_tag": "text-generation", "library_name": "transformers"})
    return localhub.store.commit_files(repo_id, files, message="upload")


def test_a_hub_model_is_fetched_at_its_revision_without_code_files(
    localhub, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    card = b"---\nbase_model: acme/base\n---\n"
    extra = {"modeling_evil.py": b"raise SystemExit", "README.md": card}
    sha = _upload(localhub, "acme/tiny", tiny_models["text-generation"], **extra)
    record = _bench_hub("acme/tiny", localhub, tmp_path)
    assert record["status"] == "pass", record["failure"]
    assert (record["model_id"], record["revision"]) == ("acme/tiny", sha)
    # The card is not downloaded: its base model comes from the Hub's card metadata.
    assert record["base_model"] == ["acme/base"] and record["architecture"] == "LlamaForCausalLM"
    assert not list(localhub.cache_dir.rglob("*.py")), "code files must never be downloaded"


def test_a_checkpoint_with_only_pytorch_bin_weights_still_runs(localhub, tmp_path: Path) -> None:
    import torch
    import transformers

    folder = tiny.build_tiny_llama(tmp_path / "bin-only")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False)
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")  # what older checkpoints on the Hub hold
    assert list(folder.glob("*.bin")) and not list(folder.glob("*.safetensors"))
    _upload(localhub, "acme/legacy", folder)
    record = _bench_hub("acme/legacy", localhub, tmp_path)
    assert record["status"] == "pass", record["failure"]


def test_a_missing_hub_model_gives_no_record_and_one_line(localhub, tmp_path: Path) -> None:
    from pipeline.errors import RepoNotFoundError

    with pytest.raises(RepoNotFoundError):
        _bench_hub("acme/does-not-exist", localhub, tmp_path)
    assert not (tmp_path / "hub.json").exists()


def _bench_hub(model_id: str, localhub, tmp_path: Path) -> dict:
    out = tmp_path / "hub.json"
    return bench_model(
        model_id,
        task="text-generation",
        backend=get_backend("cpu"),
        out=out,
        options=BenchOptions(hub=localhub.client, workload=SMALL, iterations=1, warmup=0),
    )


def test_the_thread_count_follows_cores_and_the_processes_sharing_them() -> None:
    from pipeline.bench.child import thread_count

    assert thread_count(4, 1) == 4  # one process on 4 cores: 4 threads
    assert thread_count(4, 4) == 1  # torchrun, one process per core: 1 thread each
    assert thread_count(1, 1) == 1 and thread_count(2, 8) == 1


def test_the_generated_run_py_sets_threads_before_torch_starts(tmp_path: Path) -> None:
    from pipeline.render import run_script
    from tests.support.records import sample_record

    script = run_script(sample_record(threads=3, cores=3))
    assert "THREADS = 3" in script
    assert script.index('os.environ["OMP_NUM_THREADS"]') < script.index("    import torch\n\n    torch.set_num_threads")
    assert "torch.set_num_interop_threads(threads)" in script
    compile(script, "run.py", "exec")


def test_a_host_short_of_memory_refuses_the_run_with_an_error_record_that_is_retried(tmp_path: Path) -> None:
    """The host memory guard: an error record (never a fail) noting it; the queue retries it uncounted."""
    from pipeline.bench.harness import host_memory_short
    from pipeline.types import HOST_MEMORY_SHORT

    slept: list[float] = []
    frees = iter([1, 2, 3, 10])
    assert host_memory_short(8, wait_s=60, available=lambda: next(frees), sleep=slept.append, poll_s=15) is None
    assert slept == [15, 15, 15], "it waits for other compiles to end before running"
    assert host_memory_short(8, wait_s=20, available=lambda: 4, sleep=lambda s: None, poll_s=15) == 4
    assert host_memory_short(None, wait_s=0, available=lambda: 0) is None
    folder = tiny.build_tiny_llama(tmp_path / "tiny")
    record = bench_model(
        str(folder),
        task="text-generation",
        backend=get_backend("cpu"),
        out=tmp_path / "r.json",
        options=BenchOptions(host_memory_bytes=1 << 62, host_memory_wait_s=0),
    )
    assert record["status"] == "error" and record["failure"]["code"] == HOST_MEMORY_SHORT
    assert "the compile needs" in record["failure"]["message"] and not validate_record(record)


def test_the_host_memory_guard_never_asks_more_than_the_runners_share(tmp_path: Path) -> None:
    """Issue 22.3: a prediction of 2**62 bytes (one forged record) made the guard wait and refuse every time. It
    now asks at most the runner's share of the host: total memory x its cores / the instance's cores."""
    import psutil

    from pipeline.bench.harness import runner_memory_share

    assert runner_memory_share(total=2048, cores=16, cores_available=64) == 512
    assert runner_memory_share(total=2048, cores=64, cores_available=64) == 2048
    assert runner_memory_share(total=2048, cores=1, cores_available=None) == 2048  # the instance unknown
    asked: list[int | None] = []

    def check(need: int | None, *, wait_s: float) -> int | None:
        asked.append(need)
        return None

    folder = tiny.build_tiny_llama(tmp_path / "tiny")
    record = bench_model(
        str(folder),
        task="text-generation",
        backend=get_backend("cpu"),
        out=tmp_path / "r.json",
        options=BenchOptions(host_memory_bytes=1 << 62, host_memory_wait_s=1800, memory_check=check),
    )
    assert asked == [psutil.virtual_memory().total], "capped at the share (a CPU host: all of it)"
    assert any("the runner's share" in note for note in record["notes"]) and not validate_record(record)
