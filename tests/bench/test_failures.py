"""Failure rules: every rule against real error text, the order of the table, and the message summary."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.bench.failures import HOST_OOM_HINT, RULES, Classification, classify
from pipeline.bench.messages import summarize_message
from pipeline.types import STAGES
from tests import FIXTURES as TEST_FIXTURES

FIXTURES = TEST_FIXTURES / "errors"


@dataclass(frozen=True)
class Fixture:
    name: str
    source: str
    rule: str
    kwargs: dict
    expect: tuple[str, str, str]


def _load(path: Path) -> Fixture:
    headers: dict[str, str] = {}
    lines = path.read_text().split("\n")
    body_start = 0
    for number, line in enumerate(lines):
        match = re.match(r"# (\w+): ?(.*)$", line)
        if not match:
            body_start = number
            break
        headers[match.group(1)] = match.group(2).strip()
    else:
        body_start = len(lines)
    kwargs: dict = {"message": "\n".join(lines[body_start:])}
    if "exc_type" in headers:
        kwargs["exc_type"] = headers["exc_type"]
    for key in ("signal", "exit_code"):
        if key in headers:
            kwargs[key] = int(headers[key])
    if "timed_out" in headers:
        kwargs["timed_out"] = headers["timed_out"] == "true"
    if "stage_hint" in headers:
        kwargs["stage_hint"] = headers["stage_hint"]
    status, stage, code = headers["expect"].split()
    return Fixture(path.stem, headers["source"], headers["rule"], kwargs, (status, stage, code))


ALL = sorted((_load(p) for p in FIXTURES.glob("*.txt")), key=lambda f: f.name)


def test_fixtures_exist():
    assert len(ALL) >= len(RULES)


@pytest.mark.parametrize("fixture", ALL, ids=[f.name for f in ALL])
def test_fixture_is_classified_by_its_rule(fixture: Fixture):
    result = classify(**fixture.kwargs)
    assert (result.status, result.stage, result.code) == fixture.expect
    assert result.rule == fixture.rule
    assert fixture.source, "every fixture names where its text comes from"


def test_every_rule_has_a_fixture():
    covered = {f.rule for f in ALL}
    missing = [rule.name for rule in RULES if rule.name not in covered]
    assert not missing, f"rules without a fixture: {missing}"


def test_every_fixture_names_an_existing_rule():
    names = {rule.name for rule in RULES}
    assert {f.rule for f in ALL} <= names


def test_rules_have_valid_stages_and_unique_names():
    assert len({r.name for r in RULES}) == len(RULES)
    assert all(r.stage in STAGES and r.status in {"fail", "error"} for r in RULES)


# --- ordering ------------------------------------------------------------------------------------


def _fixture(name: str) -> Fixture:
    return next(f for f in ALL if f.name == name)


def test_eoom_wins_over_the_generic_ncc_rule():
    text = "[NCC_EVRF013] TopK note\n[NCC_EOOM001] Maximum peak HBM usage of 32.00GB exceeds HBM limit of 24.00GB"
    assert classify(message=text).code == "compiler_oom"
    # The same log without the EOOM line is a plain compile error with its own code.
    assert classify(message=text.split("\n")[0]).code == "ncc_evrf013"


def test_cuda_oom_inside_a_runtime_error_is_oom():
    result = classify(exc_type="RuntimeError", message="CUDA out of memory. Tried to allocate 2.00 GiB")
    assert (result.stage, result.code) == ("oom", "device_oom")


def test_backend_compiler_failed_wrapping_a_known_cause_takes_the_cause():
    wrapped_oom = (
        "backend='neuron' raised:\nRuntimeError: [NCC_EOOM001] Maximum peak HBM usage of 30GB exceeds HBM limit"
    )
    assert classify(exc_type="BackendCompilerFailed", message=wrapped_oom).code == "compiler_oom"
    wrapped_op = (
        "backend='neuron' raised:\nNotImplementedError: Could not run 'aten::_linalg_eigh' with arguments "
        "from the 'PrivateUse1' backend."
    )
    assert classify(exc_type="BackendCompilerFailed", message=wrapped_op).code == "unsupported_op"
    plain = "backend='neuron' raised:\nTypeError: 'NoneType' object is not iterable"
    assert classify(exc_type="BackendCompilerFailed", message=plain).code == "backend_compiler_failed"


def test_network_cause_beats_the_tokenizer_symptom():
    text = _fixture("missing_tokenizer").kwargs["message"]
    assert classify(exc_type="OSError", message=text).code == "missing_tokenizer"
    chained = text + "\nrequests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443)"
    result = classify(exc_type="OSError", message=chained, stage_hint="load")
    assert (result.status, result.code) == ("error", "network_error")


def test_timeout_beats_everything_in_the_log():
    log = _fixture("compiler_oom_eoom001").kwargs["message"]
    assert classify(message=log, timed_out=True, signal=9).code == "timeout"


def test_sigkill_is_host_oom_only_with_a_memory_hint():
    assert classify(signal=signal.SIGKILL, message=HOST_OOM_HINT).code == "host_oom"
    assert classify(signal=signal.SIGKILL, message="").code == "killed_sigkill"  # from outside: an error
    # Without the signal, the hint alone proves nothing.
    assert classify(message=HOST_OOM_HINT).code == "unknown"


def test_torchs_host_allocator_out_of_memory_is_a_host_oom_not_an_exception():
    """Issue 29.17: it was filed as compile/exception_runtime_error, an incompatibility of the model's code."""
    text = "[enforce fail at alloc_cpu.cpp:73] . DefaultCPUAllocator: can't allocate memory: you tried to allocate 9"
    for hint in ("load", "compile", "run"):
        c = classify(exc_type="RuntimeError", message=text, stage_hint=hint)
        assert (c.status, c.stage, c.code) == ("fail", "oom", "host_oom")
    wrapped = f"torch._dynamo.exc.BackendCompilerFailed: backend='neuron' raised:\nRuntimeError: {text}"
    assert classify(exc_type="BackendCompilerFailed", message=wrapped, stage_hint="compile").code == "host_oom"


