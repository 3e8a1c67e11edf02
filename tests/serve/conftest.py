"""Shared pieces of the serving tests: a price table with one priced instance, a fake engine, a report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests import FIXTURES
from tests.serve.standins import report_doc

if TYPE_CHECKING:
    from guidellm.benchmark import GenerativeBenchmarksReport

#: The CPU test run's price: a made-up instance, dated and sourced as a real one must be.
PRICES_YAML = """instances:
  c7i.xlarge:
    host_memory_gib: 8
    price_per_hour:
      on_demand:
        usd: 0.357
        source: the serving tests' own figure
        as_of: 2026-11
        region: us-east-2
      capacity_block: null
      reserved: null
"""

#: A stand-in engine: answers /health on the port in argv[1] until killed (it also starts a child, as engines'
#: workers are, to show the whole group goes).
FAKE_ENGINE = r"""
import http.server, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def do_POST(self):  # the first completion readiness asks for
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"choices": [{"text": "hi"}]}')
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@pytest.fixture
def prices_file(tmp_path: Path) -> Path:
    path = tmp_path / "instances.yaml"
    path.write_text(PRICES_YAML, encoding="utf-8")
    return path


def fake_engine_argv(port: int) -> tuple[str, ...]:
    return (sys.executable, "-c", FAKE_ENGINE, str(port))


#: A report guidellm 0.8.1 wrote against its own mock server, one benchmark, cut down to the fields its report
#: model requires: the template of every report these tests give the sweep.
REPORT = FIXTURES / "guidellm-report.json"


def report_of(*points: tuple[int, int, int, float]) -> GenerativeBenchmarksReport:
    """A guidellm report: (concurrency, successful, errored, output tok/s) per benchmark, each 3 s long."""
    from guidellm.benchmark import GenerativeBenchmarksReport

    return GenerativeBenchmarksReport.model_validate(report_doc(list(points)))


def engines_left(record: dict[str, Any]) -> list[int]:
    """The processes still serving on the record's engine port (its command names it): none once a run is over."""
    import os
    import shlex

    from pipeline.backends import group_members

    command = shlex.split(record["serving"]["engine"]["command"])
    port = command[command.index("--port") + 1]
    left = []
    for pid in group_members(os.getpgid(0)) + [int(p.name) for p in Path("/proc").glob("[0-9]*")]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in cmdline and port.encode() in cmdline:
            left.append(pid)
    return left
