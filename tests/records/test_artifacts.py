"""Publish trusts only the artifacts its run's queue asked for (issue 11.12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.errors import RecordError
from pipeline.records import collect_records
from tests.support.records import sample_community, sample_record

RUN_ID = "1234567890"  # what sample_record's run names


def _entry(model_id: str) -> dict:
    record = sample_record(model_id=model_id)
    org, name = model_id.split("/")
    artifact = f"{org}--{name}--{record['task']}--{record['revision'][:12]}"
    keys = ("model_id", "revision", "task", "cores", "dtype")
    return {**{k: record[k] for k in keys}, "device": "neuron", "runner": "trn2-1c", "artifact": artifact}


def _setup(tmp_path: Path, models: list[str]) -> tuple[Path, Path, list[dict]]:
    entries = [_entry(m) for m in models]
    queue = tmp_path / "queue.json"
    queue.write_text(json.dumps({"count": len(entries), "chunks": [{"include": entries}], "skipped": []}))
    downloaded = tmp_path / "downloaded"
    downloaded.mkdir()
    return queue, downloaded, entries


def _artifact(downloaded: Path, name: str, files: dict[str, object]) -> None:
    folder = downloaded / f"record-{name}"
    folder.mkdir()
    for file_name, content in files.items():
        (folder / file_name).write_text(json.dumps(content))


def test_only_the_queued_records_of_this_run_are_accepted(tmp_path: Path) -> None:
    queue, downloaded, entries = _setup(tmp_path, ["acme/good", "acme/other", "acme/third", "acme/fourth"])
    good, other, third, fourth = entries
    _artifact(downloaded, good["artifact"], {f"{good['artifact']}.json": sample_record(model_id="acme/good")})
    # an artifact some job uploaded under another entry's name, carrying a different model (a swap)
    _artifact(downloaded, other["artifact"], {f"{other['artifact']}.json": sample_record(model_id="acme/evil")})
    # the right model, but from another run (a fork PR's run, an old run)
    old = sample_record(model_id="acme/third", run={"github_run_id": "999"})
    _artifact(downloaded, third["artifact"], {f"{third['artifact']}.json": old})
    # a second file that, merged, would have overwritten another artifact's record
    two = {f"{fourth['artifact']}.json": sample_record(model_id="acme/fourth")}
    two[f"{good['artifact']}.json"] = sample_record(model_id="acme/evil")
    _artifact(downloaded, fourth["artifact"], two)
    _artifact(downloaded, "not--queued--text-generation--000000000000", {"x.json": sample_record()})
    out = tmp_path / "records"
    collected = collect_records(downloaded, queue_file=queue, run_id=RUN_ID, out=out)
    assert [Path(p).name for p in collected.accepted] == [f"{good['artifact']}.json"]
    reasons = " | ".join(str(p) for p in collected.problems)
    assert "does not match the queued job (model_id)" in reasons
    assert "run.github_run_id" in reasons
    assert "must hold the regular file" in reasons
    assert "is not in this run's queue" in reasons
    assert len(collected.problems) == 4
    assert json.loads((out / f"{good['artifact']}.json").read_text())["model_id"] == "acme/good"


def test_a_community_record_or_a_symlink_is_never_accepted(tmp_path: Path) -> None:
    queue, downloaded, (entry,) = _setup(tmp_path, ["acme/good"])
    community = sample_community(model_id="acme/good")
    _artifact(downloaded, entry["artifact"], {f"{entry['artifact']}.json": community})
    collected = collect_records(downloaded, queue_file=queue, run_id=RUN_ID, out=tmp_path / "out")
    assert not collected.accepted and "run.source" in str(collected.problems[0])
    folder = downloaded / f"record-{entry['artifact']}"
    (folder / f"{entry['artifact']}.json").unlink()
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(sample_record(model_id="acme/good")))
    (folder / f"{entry['artifact']}.json").symlink_to(secret)
    collected = collect_records(downloaded, queue_file=queue, run_id=RUN_ID, out=tmp_path / "out")
    assert not collected.accepted and "regular file" in str(collected.problems[0])


def test_the_cli_sets_aside_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queue, downloaded, (entry,) = _setup(tmp_path, ["acme/good"])
    _artifact(downloaded, entry["artifact"], {f"{entry['artifact']}.json": sample_record(model_id="acme/good")})
    args = ["collect", str(downloaded), "--queue", str(queue), "--out", str(tmp_path / "out")]
    assert main([*args, "--run-id", RUN_ID]) == 0
    assert main([*args, "--run-id", "77"]) == 1
    assert "set aside:" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(RecordError):
        collect_records(downloaded, queue_file=tmp_path / "bad.json", run_id=RUN_ID, out=tmp_path / "o")


def test_the_gpu_queue_is_collected_beside_the_trn2_queue_and_devices_must_match(tmp_path: Path) -> None:
    queue, downloaded, (trn,) = _setup(tmp_path, ["acme/both"])
    gpu_hw = {"name": "nvidia-h200", "instance_type": "p5en.48xlarge", "accelerator": "H200", "core_config": None}
    gpu = {**trn, "device": "cuda", "runner": "gpu-1g", "artifact": trn["artifact"] + "--cuda"}
    gpu_queue = tmp_path / "queue-gpu.json"
    gpu_queue.write_text(json.dumps({"count": 1, "chunks": [{"include": [gpu]}], "skipped": []}))
    _artifact(downloaded, trn["artifact"], {f"{trn['artifact']}.json": sample_record(model_id="acme/both")})
    cuda = sample_record(model_id="acme/both", device="cuda", hardware=gpu_hw)
    _artifact(downloaded, gpu["artifact"], {f"{gpu['artifact']}.json": cuda})
    collected = collect_records(downloaded, queue_file=[queue, gpu_queue], run_id=RUN_ID, out=tmp_path / "out")
    names = sorted(f"{entry['artifact']}.json" for entry in (trn, gpu))
    assert sorted(Path(p).name for p in collected.accepted) == names
    assert not collected.problems
    # Without the GPU queue its artifact is no job of this run; and a neuron record under a GPU job is refused.
    alone = collect_records(downloaded, queue_file=queue, run_id=RUN_ID, out=tmp_path / "out2")
    assert "is not in this run's queue" in str(alone.problems[0]) and len(alone.accepted) == 1
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    _artifact(swapped, gpu["artifact"], {f"{gpu['artifact']}.json": sample_record(model_id="acme/both")})
    refused = collect_records(swapped, queue_file=[queue, gpu_queue], run_id=RUN_ID, out=tmp_path / "out3")
    assert not refused.accepted and "does not match the queued job (device)" in str(refused.problems[0])
    # Two queues naming one artifact cannot be told apart: refused outright.
    with pytest.raises(RecordError, match="also in another queue"):
        collect_records(downloaded, queue_file=[queue, queue], run_id=RUN_ID, out=tmp_path / "out4")
    args = ["collect", str(downloaded), "--queue", str(queue), str(gpu_queue), "--out", str(tmp_path / "cli")]
    assert main([*args, "--run-id", RUN_ID]) == 0


def test_a_bundle_beside_a_neuron_pass_is_collected_and_a_hostile_or_misplaced_one_set_aside(tmp_path: Path) -> None:
    """Issue 25: the artifact may carry the run's compiled-cache bundle; it is checked here, and a bundle that is
    refused costs the record nothing."""
    import io
    import tarfile

    from pipeline.backends.neuron import pack_cache
    from tests.support.records import sample_failure

    queue, downloaded, (good, hostile, failed) = _setup(tmp_path, ["acme/good", "acme/hostile", "acme/failed"])
    cache = tmp_path / "cache" / "ab" / "cd"
    cache.mkdir(parents=True)
    (cache / f"abcd{'0' * 60}.neff").write_bytes(b"EMULATED-NEFF data")
    for entry, record in ((good, sample_record(model_id="acme/good")),
                          (failed, sample_failure(model_id="acme/failed"))):  # fmt: skip
        _artifact(downloaded, entry["artifact"], {f"{entry['artifact']}.json": record})
        pack_cache(
            tmp_path / "cache", downloaded / f"record-{entry['artifact']}" / f"{entry['artifact']}.neff-cache.tar.gz"
        )
    _artifact(downloaded, hostile["artifact"], {f"{hostile['artifact']}.json": sample_record(model_id="acme/hostile")})
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("ab/cd/hook.py")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"pass"))
    (downloaded / f"record-{hostile['artifact']}" / f"{hostile['artifact']}.neff-cache.tar.gz").write_bytes(
        raw.getvalue()
    )
    out = tmp_path / "records"
    collected = collect_records(downloaded, queue_file=queue, run_id=RUN_ID, out=out)
    assert len(collected.accepted) == 3  # every record stands
    assert sorted(p.name for p in out.glob("*.neff-cache.tar.gz")) == [f"{good['artifact']}.neff-cache.tar.gz"]
    reasons = " | ".join(str(p) for p in collected.problems)
    assert "hook.py" in reasons and "only with a passing neuron run" in reasons and len(collected.problems) == 2


def test_a_record_arriving_with_a_compiled_cache_is_refused(tmp_path: Path) -> None:
    """Issue 29.1: a compromised bench job names any repo's NEFFs in its record; collect refuses the record (only
    publish names a bundle, one it uploaded or verified itself)."""
    from pipeline.records import bundle_path, validate_record

    queue, downloaded, (entry,) = _setup(tmp_path, ["acme/named"])
    record = sample_record(model_id="acme/named")
    record["compiled_cache"] = {"repo_id": "evil/neffs", "revision": "a" * 40, "sha256": "b" * 64, "bytes": 1,
                                "files": 1, "path": bundle_path(record, "b" * 64)}  # fmt: skip
    assert validate_record(record) == []  # valid: only its origin tells it apart
    _artifact(downloaded, entry["artifact"], {f"{entry['artifact']}.json": record})
    out = tmp_path / "records"
    collected = collect_records(downloaded, queue_file=queue, run_id=RUN_ID, out=out)
    assert collected.accepted == [] and list(out.iterdir()) == []
    assert "names a compiled-cache bundle" in " | ".join(str(p) for p in collected.problems)


def test_a_bundle_too_large_for_memory_never_loses_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29.5: a MemoryError while the bundle is checked sets the bundle aside; the record is collected."""
    import pipeline.records.collect as collect

    queue, downloaded, (entry,) = _setup(tmp_path, ["acme/big"])
    _artifact(downloaded, entry["artifact"], {f"{entry['artifact']}.json": sample_record(model_id="acme/big")})
    (downloaded / f"record-{entry['artifact']}" / f"{entry['artifact']}.neff-cache.tar.gz").write_bytes(b"x")

    def exhausted(path: Path, **_: object) -> None:
        raise MemoryError

    monkeypatch.setattr(collect, "check_bundle", exhausted)
    out = tmp_path / "records"
    collected = collect_records(downloaded, queue_file=queue, run_id=RUN_ID, out=out)
    assert [Path(p).name for p in collected.accepted] == [f"{entry['artifact']}.json"]
    assert sorted(p.name for p in out.iterdir()) == [f"{entry['artifact']}.json"]
    assert "memory" in " | ".join(str(p) for p in collected.problems)
