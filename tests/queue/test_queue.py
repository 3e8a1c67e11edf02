"""The benchmark queue: dedupe against a dataset folder, retries, chunks, runner labels and the matrix shape."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.dataset import build
from pipeline.discover import Candidate, Discovery
from pipeline.errors import ConfigError, HubServerError, PlanError
from pipeline.plan import Plan, plan_config
from pipeline.queue import PRIOR, HubPlanner, Queue, build_queue, load_candidates, load_toolchain, matrix_order
from tests import FIXTURES
from tests.support.records import as_community, fake_revision, sample_failure, sample_record

TG, ITT = "text-generation", "image-text-to-text"
CONFIGS = FIXTURES / "configs"
TOOLCHAIN = {"neuronx_cc": "2.21.0", "torch_neuronx": "2.14.0", "transformers": "5.0.0"}
REV = fake_revision("v1")


@functools.cache
def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


@functools.cache
def _plan(name: str) -> Plan:
    return plan_config(_config(name), dtype="bfloat16")


def planner(candidate: Candidate) -> Plan:
    """Small models on one core, "big/*" on the 70B plan (tensor parallel), "huge/*" does not fit."""
    org = candidate.model_id.split("/")[0]
    if org == "noconfig":
        raise PlanError(f"cannot plan {candidate.model_id}: no config.json")
    if org == "odd":
        raise KeyError("num_attention_heads")
    if org == "hubdown":
        raise HubServerError("the Hub answered HTTP 503 after 6 attempts")
    if org == "huge":
        return replace(_plan("llama-3.2-1b"), fits=False, tp_degree=None, advice="needs 2 trn2.48xlarge instances")
    plan = _plan("llama-3.1-70b" if org == "big" else "qwen2.5-0.5b")
    return replace(plan, model=candidate.model_id, revision=candidate.sha)


def cand(model_id: str, task: str = TG, sha: str = REV, **kw) -> Candidate:
    return Candidate(model_id=model_id, task=task, view="trending", rank=1, sha=sha, **kw)


def record(model_id: str, status: str = "pass", *, revision: str = REV, minute: int = 0, **kw) -> dict:
    run = {"started_at": f"2026-11-28T10:{minute:02d}:00+00:00", "finished_at": f"2026-11-28T10:{minute:02d}:30+00:00"}
    if status == "pass":
        return sample_record(model_id=model_id, revision=revision, run=run, **kw)
    stage = "crash" if status == "error" else "compile"
    return sample_failure(model_id=model_id, revision=revision, status=status, stage=stage, run=run, **kw)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "dataset"
    build(
        [
            record("done/passed"),
            record("done/failed", "fail"),
            record("flaky/once", "error", minute=1),
            record("flaky/thrice", "error", minute=1),
            record("flaky/thrice", "error", minute=2),
            record("flaky/thrice", "error", minute=3),
            record("flaky/then-passed", "error", minute=1),
            record("flaky/then-passed", minute=2),
            record("old/toolchain", versions={"neuronx_cc": "2.20.0"}),
            record("local/build", versions={"neuronx_cc": "2.21.0+abc123"}),
            record("cpu/only", device="cpu", dtype="float32"),
        ],
        root,
    )
    return root


def queue_of(candidates, root: Path | None, **kw) -> Queue:
    return build_queue(candidates=candidates, dataset_root=root, toolchain=TOOLCHAIN, planner=planner, **kw)


def test_dedupe_against_the_dataset(dataset: Path) -> None:
    candidates = [
        cand("done/passed"),
        cand("done/passed", sha=fake_revision("v2")),  # same model again (other view): ignored
        cand("done/failed"),
        cand("new/model"),
        cand("flaky/once"),
        cand("flaky/thrice"),
        cand("flaky/then-passed"),
        cand("old/toolchain"),
        cand("local/build"),
        cand("cpu/only"),
        cand("done/passed", task=ITT),  # another task is another key
    ]
    queue = queue_of(candidates, dataset)
    queued = {(e["model_id"], e["task"]): e for e in queue.entries}
    skipped = {s["model_id"]: s["reason"] for s in queue.skipped}

    assert set(queued) == {
        ("new/model", TG),
        ("flaky/once", TG),
        ("old/toolchain", TG),
        ("cpu/only", TG),
        ("done/passed", ITT),
    }
    assert queued[("flaky/once", TG)]["attempt"] == 2 and queued[("new/model", TG)]["attempt"] == 1
    assert skipped["done/passed"].startswith("already passed")
    assert skipped["done/failed"].startswith("failed at this revision")
    assert skipped["flaky/thrice"] == "infrastructure error 3 times at this key (at most 2 retries)"
    assert skipped["flaky/then-passed"].startswith("already passed")
    assert skipped["local/build"].startswith("already passed")  # a local +build suffix is the same release
    assert len(queue.skipped) == 5


def test_new_revision_or_toolchain_requeues_and_retries_are_bounded(dataset: Path) -> None:
    newer = queue_of(
        [cand("done/passed", sha=fake_revision("v2")), cand("done/failed", sha=fake_revision("v2"))], dataset
    )
    assert sorted(e["model_id"] for e in newer.entries) == ["done/failed", "done/passed"]

    upgraded = build_queue(
        candidates=[cand("done/passed"), cand("done/failed")],
        dataset_root=dataset,
        toolchain={**TOOLCHAIN, "neuronx_cc": "2.28.7631.0"},
        planner=planner,
    )
    assert len(upgraded.entries) == 2 and not upgraded.skipped

    assert queue_of([cand("flaky/thrice")], dataset, max_error_retries=3).entries[0]["attempt"] == 4
    assert (
        queue_of([cand("flaky/once")], dataset, max_error_retries=0)
        .skipped[0]["reason"]
        .startswith("infrastructure error 1 times")
    )


def test_a_community_fail_never_keeps_a_model_from_the_project_runners(tmp_path: Path) -> None:
    """Attack (issue 11.10): a community `fail` at the queue's key made the queue skip the model forever."""
    forged = as_community(record("victim/model", "fail"))
    root = tmp_path / "dataset"
    build([forged], root)
    queue = queue_of([cand("victim/model"), cand("done/passed")], root)
    assert sorted(e["model_id"] for e in queue.entries) == ["done/passed", "victim/model"] and not queue.skipped
    build([record("victim/model", "fail", minute=5)], root)  # the project's own fail does count
    assert queue_of([cand("victim/model")], root).skipped[0]["reason"].startswith("failed at this revision")


