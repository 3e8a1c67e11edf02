"""The graded answer check end to end (issue 31): the tiny Llama benchmarked in bfloat16 on the CPU through the whole
harness, its answer perturbed on purpose in the benchmark child, graded against the CPU float32 reference with the
CPU bfloat16 noise run beside it. A diverging answer is a fail at stage accuracy naming the step."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.backends import get_backend
from pipeline.bench.run import BenchOptions, bench_model
from pipeline.bench.tasks.perturb import SWAP_STEP
from pipeline.records import flatten, parse_record, unflatten, validate_record
from pipeline.workload import Workload

WORKLOAD = Workload(batch_size=1, input_tokens=16, output_tokens=8)


def _bench(tiny_models: dict[str, Path], tmp_path: Path, fault: str | None) -> dict:
    out = tmp_path / f"{fault or 'clean'}.json"
    record = bench_model(
        str(tiny_models["text-generation"]),
        task="text-generation",
        backend=get_backend("cpu"),
        out=out,
        options=BenchOptions(dtype="bfloat16", workload=WORKLOAD, iterations=1, warmup=0, fault=fault),
    )
    assert parse_record(out.read_text()) == record and validate_record(record) == []
    assert unflatten(flatten(record))["agreement"] == record["agreement"]  # the flat columns keep every figure
    return record


def test_a_clean_bfloat16_run_passes_graded(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = _bench(tiny_models, tmp_path, None)
    assert record["status"] == "pass", record["failure"]
    a = record["agreement"]
    assert a["grade"] in ("exact", "within tolerance", "bfloat16 noise") and "failed_step" not in a
    assert a["steps"] == 8 and a["teacher_forced"] is True and a["noise_reference"] == "cpu-bfloat16"
    assert [g["k"] for g in a["topk"]] == ["5", "50", "1000", "all"] and a["sigma_ratio"] is not None


@pytest.mark.parametrize(
    ("fault", "step"), [("perturb-swap", SWAP_STEP), ("perturb-weight", 0), ("perturb-drift", None)]
)
def test_a_wrong_answer_diverges_at_its_step(
    fault: str, step: int | None, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    """A swapped top token at step 5 fails at step 5; a lost weight (the first layer's MLP output, zero) at step 0;
    a drift whose first step agrees (the first-step cosine rule of old passes it) at a later step."""
    record = _bench(tiny_models, tmp_path, fault)
    a, failure = record["agreement"], record["failure"]
    assert (record["status"], failure["stage"], failure["code"], a["grade"]) == (
        "fail", "accuracy", "wrong_answer", "diverges",
    )  # fmt: skip
    assert a["failed_step"] == step if step is not None else a["failed_step"] > 0
    assert f"at step {a['failed_step']}" in failure["message"] and "σ-ratio" in failure["message"]
    assert a["teacher_forced"] is True  # a lost weight parts the tokens: its answer was captured again, forced
    if fault == "perturb-drift":
        assert a["logits_cosine"] >= a["threshold"]  # what the first-step rule passed
    assert record["metrics"]["latency_s"] is not None  # it ran: its speed stays beside the verdict