def test_a_child_killed_from_outside_is_an_error_never_a_published_crash():
    """Issue 29.17: SIGKILL or SIGTERM from another process was `fail crash/signal_*`, published as an
    incompatibility; it is an `error` (retried). A model's own crash stays a `fail`."""
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        c = classify(signal=sig, stage_hint="compile")
        assert (c.status, c.stage, c.code) == ("error", "compile", f"killed_{sig.name.lower()}")
        assert classify(exit_code=-int(sig)).status == "error"
    line = "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -15) local_rank: 0 (pid: 7)"
    assert classify(exit_code=1, message=line).code == "killed_sigterm"
    for sig in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS):
        assert classify(signal=sig, stage_hint="run").status == "fail"
    # the harness's own watchdog kill stays a host OOM
    assert classify(signal=signal.SIGKILL, message=f"{HOST_OOM_HINT}: killed").code == "host_oom"


def test_a_full_disk_while_downloading_is_disk_full_not_a_network_error():
    """Issue 29.17: a download that filled the disk was `load/network_error` (its text comes inside a HubError)."""
    message = "download failed: downloading org/m: OSError: [Errno 28] No space left on device"
    c = classify(exc_type="HubError", message=message, stage_hint="load")
    assert (c.status, c.code) == ("error", "disk_full")
    assert classify(exc_type="HubError", message="download failed: cannot reach the Hub").code == "network_error"


def test_negative_exit_code_is_read_as_a_signal():
    assert classify(exit_code=-11).code == "signal_sigsegv"
    assert classify(exit_code=-6).code == "signal_sigabrt"
    assert classify(exit_code=-7).code == "signal_sigbus"


def test_torchrun_worker_signal_is_read_from_its_log_line():
    line = "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -11) local_rank: 0 (pid: 7)"
    assert classify(exit_code=1, message=line).code == "signal_sigsegv"
    oom = line.replace("-11", "-9") + "\n" + HOST_OOM_HINT
    assert classify(exit_code=1, message=oom).code == "host_oom"
    assert classify(exit_code=1, message=line.replace("-11", "1")).code == "exit_1"


def test_exit_codes_and_exceptions():
    assert classify(exit_code=3).code == "exit_3"
    assert classify(exit_code=0).code == "unknown"
    assert classify(exc_type="RuntimeError", message="boom", stage_hint="run").code == "exception_runtime_error"
    assert classify(exc_type="OSError", message="x", stage_hint="load").code == "exception_os_error"
    assert classify(exc_type="my.pkg.HTTPServerGone", stage_hint="run").code == "exception_http_server_gone"
    # An exception with no stage and no known text: the rules do not guess.
    assert classify(exc_type="RuntimeError", message="boom").code == "unknown"


def test_infrastructure_errors_take_the_stage_hint_and_are_retryable():
    text = _fixture("device_busy_docs").kwargs["message"]
    assert classify(message=text, stage_hint="compile").stage == "compile"
    assert classify(message=text).stage == "load"
    assert classify(message=text).status == "error"
    assert classify(message="CUDA out of memory").status == "fail"