def test_ineligible_and_unrunnable_candidates_are_skipped_with_reasons() -> None:
    candidates = [
        cand("g/gated", eligible=False, kind="gated", reason="gated (manual approval)"),
        cand("r/remote", eligible=False, kind="remote_code", reason="needs trust_remote_code"),
        cand("m/missing", sha=None, eligible=False, kind="not_found", reason="not on the Hub"),
        cand("huge/model"),
        cand("bad/sha", sha="main"),
        cand("ok/model"),
    ]
    queue = queue_of(candidates, None)
    assert [e["model_id"] for e in queue.entries] == ["ok/model"]
    reasons = {s["model_id"]: s["reason"] for s in queue.skipped}
    assert reasons == {
        "g/gated": "gated: gated (manual approval)",
        "r/remote": "remote_code: needs trust_remote_code",
        "m/missing": "not_found: not on the Hub",
        "huge/model": "does not fit: needs 2 trn2.48xlarge instances",
        "bad/sha": "invalid: bad model id or revision",
    }


def test_entries_carry_plan_runner_and_bench_arguments() -> None:
    queue = queue_of([cand("small/one"), cand("big/seventy"), cand("noconfig/model", task=ITT)], None)
    by_id = {e["model_id"]: e for e in queue.entries}
    small, big, unplanned = by_id["small/one"], by_id["big/seventy"], by_id["noconfig/model"]
    assert (small["cores"], small["runner"]) == (1, "trn2-1c")
    assert big["cores"] > 1 and big["runner"] == f"trn2-{big['cores']}c"
    assert (unplanned["cores"], unplanned["runner"]) == (1, "trn2-1c")
    assert unplanned["note"].startswith("not planned (cannot plan noconfig/model")
    odd = queue_of([cand("odd/config")], None).entries[0]
    assert (odd["cores"], odd["note"]) == (1, "not planned (KeyError: 'num_attention_heads'); runs on 1 core")
    with pytest.raises(HubServerError):  # an outage is no fact about the model: nothing is queued on it
        queue_of([cand("hubdown/model")], None)
    assert small == {
        "model_id": "small/one",
        "revision": REV,
        "task": TG,
        "device": "neuron",
        "dtype": "bfloat16",
        "cores": 1,
        "runner": "trn2-1c",
        "instance": "trn2.48xlarge",
        "artifact": f"small--one--text-generation--{REV[:12]}",
        "note": "",
        "attempt": 1,
        # No history: the documented prior for a 0.5B model on one core (pipeline.queue.durations.PRIOR).
        "predicted_s": round(PRIOR.duration(params=_plan("qwen2.5-0.5b").params, cores=1).total_s),
        "host_memory_bytes": PRIOR.duration(params=_plan("qwen2.5-0.5b").params, cores=1).host_memory_bytes,
    }


