"""``trncat check`` against the local hub with a merged dataset: each rule of the verdict, the model's own small
files only (a test counts the requests by path), the dataset side in a few requests, the JSON's exact shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pipeline.check import JSON_KEYS, VERDICTS, check_model
from pipeline.cli import main
from pipeline.dataset import FAMILIES_FILE, build
from tests import FIXTURES
from tests.support.localhub_fixtures import repo_history
from tests.support.records import fake_revision, sample_failure, sample_record

DATASET = "trncat/results"
LLAMA = {"architecture": "LlamaForCausalLM", "model_type": "llama"}
#: What a check must never ask the Hub for: weights and code.
WEIGHTS_OR_CODE = re.compile(r"\.(safetensors|bin|pt|pth|ckpt|gguf|h5|msgpack|onnx|py)(\?|$)")


def _record(model_id: str, *, fail: bool = False, **family: Any) -> dict[str, Any]:
    make = sample_failure if fail else sample_record
    extra = {"stage": "compile", "code": "ncc_evrf001", "message": "unsupported op"} if fail else {}
    return make(model_id=model_id, revision=fake_revision(model_id), **extra, **{**LLAMA, **family})


def _cpu_only(model_id: str) -> dict[str, Any]:
    record = json.loads((FIXTURES / "valid" / "sentence_embeddings_cpu_pass.json").read_text())
    record.update(model_id=model_id, architecture="BertModel", model_type="bert")
    return record


def _upload(store, repo_id: str, folder: Path | None, meta: dict[str, Any], **extra: bytes) -> str:
    files: dict[str, Path | bytes] = {}
    if folder is not None:
        files.update({p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()})
    # A code file and weights sit beside the small files: a check must never ask for either.
    files.update({"modeling_evil.py": b"raise SystemExit('never imported')", **extra})
    store.create_repo(repo_id, metadata={"library_name": "transformers", "pipeline_tag": "text-generation", **meta})
    return store.commit_files(repo_id, files, message="upload")


@pytest.fixture
def catalog(localhub, tiny_models: dict[str, Path], tmp_path: Path) -> Any:
    """A merged dataset (Trainium2 rows of four Llamas, one failing; a BERT measured on CPU only) and the models."""
    folder = tmp_path / "dataset"
    build(
        [_record("acme/base-llama"), _record("acme/llama-a"), _record("acme/llama-b"),
         _record("acme/llama-c", fail=True), _cpu_only("acme/bert-cpu")],
        folder,
    )  # fmt: skip
    store = localhub.store
    store.create_repo(DATASET, repo_type="dataset")
    files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    store.commit_files(DATASET, files, message="merged results", repo_type="dataset")
    llama = tiny_models["text-generation"]
    card = b"---\nbase_model: acme/base-llama\nlicense: mit\n---\n# A fine-tune of acme/base-llama\n"
    _upload(store, "acme/base-llama", llama, {})
    _upload(store, "acme/ft", llama, {}, **{"README.md": card})
    _upload(store, "acme/other-llama", llama, {})
    mistral = json.loads((llama / "config.json").read_text())
    mistral.update(architectures=["MistralForCausalLM"], model_type="mistral")
    _upload(store, "acme/new-arch", None, {}, **{"config.json": json.dumps(mistral).encode()})
    adapter = {"base_model_name_or_path": "acme/base-llama", "peft_type": "LORA", "task_type": "CAUSAL_LM"}
    adapter_files = {"adapter_config.json": json.dumps(adapter).encode(), "adapter_model.safetensors": b"\0" * 64}
    _upload(store, "acme/adapter", None, {"library_name": "peft"}, **adapter_files)
    bert = tiny_models["sentence-embeddings"]
    _upload(
        store, "acme/bert-ft", bert, {"library_name": "sentence-transformers", "pipeline_tag": "sentence-similarity"}
    )
    _upload(store, "acme/remote", llama, {"tags": ["custom_code"]})
    _upload(store, "acme/gated", llama, {"gated": "manual"})
    return localhub


def _check(localhub, model_id: str, **kwargs: Any) -> Any:
    kwargs.setdefault("cache_repo", None)
    return check_model(model_id, hub=localhub.client, dataset_repo=DATASET, **kwargs)


def test_a_measured_model_gives_measured_pass(catalog) -> None:
    answer = _check(catalog, "acme/base-llama")
    assert answer.verdict == "measured-pass" and answer.task == "text-generation"
    assert [e["kind"] for e in answer.evidence] == ["model"] and answer.evidence[0]["model_id"] == "acme/base-llama"
    assert answer.evidence[0]["toolchain"] == "neuronx-cc 2.21.0, torch-neuronx 2.14.0, transformers 5.0.0"
    # It was measured at another revision than the Hub's head, and the reason says so.
    assert "measured at another revision" in answer.reason and answer.revision
    assert isinstance(answer.plan["cores"], int) and answer.plan["cores"] >= 1


def test_a_fine_tune_of_a_measured_base_likely_runs_from_the_base(catalog) -> None:
    answer = _check(catalog, "acme/ft")
    assert answer.verdict == "likely-runs"
    assert [(e["kind"], e["model_id"], e["status"]) for e in answer.evidence] == [
        ("base_model", "acme/base-llama", "pass")
    ]
    assert "acme/base-llama (finetune)" in answer.reason
    assert isinstance(answer.plan["cores"], int) and answer.planned == "acme/ft"
    assert answer.run_py and "MODEL_ID = 'acme/ft'" in answer.run_py and "trncat check" in answer.run_py
    compile(answer.run_py, "run.py", "exec")


def test_another_model_of_a_measured_architecture_likely_runs_with_the_counts(catalog) -> None:
    answer = _check(catalog, "acme/other-llama")
    assert answer.verdict == "likely-runs"
    assert {e["kind"] for e in answer.evidence} == {"architecture"}
    assert sorted(e["model_id"] for e in answer.evidence) == [
        "acme/base-llama", "acme/llama-a", "acme/llama-b", "acme/llama-c"
    ]  # fmt: skip
    assert "3 of 4 pass (1 fails: ncc_evrf001 x1) among LlamaForCausalLM (llama)" in answer.reason
    failed = [e for e in answer.evidence if e["status"] == "fail"]
    assert [e["failure_code"] for e in failed] == ["ncc_evrf001"]
    assert isinstance(answer.plan["cores"], int)


def test_an_architecture_never_measured_is_unknown(catalog) -> None:
    answer = _check(catalog, "acme/new-arch")
    assert answer.verdict == "unknown" and answer.evidence == []
    assert "MistralForCausalLM (mistral)" in answer.reason
    assert isinstance(answer.plan["cores"], int)  # planned from its config alone: no weights anywhere


def test_an_adapter_resolves_to_its_base(catalog) -> None:
    answer = _check(catalog, "acme/adapter")
    assert answer.verdict == "likely-runs" and answer.task == "text-generation"
    assert answer.evidence[0]["kind"] == "base_model" and answer.evidence[0]["model_id"] == "acme/base-llama"
    assert "(adapter)" in answer.reason
    # It has no config.json: the plan and run.py are its base's, and say so.
    assert answer.planned == "acme/base-llama" and isinstance(answer.plan["cores"], int)
    assert "planned from acme/base-llama" in answer.text()


def test_a_family_with_only_cpu_rows_is_unknown(catalog) -> None:
    answer = _check(catalog, "acme/bert-ft")
    assert answer.task == "sentence-embeddings" and answer.verdict == "unknown" and answer.evidence == []
    assert "BertModel (bert)" in answer.reason and "CPU or cuda only: not Trainium2 evidence" in answer.reason


@pytest.mark.parametrize(
    ("model_id", "verdict", "words"),
    [
        ("acme/remote", "likely-fails", "remote_code: needs trust_remote_code (custom_code tag)"),
        ("acme/gated", "unknown", "gated: gated (manual approval)"),
        ("acme/does-not-exist", "unknown", "not on the Hub"),
    ],
)
def test_a_model_trncat_cannot_run_or_read_gets_discovers_reason(catalog, model_id, verdict, words) -> None:
    answer = _check(catalog, model_id)
    assert answer.verdict == verdict and words in answer.reason and answer.run_py is None


def test_no_weight_and_no_code_file_is_ever_requested(catalog) -> None:
    mark = len(catalog.server.requests)
    for model_id in ("acme/base-llama", "acme/ft", "acme/other-llama", "acme/new-arch", "acme/adapter", "acme/bert-ft",
                     "acme/remote", "acme/gated"):  # fmt: skip
        _check(catalog, model_id)
    requested = [path for _, path in catalog.server.requests[mark:]]
    assert any("/resolve/" in p and p.split("?")[0].endswith("config.json") for p in requested)  # it did fetch
    assert [p for p in requested if WEIGHTS_OR_CODE.search(p.split("?")[0])] == []
    assert not list(catalog.cache_dir.rglob("*.py")) and not list(catalog.cache_dir.rglob("*.safetensors"))


def test_the_dataset_side_takes_at_most_five_requests_and_reads_merged_main_only(catalog) -> None:
    store = catalog.store
    repo = store.get(DATASET, repo_type="dataset")
    # An open PR adds a Trainium failure of the fine-tune: it is not merged, so it is no evidence.
    pr = store.open_pull_request(repo, title="results", author="trncat-bot")
    folder = Path(catalog.cache_dir).parent / "pr"
    build([_record("acme/ft", fail=True)], folder)
    store.commit_files(DATASET, {FAMILIES_FILE: folder / FAMILIES_FILE}, repo_type="dataset",
                       branch=f"refs/pr/{pr}")  # fmt: skip
    mark = len(catalog.server.requests)
    answer = _check(catalog, "acme/ft")
    dataset = [p for _, p in catalog.server.requests[mark:] if "/datasets/" in p]
    assert len(dataset) <= 5, dataset
    assert answer.verdict == "likely-runs" and answer.catalog.startswith(f"{DATASET}@")


def test_the_json_is_exactly_the_issue_s_shape(catalog, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    from pipeline import constants

    monkeypatch.setattr(constants, "HF_ENDPOINT", catalog.url)
    code = main(["check", "acme/ft", "--dataset", DATASET, "--no-cache", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert tuple(data) == JSON_KEYS and data["verdict"] in VERDICTS
    assert set(data["evidence"][0]) == {"kind", "model_id", "status", "cores", "toolchain", "failure_code"}
    assert isinstance(data["plan"]["cores"], int) and isinstance(data["run_py"], str)
    # Without --json: a few lines, verdict, evidence and plan; the run.py only when asked for (issue 37).
    assert main(["check", "acme/ft", "--dataset", DATASET, "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("acme/ft @ ") and "likely-runs" in text.splitlines()[0]
    assert "  - base_model: acme/base-llama pass" in text and "  plan: " in text
    assert "MODEL_ID" not in text and len(text.splitlines()) < 12 and "--run-py FILE writes it" in text
    assert main(["check", "acme/ft", "--dataset", DATASET, "--no-cache", "--show-run-py"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(data["run_py"].rstrip())


def test_a_local_dataset_folder_answers_the_same_without_dataset_requests(catalog, tmp_path: Path) -> None:
    folder = tmp_path / "local"
    build([_record("acme/base-llama")], folder)
    mark = len(catalog.server.requests)
    answer = check_model("acme/ft", hub=catalog.client, dataset_dir=folder, cache_repo=None)
    assert answer.verdict == "likely-runs" and answer.catalog == str(folder)
    assert not [p for _, p in catalog.server.requests[mark:] if "/datasets/" in p]


def _cache_entry(model_id: str, **neuron: Any) -> bytes:
    # The shape optimum-neuron writes (optimum/neuron/cache/entries): the model's config, its export under "neuron".
    return json.dumps({"_entry_class": "SingleModelCacheEntry", "_model_id": model_id, "model_type": "mistral",
                       "neuron": neuron}, sort_keys=True).encode()  # fmt: skip


def test_other_routes_name_optimum_neurons_precompiled_configurations(catalog) -> None:
    from pipeline.check import CACHE_REPO, LOOKUP_COMMAND

    store = catalog.store
    store.create_repo(CACHE_REPO)
    registry = "neuronxcc-2.21.0+abc123/0_REGISTRY/0.4.1"
    store.commit_files(CACHE_REPO, {
        f"{registry}/mistral/acme/new-arch/0123456789abcdef0123.json": _cache_entry(
            "acme/new-arch", num_cores=2, batch_size=4, sequence_length=4096, auto_cast_type="bf16"),
        # newer releases: a mode folder, tp_degree and torch_dtype
        "neuronxcc-2.22.0+def456/0_REGISTRY/0.5.0/inference/mistral/acme/new-arch/fedcba9876543210fedc.json":
            _cache_entry("acme/new-arch", tp_degree=8, batch_size=1, sequence_length=8192, torch_dtype="bfloat16"),
        f"{registry}/training/mistral/acme/new-arch/aaaaaaaaaaaaaaaaaaaa.json": _cache_entry("acme/new-arch"),
        f"{registry}/mistral/other/model/bbbbbbbbbbbbbbbbbbbb.json": _cache_entry("other/model", num_cores=1),
        "neuronxcc-2.21.0+abc123/MODULE_1234/model.neff": b"\0" * 32,
    })  # fmt: skip
    mark = len(catalog.server.requests)
    answer = check_model("acme/new-arch", hub=catalog.client, dataset_repo=DATASET)
    assert answer.verdict == "unknown"
    assert [(c.cores, c.batch_size, c.sequence_length, c.dtype) for c in answer.routes] == [
        (8, 1, 8192, "bfloat16"), (2, 4, 4096, "bf16")
    ]  # fmt: skip
    assert f"`{LOOKUP_COMMAND} acme/new-arch`" in answer.reason and "2 cores, batch 4, sequence 4096" in answer.reason
    cache = [p for _, p in catalog.server.requests[mark:] if "optimum-neuron-cache" in p]
    listings = [p for p in cache if "/tree/" in p]
    assert len(listings) == 1, cache  # one listing per check
    assert not [p for p in cache if p.split("?")[0].endswith((".neff", ".pb"))]
    # A model that runs needs no other route: the cache is not asked.
    mark = len(catalog.server.requests)
    assert check_model("acme/ft", hub=catalog.client, dataset_repo=DATASET).verdict == "likely-runs"
    assert not [p for _, p in catalog.server.requests[mark:] if "optimum-neuron-cache" in p]


def test_registry_paths_are_read_as_optimum_neuron_writes_them() -> None:
    from pipeline.check import registry_entry

    # The layout of optimum-neuron's cache guide ("Neuron model cache lookup").
    documented = "neuronxcc-2.12.54.0+f631c2365/0_REGISTRY/0.0.18/llama/meta-llama/Llama-2-7b-chat-hf/54c1f6689cd8.json"
    assert registry_entry(documented) == ("2.12.54.0+f631c2365", "llama", "meta-llama/Llama-2-7b-chat-hf")
    assert registry_entry("neuronxcc-2.13.66.0/0_REGISTRY/0.0.22.dev0/inference/opt/facebook/opt-125m/x.json")[2] == (
        "facebook/opt-125m"
    )
    for path in ("neuronxcc-2.13/0_REGISTRY/0.0.22/training/opt/facebook/opt-125m/x.json",
                 "neuronxcc-2.13/MODULE_1/model.neff", "neuronxcc-2.13/0_REGISTRY/0.0.22/opt/../etc/x.json",
                 "README.md"):  # fmt: skip
        assert registry_entry(path) is None, path


def test_a_revision_is_checked_as_given_and_a_bad_one_refused(catalog) -> None:
    from pipeline.errors import ConfigError

    [first, *_] = reversed(repo_history(catalog.store, "acme/ft"))  # the repo's first commit: no files yet
    answer = _check(catalog, "acme/ft", revision="main")
    assert answer.revision and len(answer.revision) == 40 and answer.revision != first["sha"]
    bare = _check(catalog, "acme/ft", revision=first["sha"])
    # At that commit it had no card and no config: nothing names its base or its architecture.
    assert bare.revision == first["sha"] and bare.verdict == "unknown" and bare.plan is None
    for bad in ("../../etc", "main; rm -rf /", "-x"):
        with pytest.raises(ConfigError):
            _check(catalog, "acme/ft", revision=bad)


def test_a_diffusers_pipeline_is_planned_from_its_component_configs_alone(catalog, tiny_models) -> None:
    _upload(catalog.store, "acme/tiny-sd", tiny_models["text-to-image"],
            {"library_name": "diffusers", "pipeline_tag": "text-to-image"})  # fmt: skip
    mark = len(catalog.server.requests)
    answer = _check(catalog, "acme/tiny-sd")
    assert answer.task == "text-to-image" and answer.verdict == "unknown"
    assert "StableDiffusionPipeline" in answer.reason
    assert isinstance(answer.plan["cores"], int) and {c["name"] for c in answer.plan["components"]} >= {"unet", "vae"}
    assert answer.run_py and "DiffusionPipeline" in answer.run_py
    fetched = sorted(p.split("/resolve/", 1)[1].split("/", 1)[1].split("?")[0]
                     for m, p in catalog.server.requests[mark:] if "/resolve/" in p and m == "GET")  # fmt: skip
    assert "model_index.json" in fetched and "unet/config.json" in fetched
    assert [p for p in fetched if WEIGHTS_OR_CODE.search(p)] == []


def test_an_unknown_instance_or_task_is_one_clear_error(
    catalog, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    from pipeline import constants

    monkeypatch.setattr(constants, "HF_ENDPOINT", catalog.url)
    assert main(["check", "acme/ft", "--dataset", DATASET, "--instance", "trn9.huge"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "trn9.huge" in err[0]
    assert main(["check", "not a model id", "--dataset", DATASET]) != 0
    assert "invalid model id" in capsys.readouterr().err


# -- issue 37: no silent success, run.py to a file, a quiet line for a missing cache ----------------------


def test_run_py_is_written_to_the_file_asked_for(catalog, capsys, monkeypatch, tmp_path: Path) -> None:
    from pipeline import constants

    monkeypatch.setattr(constants, "HF_ENDPOINT", catalog.url)
    target = tmp_path / "try" / "run.py"
    assert main(["check", "acme/ft", "--dataset", DATASET, "--no-cache", "--run-py", str(target)]) == 0
    text = capsys.readouterr().out
    assert f"written to {target}" in text and "MODEL_ID" not in text
    assert "MODEL_ID = 'acme/ft'" in target.read_text(encoding="utf-8")


@pytest.mark.parametrize("revision", [None, "f" * 40])
def test_a_model_or_revision_not_on_the_hub_has_its_own_exit_code(catalog, capsys, monkeypatch, revision) -> None:
    from pipeline import constants
    from pipeline.check import NOT_FOUND_EXIT

    monkeypatch.setattr(constants, "HF_ENDPOINT", catalog.url)
    model = "acme/ft" if revision else "acme/does-not-exist"
    args = ["check", model, "--dataset", DATASET, "--no-cache"] + (["--revision", revision] if revision else [])
    assert NOT_FOUND_EXIT not in (0, 1, 2)
    assert main(args) == NOT_FOUND_EXIT
    captured = capsys.readouterr()
    assert "not on the Hub" in captured.out  # the answer still says why
    [line] = captured.err.strip().splitlines()
    assert line.startswith(f"error: {model}: not on the Hub") and ("revision not found" in line) == bool(revision)


def test_a_missing_or_empty_dataset_dir_is_an_error(catalog, capsys, monkeypatch, tmp_path: Path) -> None:
    from pipeline import constants

    monkeypatch.setattr(constants, "HF_ENDPOINT", catalog.url)
    (tmp_path / "empty").mkdir()
    for folder, words in ((tmp_path / "nope", "no such dataset folder"), (tmp_path / "empty", "holds no dataset")):
        assert main(["check", "acme/ft", "--dataset-dir", str(folder), "--no-cache"]) == 2
        captured = capsys.readouterr()
        assert (
            captured.out == ""
            and captured.err.strip()
            == f"error: trncat check: argument --dataset-dir: {folder}: {words}"
            + ("" if words.startswith("no such") else " (no data/latest/*.parquet, no data/families/*.parquet)")
        )


def test_a_hub_without_optimum_neurons_cache_is_one_quiet_line(catalog, capsys, monkeypatch) -> None:
    from pipeline import constants
    from pipeline.check import CACHE_REPO

    monkeypatch.setattr(constants, "HF_ENDPOINT", catalog.url)
    assert main(["check", "acme/new-arch", "--dataset", DATASET]) == 0  # unknown: the cache is asked, is not there
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if CACHE_REPO in line] == [
        f"no {CACHE_REPO} on this Hub: no precompiled configurations to name"
    ]
    assert main(["-q", "check", "acme/new-arch", "--dataset", DATASET]) == 0
    assert CACHE_REPO not in capsys.readouterr().err  # quiet: not a warning


def test_a_small_file_over_the_bound_is_never_downloaded_through_a_base_chain_either(catalog) -> None:
    """Issue 29.6: a config of any size was downloaded (and one named as a base model's too); now the listing's
    sizes are read first and a small file over the bound every reader keeps (4 MiB) is never fetched."""
    from pipeline.models.family import MAX_FILE_BYTES  # the bound the family reader keeps

    huge = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "pad": "x" * MAX_FILE_BYTES})
    card = b"---\nbase_model: acme/huge-base\n---\n# a fine-tune\n"
    _upload(catalog.store, "acme/huge-base", None, {}, **{"config.json": huge.encode()})
    _upload(catalog.store, "acme/huge-ft", None, {}, **{"config.json": huge.encode(), "README.md": card})
    mark = len(catalog.server.requests)
    answer = _check(catalog, "acme/huge-ft")
    fetched = [p for _, p in catalog.server.requests[mark:] if "/resolve/" in p]
    assert [p for p in fetched if p.split("?")[0].endswith("config.json")] == [] and fetched, fetched
    assert answer.plan is None and "not downloaded" in str(answer.plan_note)


def test_control_characters_from_a_config_never_reach_the_terminal(catalog, tiny_models) -> None:
    """Issue 29.7: a config key holding terminal escapes (retitle the window, clear the screen) came back in the
    planner's limit message and check printed it as it was."""
    config = json.loads((tiny_models["text-generation"] / "config.json").read_text())
    config["\x1b]0;owned\x07\x1b[2Jnum_layers"] = 10**9  # a count past the planner's bound: quoted in its message
    _upload(catalog.store, "acme/escapes", None, {}, **{"config.json": json.dumps(config).encode()})
    answer = _check(catalog, "acme/escapes")
    text = answer.text()
    assert "num_layers" in text, text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text.split("run.py to try")[0]), text
    assert "\\x1b" in text


