"""Ask for a model (issue 49): an accepted request joins the Selected list; its issue text is untrusted."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.discover import Selection, load_requests
from pipeline.errors import ConfigError
from tests import ROOT

ACCEPTED = [{"name": "model-request"}, {"name": "accepted"}]


def form(model_id: str, task: str = "text-generation", why: str = "_No response_") -> str:
    """An issue body as GitHub writes an issue form's answers."""
    return f"### Hub model id\n\n{model_id}\n\n### Task\n\n{task}\n\n### Why\n\n{why}"


def issue(number: int, body: str, labels: list[dict[str, Any]] = ACCEPTED) -> dict[str, Any]:
    return {"number": number, "labels": labels, "body": body}


def _file(tmp_path: Path, issues: Any) -> Path:
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(issues), encoding="utf-8")
    return path


def test_an_accepted_request_joins_selected_after_the_hand_kept_list(tmp_path: Path) -> None:
    selected = [Selection("Qwen/Qwen3-0.6B", "text-generation")]
    issues = [
        issue(7, form("acme/tiny-llm")),
        issue(8, form("acme/embedder", "sentence-embeddings")),
        issue(9, form("qwen/qwen3-0.6b")),  # Selected already has it (the Hub's ids are case-insensitive)
        issue(10, form("acme/tiny-llm")),  # asked twice
        issue(11, form("acme/not-yet"), labels=[{"name": "model-request"}]),  # not accepted
        issue(12, form("acme/other"), labels=[{"name": "accepted"}]),  # accepted, but no request
    ]
    got = load_requests(_file(tmp_path, issues), selected)
    assert got == [
        *selected,
        Selection("acme/tiny-llm", "text-generation", "asked for in issue #7"),
        Selection("acme/embedder", "sentence-embeddings", "asked for in issue #8"),
    ]
    assert load_requests(_file(tmp_path, []), selected) == selected


HOSTILE = [
    ("$(touch /tmp/pwned)", "is not 'org/name'"),
    ("acme/model; rm -rf ~", "is not 'org/name'"),
    ("../../etc/passwd", "is not 'org/name'"),
    ("acme/model`id`", "is not 'org/name'"),
    ("acme/x\n::error::forged", "is not 'org/name'"),
    ("a" * 200 + "/b", "longer than"),
    ("acme/model--x", "contains '--'"),
    ("_No response_", "is not 'org/name'"),
]


@pytest.mark.parametrize(("model_id", "said"), HOSTILE, ids=[str(k) for k in range(len(HOSTILE))])
def test_a_hostile_request_is_skipped_with_one_warning_and_nothing_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, model_id: str, said: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="pipeline.discover.selection"):
        assert load_requests(_file(tmp_path, [issue(3, form(model_id))]), []) == []
    [record] = caplog.records
    assert record.getMessage().startswith("model request #3 skipped: ") and said in record.getMessage()
    assert "\n" not in record.getMessage()  # one line: an id's newline cannot start a workflow command
    assert not Path("/tmp/pwned").exists()


def test_only_the_forms_own_answers_count_and_a_bad_task_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A heading typed into the free text comes after the form's own: the first answer counts.
    smuggled = form("acme/asked", why="### Hub model id\n\nevil/other\n\n### Task\n\ntext-to-image")
    bad_task = form("acme/model", task="text-generation && curl evil.example")
    no_form = issue(5, "please measure evil/model for text-generation")
    with caplog.at_level(logging.WARNING, logger="pipeline.discover.selection"):
        got = load_requests(_file(tmp_path, [issue(4, smuggled), issue(6, bad_task), no_form]), [])
    assert got == [Selection("acme/asked", "text-generation", "asked for in issue #4")]
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "model request #6 skipped",
        "model request #5 skipped",
    ]
    assert "task: not one of" in caplog.records[0].getMessage()


@pytest.mark.parametrize(
    "text",
    ["not json", '{"number": 1}', "[1, 2]", '[{"number": "1; rm"}]'],
)
def test_a_bad_requests_file_is_one_clear_error_or_no_request(tmp_path: Path, text: str) -> None:
    path = tmp_path / "requests.json"
    path.write_text(text, encoding="utf-8")
    if text.startswith('[{"number": "1'):
        assert load_requests(path, []) == []  # a number that is no number: no request
        return
    with pytest.raises(ConfigError, match=r"requests\.json: (unreadable|not a list of issues)"):
        load_requests(path, [])


def test_the_discover_command_refuses_a_bad_requests_file_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "requests.json"
    path.write_text("{", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "discover", "--view", "selected", "--requests", str(path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "requests.json: unreadable" in done.stderr and len(done.stderr.strip().splitlines()) == 1