def test_chunks_fit_github_matrix_shape() -> None:
    candidates = [cand(f"org/m{i}") for i in range(600)]
    queue = queue_of(candidates, None)
    assert [len(c["include"]) for c in queue.chunks] == [256, 256, 88]
    for chunk in queue.chunks:
        assert list(chunk) == ["include"]
        matrix = json.loads(json.dumps(chunk))
        for entry in matrix["include"]:
            assert entry["runner"].startswith("trn2-") and entry["runner"].endswith("c")
            assert all(isinstance(k, str) for k in entry)
            assert all(isinstance(v, (str, int, bool)) for v in entry.values())
            assert "/" not in entry["artifact"]
    doc = json.loads(queue.to_json())
    assert doc["count"] == 600 and len(doc["chunks"]) == 3 and doc["toolchain"] == TOOLCHAIN
    assert json.loads(queue.chunk_json(2)) == queue.chunks[2]
    assert [len(c["include"]) for c in queue_of(candidates[:10], None, chunk_size=4).chunks] == [4, 4, 2]

    empty = queue_of([], None)
    assert empty.chunks == [] and json.loads(empty.to_json())["count"] == 0
    with pytest.raises(ConfigError, match="chunk 0 does not exist"):
        empty.chunk_json(0)
    with pytest.raises(ConfigError, match="chunk size"):
        queue_of(candidates, None, chunk_size=257)


def test_toolchain_file_and_bad_toolchains(tmp_path: Path) -> None:
    pinned = load_toolchain()
    assert {"neuronx_cc", "torch_neuronx", "transformers"} <= set(pinned)
    bad = tmp_path / "toolchain.yaml"
    bad.write_text("neuronx_cc: '2.28'\ncompiler_flags: '-O2'\n")
    with pytest.raises(ConfigError, match=r"toolchain.yaml: toolchain key 'compiler_flags' is not a record version"):
        load_toolchain(bad)
    with pytest.raises(ConfigError, match="non-empty string"):
        build_queue(candidates=[], dataset_root=None, toolchain={"neuronx_cc": 2.28}, planner=planner)
    # the serving engine's pins, which release-watch bumps where the file has them, are no result version: set aside
    served = tmp_path / "served.yaml"
    served.write_text('neuronx_cc: "2.28"\nvllm_neuron: "0.29.0.1.2.0"\nlibtorch_neuronx_lite: "2.9.0.2.10"\n')
    assert load_toolchain(served) == {"neuronx_cc": "2.28"}