def test_a_second_check_asks_nothing_for_the_small_files_the_cache_holds(catalog) -> None:
    first = _check(catalog, "acme/other-llama")
    mark = len(catalog.server.requests)
    again = _check(catalog, "acme/other-llama")
    model = [p for _, p in catalog.server.requests[mark:] if "/datasets/" not in p]
    # Its listing only: the sizes come from the cached files themselves, which are read at the listed commit.
    assert len(model) == 1 and "/api/models/acme/other-llama" in model[0], model
    assert again.verdict == first.verdict == "likely-runs" and again.plan == first.plan


def test_a_check_answers_with_the_models_stage_matrix_rows(catalog, tmp_path: Path, capsys) -> None:
    """Issue 49: ``trncat check`` reads the same matrix rows the page shows (a dataset without one answers none)."""
    from pipeline.dataset import MATRIX_FILE
    from pipeline.queue import refresh_matrix

    assert _check(catalog, "acme/llama-c").matrix == []
    folder = tmp_path / "with-matrix"
    build([_record("acme/llama-c", fail=True), _record("acme/base-llama")], folder)
    refresh_matrix(folder, planner=None)
    catalog.store.commit_files(DATASET, {MATRIX_FILE: folder / MATRIX_FILE}, message="matrix", repo_type="dataset")
    answer = _check(catalog, "acme/llama-c")
    compile_row = [r for r in answer.matrix if (r["device_class"], r["item"]) == ("trn2", "compile")]
    assert [(r["state"], r["documented"], r["documented_but_fails"]) for r in compile_row] == [
        ("failing", "supported", True)
    ]
    assert {r["model_id"] for r in answer.matrix} == {"acme/llama-c"}
    json.dumps(answer.to_dict())  # JSON values only (decided_at as text)
    assert main(["check", "acme/base-llama", "--dataset", DATASET, "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "  matrix trn2: compile passing (vLLM Neuron docs: supported)" in text
    assert "  matrix trn3: all untested (vLLM Neuron docs: supported)" in text
