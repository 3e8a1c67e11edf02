"""The second-machine check's verdict from what run.py printed, and ``trncat warm-check``'s refusals (the run on the
emulator is in tests/backends/test_warm_start_emulated.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import constants
from pipeline.cli import main
from pipeline.publish import parse_run_output
from pipeline.records import bundle_path
from tests.support.records import sample_record


def test_only_every_graph_served_is_verified() -> None:
    ok = "compiled cache: started warm: ...\nwarm_start    hits=2 misses=0 first_call_s=0.412\n"
    assert parse_run_output(0, ok) == ("verified", 2, 0, 0.412, "2 of 2 graph(s) served by the cache")
    missed = ("warm_start    hits=1 misses=1 first_call_s=3.000\n"
              "require-warm: failed: 1 of 2 graph(s) missed the cache and compiled\n")  # fmt: skip
    status, hits, misses, _, message = parse_run_output(3, missed)
    assert (status, hits, misses) == ("missed", 1, 1) and "missed the cache" in message
    refused = "compiled cache: ...; compiling\nrequire-warm: refused: the key differs in config_shapes (...)\n"
    assert parse_run_output(2, refused)[0] == "refused" and "config_shapes" in parse_run_output(2, refused)[4]
    assert parse_run_output(0, "warm_start    hits=0 misses=0 first_call_s=0.1\n")[0] == "missed"  # nothing hit
    status, *_, message = parse_run_output(1, "Traceback ...\nRuntimeError: boom\n")
    assert status == "error" and "RuntimeError: boom" in message


def _record(tmp_path: Path, *, runner: str = "trn2-runner-1", cache: bool = True) -> Path:
    record = sample_record(run={"runner": runner, "source": "ci", "github_run_id": "1", "github_sha": "a" * 40,
                                "machine": "i-0123456789abcdef1"})  # fmt: skip
    if cache:
        record["compiled_cache"] = {"repo_id": "trncat/trncat-compiled", "revision": "e" * 40, "sha256": "f" * 64,
                                    "path": bundle_path(record, "f" * 64), "bytes": 1024, "files": 3}  # fmt: skip
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    return path


def test_warm_check_refuses_the_runner_that_made_the_bundle_and_a_row_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(constants, "RUNNER_NAME", "trn2-runner-1")
    monkeypatch.setattr("pipeline.backends.this_machine", lambda: "i-0123456789abcdef1")  # the maker's machine
    assert main(["warm-check", str(_record(tmp_path)), "--model", str(tmp_path)]) != 0
    assert "made this bundle: the check runs on another machine" in capsys.readouterr().err
    assert main(["warm-check", str(_record(tmp_path, cache=False)), "--model", str(tmp_path)]) != 0
    assert "names its compiled-cache bundle" in capsys.readouterr().err


def test_warm_check_refuses_a_record_whose_bundle_is_not_the_queued_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(constants, "RUNNER_NAME", "trn2-runner-2")
    record = _record(tmp_path)
    assert main(["warm-check", str(record), "--model", str(tmp_path), "--sha256", "0" * 64]) != 0
    assert f"its bundle is not {'0' * 64!r}" in capsys.readouterr().err


def test_a_speech_row_s_check_transcribes_the_workload_s_clips(monkeypatch: pytest.MonkeyPatch) -> None:
    # the speech-recognition run.py takes WAV files: the check hands it the clips the row was measured on, and
    # runs it --require-warm like every other row (the speech template lacked the option: a check of a speech row
    # exited 2 on it)
    import subprocess

    from pipeline.publish import warmcheck
    from pipeline.workload import CLIPS_DIR, speech_clips
    from tests.support.records import sample_speech_record

    seen: dict[str, object] = {}

    def run(command: list[str], cwd: Path, **_: object) -> subprocess.CompletedProcess[str]:
        seen["command"], seen["script"] = command, (Path(cwd) / "run.py").read_text()
        return subprocess.CompletedProcess(command, 0, "warm_start    hits=2 misses=0 first_call_s=1.50\n", "")

    monkeypatch.setattr(warmcheck.subprocess, "run", run)
    record = sample_speech_record()
    checked = warmcheck.warm_check(record, model="acme/whisper-small")
    command = seen["command"]
    assert isinstance(command, list) and "--require-warm" in command
    clips = [str(CLIPS_DIR / clip.name) for clip in speech_clips()]
    assert command[-len(clips) :] == clips and all(Path(c).is_file() for c in clips)
    assert '"--require-warm"' in str(seen["script"]) and "check_warm(args.require_warm, first)" in str(seen["script"])
    assert checked.status == "verified" and checked.hits == 2