def test_sentencepiece_tokenizer_file_is_not_missing_weights():
    text = "org/model does not appear to have a file named tokenizer.model. Checkout 'https://huggingface.co/org/model'"
    assert classify(exc_type="OSError", message=text).code == "missing_tokenizer"


def test_unrecognized_config_for_autotokenizer_is_a_tokenizer_problem():
    text = "Unrecognized configuration class <class 'x.FooConfig'> to build an AutoTokenizer.\nModel type should be"
    assert classify(exc_type="ValueError", message=text).code == "missing_tokenizer"


def test_keyerror_is_an_unknown_model_type_only_while_loading():
    assert classify(exc_type="KeyError", message="'qwen9'", stage_hint="load").code == "unknown_architecture"
    assert classify(exc_type="KeyError", message="'qwen9'", stage_hint="run").code == "exception_key_error"


def test_bad_stage_hint_is_rejected():
    with pytest.raises(ValueError, match="stage_hint"):
        classify(message="x", stage_hint="warmup")


def test_classification_is_frozen():
    result = classify(message="CUDA out of memory")
    assert isinstance(result, Classification)
    with pytest.raises(AttributeError):
        result.code = "other"  # type: ignore[misc]


@settings(max_examples=200, deadline=None)
@given(
    message=st.text(max_size=400),
    exc=st.one_of(st.none(), st.sampled_from(["RuntimeError", "OSError", "ValueError", "KeyError", "MemoryError"])),
    sig=st.one_of(st.none(), st.sampled_from([6, 7, 9, 11, 15])),
    hint=st.one_of(st.none(), st.sampled_from(STAGES)),
    timed_out=st.booleans(),
)
def test_classify_always_gives_a_valid_verdict(message, exc, sig, hint, timed_out):
    result = classify(exc_type=exc, message=message, signal=sig, stage_hint=hint, timed_out=timed_out)
    assert result.status in {"fail", "error"}
    assert result.stage in STAGES
    assert re.fullmatch(r"[a-z0-9_]+", result.code)


# --- summary -------------------------------------------------------------------------------------


def _compiler_log(lines: int, error_at: int) -> str:
    out = []
    for i in range(lines):
        if i == error_at:
            out.append(
                "2025-02-24T00:04:00Z ERROR 5521 [neuronxcc.driver.CommandDriver]: [NCC_EOOM001] Maximum peak HBM "
                "usage of 32.00GB exceeds HBM limit of 24.00GB for Trn2."
            )
        else:
            out.append(
                f"2025-02-24T00:03:{i % 60:02d}Z INFO 5521 [sg0000/Tensorizer/Pass{i}]: Finished (changed=False) "
                f"/home/runner/work/cache/MODULE_{i:08d}"
            )
    out.append("RuntimeError: neuronx-cc failed with 70")
    return "\n".join(out)


def test_summary_keeps_the_error_line_of_a_300_line_log():
    log = _compiler_log(300, error_at=150)
    summary = summarize_message(log, limit=2000)
    assert len(summary) <= 2000
    assert "[NCC_EOOM001] Maximum peak HBM usage of 32.00GB" in summary
    assert summary.rstrip().endswith("RuntimeError: neuronx-cc failed with 70")
    assert "[...]" in summary
    assert "/home/runner" not in summary and "~/work/cache" in summary
    # The summary still classifies like the full log.
    assert classify(message=summary).code == "compiler_oom"


@pytest.mark.parametrize("limit", [40, 100, 500, 2000])
def test_summary_never_exceeds_the_limit(limit):
    assert len(summarize_message(_compiler_log(300, 10) + "x" * 5000, limit=limit)) <= limit


def test_summary_strips_ansi_and_home_paths_and_keeps_short_text():
    text = "\x1b[31mERROR\x1b[0m reading /home/alice/.cache/x and /root/.cache/y\r\n\n"
    assert summarize_message(text) == "ERROR reading ~/.cache/x and ~/.cache/y"
    assert summarize_message("") == ""


def test_summary_rejects_a_tiny_limit():
    with pytest.raises(ValueError):
        summarize_message("x", limit=10)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=3000), limit=st.integers(min_value=40, max_value=600))
def test_summary_length_property(text, limit):
    assert len(summarize_message(text, limit=limit)) <= limit


def test_import_does_not_pull_torch():
    code = (
        "import sys; import pipeline.bench.failures, pipeline.backends.neuron.tools,"
        " pipeline.backends.neuron.launch;"
        "bad = [m for m in ('torch', 'torch_neuronx', 'transformers') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