def test_hub_planner_downloads_each_config_once(localhub) -> None:
    store = localhub.store
    store.create_repo("org/qwen", metadata={"pipeline_tag": TG, "library_name": "transformers"})
    sha = store.commit_files("org/qwen", {"config.json": json.dumps(_config("qwen2.5-0.5b")).encode()})
    store.create_repo("org/no-config", metadata={"pipeline_tag": TG, "library_name": "transformers"})
    empty_sha = store.get("org/no-config").refs["main"]
    hub_planner = HubPlanner(hub=localhub.client)
    localhub.server.requests.clear()
    first = cand("org/qwen", sha=sha)
    queue = build_queue(
        candidates=[first, replace(first, task=ITT), cand("org/no-config", sha=empty_sha)],
        dataset_root=None,
        toolchain=TOOLCHAIN,
        planner=hub_planner,
    )
    assert [(e["model_id"], e["cores"], e["runner"]) for e in queue.entries] == [
        ("org/qwen", 1, "trn2-1c"),
        ("org/qwen", 1, "trn2-1c"),
        ("org/no-config", 1, "trn2-1c"),
    ]
    assert "config.json" in queue.entries[2]["note"]
    assert localhub.server.count_requests(r"^/org/qwen/resolve/", "GET") == 1
    assert hub_planner(first).revision == sha


def test_load_candidates_from_discovery_json(tmp_path: Path) -> None:
    import datetime as dt

    first = Discovery(dt.date(2026, 11, 30), TG, "trending", [cand("a/b")])
    second = Discovery(dt.date(2026, 11, 30), ITT, "selected", [cand("c/d", task=ITT)])
    (tmp_path / "one.json").write_text(json.dumps(first.to_dict()))
    (tmp_path / "many.json").write_text(json.dumps([second.to_dict()]))
    loaded = load_candidates([tmp_path / "one.json", tmp_path / "many.json"])
    assert [c.model_id for c in loaded] == ["a/b", "c/d"]
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="bad.json: not a discovery file"):
        load_candidates([tmp_path / "bad.json"])


def test_matrix_order_puts_the_largest_and_longest_jobs_first() -> None:
    """The tail of a sweep is short jobs: big runners first, then the longest predicted job of each size."""
    candidates = [cand(f"small/m{i}") for i in range(3)] + [cand("big/seventy"), cand("noconfig/x")]
    entries = queue_of(candidates, None).entries
    assert entries[0]["model_id"] == "big/seventy"
    sizes = [int(e["runner"].removeprefix("trn2-").removesuffix("c")) for e in entries]
    assert sizes == sorted(sizes, reverse=True)
    shuffled = [
        {"model_id": "a/short", "task": TG, "runner": "trn2-1c", "predicted_s": 60},
        {"model_id": "b/eight", "task": TG, "runner": "trn2-8c", "predicted_s": 10},
        {"model_id": "c/long", "task": TG, "runner": "trn2-1c", "predicted_s": 900},
        {"model_id": "d/four", "task": ITT, "runner": "trn2-4c", "predicted_s": 500},
    ]
    assert [e["model_id"] for e in matrix_order(shuffled)] == ["b/eight", "d/four", "c/long", "a/short"]
    # Every chunk is in that order too (chunks are slices of the ordered list).
    chunked = queue_of(candidates, None, chunk_size=2)
    assert [e["model_id"] for e in chunked.entries] == [e["model_id"] for e in entries]


def test_a_run_refused_for_host_memory_is_requeued_without_using_a_retry(tmp_path: Path) -> None:
    from pipeline.types import HOST_MEMORY_SHORT

    root = tmp_path / "dataset"

    def run(i: int) -> dict:
        return {"started_at": f"2026-11-28T10:0{i}:00+00:00", "finished_at": f"2026-11-28T10:0{i}:30+00:00"}

    refused = [
        sample_failure(model_id="busy/host", status="error", stage="load", code=HOST_MEMORY_SHORT, run=run(i))
        for i in range(5)
    ]
    build(refused, root)
    (entry,) = queue_of([cand("busy/host")], root).entries
    assert entry["attempt"] == 1, "five refusals are no infrastructure errors of the model"


