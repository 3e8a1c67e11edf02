"""Stopping ``trncat bench`` from outside ends its child, and a full ``--out`` disk loses no record (issue 29.16-17).

The child runs in a session of its own (so that a kill reaches its helpers), so nothing aimed at the parent
reaches it: a SIGTERM or SIGINT must end it and still write an error record, and after a SIGKILL of the parent
``trncat reap`` (the benchmark job's cleanup, and the start of every bench) must end it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from pipeline.backends import get_backend
from pipeline.bench import BenchOptions, bench_model
from pipeline.bench import run as bench_run
from pipeline.cli import main
from pipeline.errors import BenchError
from pipeline.records import parse_record, validate_record
from tests import ROOT
from tests.support.records import sample_record

#: A bench whose child hangs before loading anything (``fault="hang"``), ended by the test.
SCRIPT = """
import sys
from pathlib import Path
from pipeline.backends import get_backend
from pipeline.bench import BenchOptions, bench_model
from pipeline.errors import BenchError
try:
    bench_model(sys.argv[1], task="text-generation", backend=get_backend("cpu"), out=Path(sys.argv[2]),
                options=BenchOptions(fault="hang", timeout_s=900, iterations=1, warmup=0))
except BenchError as exc:
    print(exc, file=sys.stderr)
    sys.exit(exc.exit_code)
"""


def _start(folder: Path, out: Path, tmp: Path) -> tuple[subprocess.Popen[bytes], psutil.Process]:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    bench = subprocess.Popen([sys.executable, "-c", SCRIPT, str(folder), str(out)], env=env, cwd=ROOT)
    for _ in range(1200):  # the parent imports the libraries first: wait for its child, not a set time
        children = psutil.Process(bench.pid).children() if bench.poll() is None else []
        for child in children:  # the benchmark child (the planner forks one of its own first)
            try:
                if "pipeline.bench.child" in child.cmdline():
                    return bench, child
            except psutil.Error:
                continue
        time.sleep(0.1)
    bench.kill()
    pytest.fail("the bench never started its child")


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _end(child: psutil.Process) -> None:
    if not _gone(child):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_bench_ends_its_child_and_writes_an_error_record(tiny_models, tmp_path, sig) -> None:
    out = tmp_path / "record.json"
    bench, child = _start(tiny_models["text-generation"], out, tmp_path)
    try:
        bench.send_signal(sig)
        assert bench.wait(timeout=300) == 128 + sig
        assert _gone(child)  # its whole group was ended, not left running
        record = parse_record(out.read_text(encoding="utf-8"))
        assert validate_record(record) == []
        assert record["status"] == "error" and record["failure"]["code"] == "interrupted"
        assert sig.name in record["failure"]["message"] and record["failure"]["stage"] == "load"
        assert list((tmp_path / f"trncat-children-{os.getuid()}").iterdir()) == []  # deregistered
    finally:
        bench.kill()
        _end(child)


@pytest.mark.slow
def test_a_child_whose_bench_was_killed_outright_is_reaped(tiny_models, tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "record.json"
    bench, child = _start(tiny_models["text-generation"], out, tmp_path)
    folder = tmp_path / f"trncat-children-{os.getuid()}"
    try:
        for _ in range(100):  # registered just after it started
            if folder.is_dir() and any(folder.iterdir()):
                break
            time.sleep(0.1)
        bench.send_signal(signal.SIGKILL)
        bench.wait(timeout=60)
        time.sleep(0.5)
        assert not _gone(child)  # no parent to end it: it would hold the runner's cores for ever
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        assert main(["reap"]) == 0
        assert "ended 1 process group(s)" in capsys.readouterr().out
        for _ in range(100):
            if _gone(child):
                break
            time.sleep(0.1)
        assert _gone(child) and list(folder.iterdir()) == []
        assert main(["reap"]) == 0 and "ended 0 process group(s)" in capsys.readouterr().out
    finally:
        _end(child)


def test_the_reaper_leaves_a_running_bench_s_child_and_a_reused_pid_alone(tmp_path, monkeypatch) -> None:
    from pipeline.backends import reap_orphans

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"trncat-children-{os.getuid()}"
    folder.mkdir(mode=0o700)
    me = psutil.Process()
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        started = psutil.Process(sleeper.pid).create_time()
        # its parent (this process) is alive: left alone
        entry = {"pgid": sleeper.pid, "child_started": started, "parent": me.pid, "parent_started": me.create_time()}
        (folder / "a.json").write_text(json.dumps(entry))
        assert reap_orphans() == [] and (folder / "a.json").exists()
        # a pid now held by another process (another start time): left alone, the entry dropped
        (folder / "a.json").write_text(json.dumps(entry | {"parent_started": 1.0, "child_started": started - 5}))
        assert reap_orphans() == [] and sleeper.poll() is None and not (folder / "a.json").exists()
        # the registered child of a gone parent: ended
        (folder / "a.json").write_text(json.dumps(entry | {"parent_started": 1.0}))
        assert reap_orphans() == [sleeper.pid]
        assert sleeper.wait(timeout=30) == -signal.SIGKILL
    finally:
        sleeper.kill()


def test_a_full_out_disk_writes_the_record_to_a_fallback_and_says_where(tmp_path, monkeypatch, tiny_models) -> None:
    """Issue 29.17: `cannot write out: No space left on device`, and the run's record was lost."""
    out = tmp_path / "full" / "record.json"
    written = bench_run.fsatomic.write_text

    def full(path: Path, text: str) -> None:
        if Path(path).parent == out.parent:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        written(path, text)

    monkeypatch.setattr(bench_run.fsatomic, "write_text", full)
    (tmp_path / "a-file").write_text("x")  # a first fallback that cannot take it either
    monkeypatch.setattr(bench_run, "fallback_dirs", lambda: [tmp_path / "a-file" / "records", tmp_path / "spare"])
    monkeypatch.setattr(bench_run.harness, "bench_once", lambda *a, **k: sample_record(model_id="local/tiny"))
    with pytest.raises(BenchError, match="No space left on device; the record was written to .*spare") as caught:
        bench_model(
            str(tiny_models["text-generation"]),
            task="text-generation",
            backend=get_backend("cpu"),
            out=out,
            options=BenchOptions(model_id="local/tiny"),
        )
    (kept,) = (tmp_path / "spare").iterdir()
    assert str(kept) in str(caught.value) and kept.name.startswith("record.") and kept.suffix == ".json"
    assert validate_record(parse_record(kept.read_text(encoding="utf-8")), allow_emulated=True) == []
    assert not out.exists()


def test_a_bench_under_a_1_gib_address_space_limit_ends_with_an_out_of_memory_record(tmp_path) -> None:
    """Issue 48.6: under ``ulimit -v`` 1 GiB the bench hung for ever (OpenBLAS's thread start-up, imported with
    transformers, retried its failed allocations) and wrote no record. It ends at once with an error record that
    says out of memory, never started a child."""
    import resource

    from pipeline.testing import build_tiny_llama

    model, out = build_tiny_llama(tmp_path / "tiny"), tmp_path / "r.json"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1024**3, 1024**3))

    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "bench", str(model), "--task", "text-generation",
         "--device", "cpu", "--out", str(out), "--timeout", "60"],
        preexec_fn=limit, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    record = parse_record(out.read_text())
    assert done.returncode == 0 and record["status"] == "error", done.stderr[-2000:]
    assert record["failure"]["code"] == "host_memory_short" and "out of memory" in record["failure"]["message"]
    assert "address-space limit" in record["failure"]["message"]
