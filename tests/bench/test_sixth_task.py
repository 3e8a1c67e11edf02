"""A new task is one module plus one registry line: a sixth task from a fixture module (tests/bench/sixth_task.py),
registered by ``TRNCAT_TASK_MODULES`` alone, goes through a CPU bench, validation, the Parquet dataset and the
page's columns, with no other file naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_sixth_task_from_one_module_goes_through_bench_validation_dataset_and_page(tmp_path: Path) -> None:
    env = {**os.environ, "TRNCAT_TASK_MODULES": "tests.bench.sixth_task", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "tests.bench.sixth_task", str(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    record = seen["record"]
    assert record["task"] == "text-classification" and record["status"] == "pass", record["failure"]
    assert record["metrics"]["texts_per_s"] > 0 and record["metrics"]["num_labels"] == 3
    assert record["agreement"]["label_cosine"] is None  # the CPU float32 run is its own reference
    assert seen["problems"] == []  # the schema takes the task's own fields from its spec
    row = seen["row"]
    assert row["task"] == "text-classification" and row["texts_per_s"] == record["metrics"]["texts_per_s"]
    assert row["num_labels"] == 3 and "cost_usd_per_million_texts" in row  # its Parquet columns, the cost's too
    assert seen["table"] == ["tcps", "nl", "cost"]
    heads = " ".join(seen["page_heads"])
    assert all(label in heads for label in ("Texts/s", "Classes", "$ / 1M texts"))  # the page's columns
    speed = seen["speed_text"]  # the task's figures in the model's row, as the page writes a rate
    assert f'<td class="num">{speed}</td><td class="num">3</td>' in seen["page_row"], seen["page_row"]


def test_nothing_outside_the_fixture_names_the_sixth_task() -> None:
    named = subprocess.run(["git", "grep", "-l", "text-classification", "--", "pipeline", "schemas"], cwd=REPO,
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert named.stdout == ""
