"""``trncat serve`` of a Hub id at a revision: fetched through pipeline/models (no code file), judged by the
remote-code gate before any engine starts; a refused or unfetched model is the record's verdict (issue 28)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pipeline import constants
from pipeline.cli.serving import concurrencies
from pipeline.errors import ConfigError
from pipeline.models.select import DISK_RESERVE_BYTES
from pipeline.records import validate_record
from pipeline.serve import ServeOptions, resolve_served, serve_hub_model, serving_workload
from pipeline.testing import tiny


def _seed(localhub, repo: str, folder: Path, extra: dict[str, bytes] | None = None) -> str:
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    localhub.store.create_repo(repo, metadata={"pipeline_tag": "text-generation", "library_name": "transformers"})
    return localhub.store.commit_files(repo, {**files, **(extra or {})}, message="upload")


def _custom(tmp_path: Path, sentinel: Path) -> Path:
    """The tiny Llama renamed to a model type transformers does not know, asking for its own code."""
    folder = tiny.build_tiny_llama(tmp_path / "custom")
    config = json.loads((folder / "config.json").read_text())
    config |= {"model_type": "acme_custom", "auto_map": {"AutoModelForCausalLM": "modeling_acme.Custom"}}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_acme.py").write_text(f"open({str(sentinel)!r}, 'w').write('ran')\n")
    return folder


def _serve(model: str, hub, out: Path, *, revision: str, source: str = "local"):
    return serve_hub_model(
        model,
        hub=hub,
        revision=revision,
        options=ServeOptions(
            device="cpu", workload=serving_workload("cpu-tiny"), out=out, warm_restart=False, source=source
        ),
    )


def test_a_hub_model_is_fetched_at_its_revision_without_code_files(localhub, tmp_path: Path) -> None:
    folder = tiny.build_tiny_llama(tmp_path / "tiny")
    sha = _seed(localhub, "acme/tiny", folder, {"modeling_evil.py": b"raise SystemExit", "tools/run.sh": b"rm -rf"})
    resolved = resolve_served("acme/tiny", hub=localhub.client, revision=sha)
    fetched = {p.relative_to(resolved.path).as_posix() for p in resolved.path.rglob("*") if p.is_file()}
    assert resolved.error is None and (resolved.model_id, resolved.revision) == ("acme/tiny", sha)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= fetched
    assert not [p for p in fetched if p.endswith((".py", ".sh"))], fetched
    # a folder is served as it is, under the id and revision given or derived from its content
    local = resolve_served(folder, hub=None)
    assert local.model_id == "local/tiny" and len(local.revision) == 40
    with pytest.raises(ConfigError, match="no Hub client"):
        resolve_served("acme/tiny", hub=None, revision=sha)
    with pytest.raises(ConfigError, match="local folders only"):
        resolve_served("acme/tiny", hub=localhub.client, model_id="acme/other", revision=sha)


def test_a_model_that_needs_its_own_code_is_refused_before_any_engine_starts(
    localhub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sentinel = tmp_path / "remote-code-ran"
    sha = _seed(localhub, "acme/custom", _custom(tmp_path, sentinel))
    monkeypatch.setattr(constants, "GITHUB_RUN_ID", "4242")
    monkeypatch.setattr(constants, "RUNNER_NAME", "trn2-runner-7")
    out = tmp_path / "out" / "serving.json"
    record = _serve("acme/custom", localhub.client, out, revision=sha, source="ci")
    assert record["status"] == "fail" and record["failure"]["code"] == "remote_code", record["failure"]
    assert (record["model_id"], record["revision"]) == ("acme/custom", sha)
    assert validate_record(record) == []
    assert record["serving"]["points"] == [] and record["serving"]["engine"]["ready_s"] is None
    assert not (out.parent / "serving.serving" / "engine.log").exists(), "no engine was started"
    assert not sentinel.exists()
    # a CI record names its run (publish accepts only its own run's records)
    assert record["run"]["github_run_id"] == "4242" and record["run"]["runner"] == "trn2-runner-7"
    assert json.loads(out.read_text())["failure"]["code"] == "remote_code"


def test_a_refused_download_is_an_error_record_and_fetches_nothing(
    localhub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = _seed(localhub, "acme/slim", tiny.build_tiny_llama(tmp_path / "tiny"))
    monkeypatch.setattr(type(localhub.client), "cache_free_bytes", lambda self: DISK_RESERVE_BYTES)
    record = _serve("acme/slim", localhub.client, tmp_path / "serving.json", revision=sha)
    assert record["status"] == "error" and record["failure"]["code"] == "download_refused", record["failure"]
    assert record["run"]["github_run_id"] is None  # a local run names no CI run
    assert validate_record(record) == []
    assert localhub.server.count_requests(r"/resolve/[^/]+/model\.safetensors$", "GET") == 0


def test_a_disk_that_fills_during_the_download_is_disk_full_as_bench_records_it(
    localhub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A download that fills the disk was ``download_failed`` from serve and ``disk_full`` from bench: serve's
    fetch failure is classified by bench's rule (docs/failures.md), a refused download stays ``download_refused``."""
    import errno

    from pipeline.hub.translate import translate

    sha = _seed(localhub, "acme/full", tiny.build_tiny_llama(tmp_path / "tiny"))

    def snapshot(self, model_id: str, **_: object) -> Path:
        raise translate(OSError(errno.ENOSPC, "No space left on device"), f"downloading {model_id}", attempts=1)

    monkeypatch.setattr(type(localhub.client), "snapshot", snapshot)
    record = _serve("acme/full", localhub.client, tmp_path / "serving.json", revision=sha)
    assert (record["status"], record["failure"]["stage"], record["failure"]["code"]) == ("error", "load", "disk_full")
    assert "No space left on device" in record["failure"]["message"] and validate_record(record) == []


@pytest.mark.parametrize("text", ["", "a", "1,,x", "0,1", "4,2", "1,1", "-1", "70000", "1.5"])
def test_the_sweep_parser_refuses_what_is_no_ascending_list_of_stream_counts(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        concurrencies(text)


def test_the_sweep_parser_reads_stream_counts() -> None:
    assert concurrencies("1, 2,4,") == (1, 2, 4)