def test_a_tasks_key_leaves_out_other_libraries_and_a_pipelines_own_resolution(tmp_path: Path) -> None:
    """Issue 13: a text-to-image run records its pipeline's resolution (not the default 512) and the toolchain pins
    every task's library; neither may keep a measured model in the queue forever."""
    fixtures = FIXTURES / "valid"
    ci_run = sample_record()["run"]
    rows = []
    for name, model_id in (("text_to_image_cpu_pass", "sd/tiny"), ("sentence_embeddings_cpu_pass", "st/tiny")):
        row = json.loads((fixtures / f"{name}.json").read_text(encoding="utf-8"))
        rows.append({**row, "model_id": model_id, "revision": REV, "run": ci_run})
    assert rows[0]["workload"]["image_size"] == 64  # the tiny pipeline's own size, not the default 512
    rows.append(sample_record(model_id="tg/tiny", revision=REV, device="cpu", dtype="float32"))
    build(rows, tmp_path / "ds")
    toolchain = {"torch": "2.9.0", "sentence_transformers": "5.1.0", "diffusers": "0.35.0"}
    queue = build_queue(
        candidates=[cand("sd/tiny", task="text-to-image"), cand("st/tiny", task="sentence-embeddings")],
        dataset_root=tmp_path / "ds",
        toolchain=toolchain,
        planner=planner,
        device="cpu",
        dtype="float32",
    )
    assert not queue.entries and all(s["reason"].startswith("already passed") for s in queue.skipped)
    # the task's own library still decides: a new diffusers release re-queues the pipeline, not the encoder
    newer = build_queue(
        candidates=[cand("sd/tiny", task="text-to-image"), cand("st/tiny", task="sentence-embeddings")],
        dataset_root=tmp_path / "ds",
        toolchain={**toolchain, "diffusers": "0.42.1"},
        planner=planner,
        device="cpu",
        dtype="float32",
    )
    assert [e["model_id"] for e in newer.entries] == ["sd/tiny"]


# -- the GPU runner class -------------------------------------------------------------------------------


def test_the_gpu_queue_takes_the_selected_gpu_models_sized_in_gpus(tmp_path: Path) -> None:
    from pipeline.prices import load_prices

    h200 = load_prices()["p5en.48xlarge"].accelerators
    l40s = load_prices()["g6e.xlarge"].accelerators
    assert h200 is not None and l40s is not None
    candidates = [cand("small/one"), cand("big/seventy"), cand("small/not-on-the-list"), cand("small/one", task=ITT)]
    only = {("Small/One", TG), ("big/seventy", TG)}  # the Selected list's gpu entries (ids compare casefolded)
    queue = build_queue(candidates=candidates, dataset_root=None, toolchain=TOOLCHAIN, planner=planner,
                        device="cuda", instance="p5en.48xlarge", accelerators=h200, only=only)  # fmt: skip
    by_model = {e["model_id"]: e for e in queue.entries}
    assert set(by_model) == {"small/one", "big/seventy"}
    small, big = by_model["small/one"], by_model["big/seventy"]
    assert (small["runner"], small["cores"], small["device"], small["instance"]) == (
        "gpu-1g",
        1,
        "cuda",
        "p5en.48xlarge",
    )
    # 70B in bfloat16 is 141 GB of weights: with the KV cache and headroom, two 141 GB H200s.
    assert (big["runner"], big["cores"]) == ("gpu-2g", 2)
    skipped = {(s["model_id"], s["task"]): s["reason"] for s in queue.skipped}
    assert skipped[("small/not-on-the-list", TG)] == skipped[("small/one", ITT)]
    assert skipped[("small/one", ITT)].startswith("gpu: not marked `gpu: true`")
    # On one 48 GB L40S the 70B model cannot run at all: skipped with the reason, never queued.
    on_l40s = build_queue(candidates=candidates, dataset_root=None, toolchain=TOOLCHAIN, planner=planner,
                          device="cuda", instance="g6e.xlarge", accelerators=l40s, only=only)  # fmt: skip
    assert [e["model_id"] for e in on_l40s.entries] == ["small/one"]
    reasons = {s["model_id"]: s["reason"] for s in on_l40s.skipped}
    assert (
        reasons["big/seventy"].startswith("does not fit")
        and "1 x 48 GiB GPUs of a g6e.xlarge" in reasons["big/seventy"]
    )
    # A GPU row measured at this revision, workload and toolchain is not queued again; a neuron row is no GPU row.
    dataset = tmp_path / "ds"
    gpu_hw = {
        "name": "nvidia-h200",
        "instance_type": "p5en.48xlarge",
        "accelerator": "NVIDIA H200",
        "core_config": None,
    }
    build([record("small/one", device="cuda", hardware=gpu_hw), record("big/seventy")], dataset)
    gpu_queue = {"device": "cuda", "instance": "p5en.48xlarge", "accelerators": h200, "only": only}
    again = build_queue(candidates=candidates, dataset_root=dataset, toolchain={"transformers": "5.0.0"},
                        planner=planner, **gpu_queue)  # fmt: skip
    assert [e["model_id"] for e in again.entries] == ["big/seventy"]
    with pytest.raises(ConfigError, match="GPU runner class"):
        build_queue(candidates=candidates, dataset_root=None, toolchain=TOOLCHAIN, planner=planner, device="cuda")


