"""Core escalation with a fake harness: no device, no child process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.backends import Backend, get_backend
from pipeline.backends.neuron import NeuronBackend
from pipeline.bench.escalation import attempt_of, next_cores, run_with_escalation
from pipeline.bench.failures import classify
from pipeline.bench.spec import BenchSpec
from pipeline.errors import BenchError
from pipeline.records import validate_record
from tests.support.records import sample_failure, sample_record

MODEL_ID = "acme/big"
OOM = {"stage": "oom", "code": "device_oom", "message": "NRT_RESOURCE: out of device memory"}
COMPILER_OOM = {"stage": "oom", "code": "compiler_oom", "message": "NCC_EOOM001"}


class FakeHarness:
    """Answers each attempt from ``outcomes``: core count -> failure dict (or None for a pass)."""

    def __init__(self, outcomes: dict[int, dict[str, str] | None]) -> None:
        self.outcomes = outcomes
        self.calls: list[int] = []

    def __call__(self, spec: BenchSpec) -> dict[str, Any]:
        self.calls.append(spec.cores)
        minute = len(self.calls)
        run = {"started_at": f"2026-11-28T10:0{minute}:00+00:00", "finished_at": f"2026-11-28T10:0{minute}:30+00:00"}
        failure = self.outcomes[spec.cores]
        if failure is None:
            return sample_record(cores=spec.cores, run=run)
        return sample_failure(cores=spec.cores, run=run, **failure)


def _escalate(
    fake: FakeHarness, *, start: int = 1, max_cores: int | None = 8, backend: Backend | None = None
) -> dict[str, Any]:
    spec = BenchSpec(path=".", task="text-generation", device="neuron", dtype="bfloat16", cores=start)
    return run_with_escalation(
        spec, attempt=fake, backend=backend or NeuronBackend(), model_id=MODEL_ID, max_cores=max_cores
    )


def test_pass_first_time_has_no_attempts() -> None:
    fake = FakeHarness({1: None})
    record = _escalate(fake)
    assert fake.calls == [1] and record["cores"] == 1 and record["attempts"] == []


def test_oom_doubles_until_it_passes_and_keeps_the_failures() -> None:
    fake = FakeHarness({1: OOM, 2: COMPILER_OOM, 4: None, 8: None})
    record = _escalate(fake)
    assert fake.calls == [1, 2, 4]  # stops at the smallest passing count
    assert record["status"] == "pass" and record["cores"] == 4
    assert record["attempts"] == [
        {"cores": 1, "status": "fail", "stage": "oom", "code": "device_oom"},
        {"cores": 2, "status": "fail", "stage": "oom", "code": "compiler_oom"},
    ]
    assert record["run"]["started_at"] == "2026-11-28T10:01:00+00:00"  # the first attempt's start
    assert validate_record(record) == []


def test_starts_at_the_planners_count() -> None:
    fake = FakeHarness({4: OOM, 8: None})
    record = _escalate(fake, start=4, max_cores=16)
    assert fake.calls == [4, 8] and record["cores"] == 8 and len(record["attempts"]) == 1


def test_stops_at_the_instance_and_records_the_last_failure() -> None:
    fake = FakeHarness({1: OOM, 2: OOM, 4: OOM})
    record = _escalate(fake, max_cores=4)
    assert fake.calls == [1, 2, 4]
    assert record["status"] == "fail" and record["cores"] == 4 and record["failure"]["code"] == "device_oom"
    assert [a["cores"] for a in record["attempts"]] == [1, 2]
    assert validate_record(record) == []


@pytest.mark.parametrize(
    "failure",
    [
        {"stage": "oom", "code": "host_oom", "message": "host memory limit exceeded"},  # more ranks need more host
        {"stage": "compile", "code": "ncc_evrf013", "message": "NCC_EVRF013"},
        {"stage": "load", "code": "nrt_init", "message": "nrt_init failed", "status": "error"},
    ],
)
def test_other_failures_do_not_escalate(failure: dict[str, str]) -> None:
    fake = FakeHarness({1: failure})
    record = _escalate(fake)
    assert fake.calls == [1] and record["attempts"] == [] and record["failure"]["code"] == failure["code"]


def test_max_cores_from_the_backend_hardware() -> None:
    class TwoCores(NeuronBackend):
        def hardware(self, *, cores: int) -> dict[str, Any]:
            return {"cores_available": 2}

    fake = FakeHarness({1: OOM, 2: OOM})
    record = _escalate(fake, max_cores=None, backend=TwoCores(neuron_ls=lambda: None))
    assert fake.calls == [1, 2] and record["cores"] == 2


def test_attempt_of_a_pass() -> None:
    assert attempt_of(sample_record(cores=2)) == {"cores": 2, "status": "pass", "stage": None, "code": None}


def test_an_invalid_record_is_a_harness_error() -> None:
    def broken(spec: BenchSpec) -> dict[str, Any]:
        return sample_record(cores=spec.cores, status="fail")  # a fail without a failure

    with pytest.raises(BenchError, match="invalid record"):
        _escalate(broken)  # type: ignore[arg-type]


def test_bench_model_escalates_through_the_cli_path(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    from pipeline.bench.run import BenchOptions, bench_model
    from pipeline.workload import Workload

    record = bench_model(
        str(tiny_models["text-generation"]),
        task="text-generation",
        backend=get_backend("cpu"),
        out=tmp_path / "r.json",
        options=BenchOptions(
            workload=Workload(batch_size=1, input_tokens=8, output_tokens=4), iterations=1, warmup=0, escalate=True
        ),
    )
    assert record["status"] == "pass" and record["attempts"] == [] and record["cores"] == 1


def test_next_cores_doubles_only_on_device_or_compiler_oom():
    compiler_oom = classify(message="[NCC_EOOM001] Maximum peak HBM usage of 32.00GB exceeds HBM limit")
    device_oom = classify(message='nrt_tensor_allocate status=4 message="Allocation Failure"')
    host_oom = classify(exc_type="MemoryError")
    busy = classify(message="Logical Neuron Core(s) not available - Requested:lnc0-lnc0 Available:0")
    assert next_cores(1, compiler_oom.status, compiler_oom.code, 4) == 2
    assert next_cores(2, device_oom.status, device_oom.code, 4) == 4
    assert next_cores(4, device_oom.status, device_oom.code, 4) is None
    assert next_cores(1, host_oom.status, host_oom.code, 4) is None
    assert next_cores(1, busy.status, busy.code, 4) is None
    crash = classify(exit_code=-11)
    assert next_cores(1, crash.status, crash.code, 4) is None
    assert next_cores(1, "pass", None, 4) is None
