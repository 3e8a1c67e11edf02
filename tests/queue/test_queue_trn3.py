"""The queue keeps Trainium3 apart: a Trainium2 pass never keeps a model off the Trainium3 runners, nor the reverse."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.dataset import build
from pipeline.plan import plan_config
from pipeline.queue import build_queue
from tests import FIXTURES
from tests.queue.test_queue import REV, TOOLCHAIN, cand, record

TRN3 = {"name": "trn3.48xlarge", "instance_type": "trn3.48xlarge", "accelerator": "trainium3"}
CONFIG = json.loads((FIXTURES / "configs" / "qwen2.5-0.5b.json").read_text())


def _queue(root: Path, instance: str) -> dict[str, str]:
    queue = build_queue(candidates=[cand("on/trn2"), cand("on/trn3")], dataset_root=root, toolchain=TOOLCHAIN,
                        planner=lambda c: plan_config(CONFIG, instance=instance), instance=instance)  # fmt: skip
    out = {e["model_id"]: f"queued {e['runner']}" for e in queue.entries}
    return out | {s["model_id"]: s["reason"] for s in queue.skipped}


def test_each_generation_s_passes_keep_only_its_own_queue_from_re_measuring(tmp_path: Path) -> None:
    build([record("on/trn2"), record("on/trn3", hardware=TRN3)], tmp_path / "ds")
    trn2, trn3 = _queue(tmp_path / "ds", "trn2.48xlarge"), _queue(tmp_path / "ds", "trn3.48xlarge")
    assert trn2["on/trn2"].startswith("already passed") and trn2["on/trn3"] == "queued trn2-1c"
    assert trn3["on/trn3"].startswith("already passed") and trn3["on/trn2"] == "queued trn3-1c"
    assert REV  # the same revision, task, workload and toolchain: only the device generation differs