def test_queue_device_cuda_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import datetime as dt

    from pipeline.cli import main

    discovery = tmp_path / "candidates.json"
    found = Discovery(
        dt.date(2026, 11, 30), TG, "selected",
        [cand("meta-llama/Llama-3.2-1B-Instruct"), cand("acme/not-selected")],
    )  # fmt: skip
    discovery.write_text(json.dumps(found.to_dict()))
    selected = tmp_path / "selected.yaml"
    selected.write_text(f"models:\n  - model_id: meta-llama/Llama-3.2-1B-Instruct\n    task: {TG}\n    gpu: true\n"
                        f"  - model_id: acme/not-selected\n    task: {TG}\n")  # fmt: skip
    monkeypatch.setattr(HubPlanner, "__call__", lambda self, c: replace(_plan("llama-3.2-1b"), model=c.model_id))
    out = tmp_path / "queue.json"
    args = ["queue", "--candidates", str(discovery), "--device", "cuda", "--selected", str(selected), "--out", str(out)]
    assert main(args) == 0
    [entry] = json.loads(out.read_text())["chunks"][0]["include"]
    assert (entry["model_id"], entry["runner"], entry["device"], entry["instance"]) == (
        "meta-llama/Llama-3.2-1B-Instruct", "gpu-1g", "cuda", "p5en.48xlarge",
    )  # fmt: skip
    assert main([*args, "--instance", "trn2.48xlarge"]) == 2
    assert "names no GPUs for it" in capsys.readouterr().err
    assert main([*args, "--estimate", str(tmp_path / "cost.json")]) == 2
    assert "a cuda queue has none" in capsys.readouterr().err


def test_a_new_toolchain_re_measures_what_passed_first_then_compile_failures_then_the_rest(tmp_path: Path) -> None:
    """Issue 30: after a bump every model is queued again; what passed on the old toolchain goes first, then what
    failed at compile, then the rest (other failures, new models), each group largest and longest first; the old
    rows stay."""
    old = {"neuronx_cc": "2.20.0"}
    root = tmp_path / "dataset"
    build(
        [
            record("a/passed", versions=old),
            record("b/compile", "fail", versions=old),  # failure_stage compile
            sample_failure(model_id="c/load", revision=REV, stage="load", code="oom_host", versions=old),
            record("big/passed", versions=old),
            record("e/then-passed", "fail", versions=old, minute=1),
            record("e/then-passed", versions=old, minute=2),  # its newest row decides
        ],
        root,
    )
    names = ["d/new", "c/load", "b/compile", "a/passed", "big/passed", "e/then-passed"]
    queue = build_queue(candidates=[cand(m) for m in names], dataset_root=root, toolchain=TOOLCHAIN, planner=planner)
    order = [e["model_id"] for e in queue.entries]
    assert order == ["big/passed", "a/passed", "e/then-passed", "b/compile", "c/load", "d/new"]
    assert queue.remeasure == {"passed": 3, "compile_failure": 1, "rest": 2}
    assert queue.to_dict()["remeasure"] == queue.remeasure
    assert len(list((root / "data/results").glob("*.parquet"))) == 1  # nothing rewritten: the old rows are history
