"""The verdict's rules on family rows alone: order, ties, toolchains, CPU rows and what the planner forbids."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pipeline.check import Base, decide
from pipeline.models import Family

TG = "text-generation"
LLAMA = Family("LlamaForCausalLM", "llama")


def _row(model_id: str, status: str = "pass", *, device: str = "neuron", cc: str = "2.21.0", day: int = 1,
         code: str | None = None, task: str = TG, **family: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "model_id": model_id, "task": task, "hardware": "trn2.48xlarge" if device == "neuron" else "cpu-x86_64",
        "device": device, "status": status, "failure_code": code if status == "fail" else None, "cores": 2,
        "revision": "a" * 40, "finished_at": dt.datetime(2026, 11, day, tzinfo=dt.UTC), "source": "ci",
        "architecture": family.get("architecture", "LlamaForCausalLM"), "model_type": family.get("model_type", "llama"),
        "base_model": None, "neuronx_cc_version": cc if device == "neuron" else None,
        "torch_neuronx_version": "2.14.0" if device == "neuron" else None, "transformers_version": "5.0.0",
        "torch_version": "2.14.0",
    }  # fmt: skip


def _hop(*ids: str, relation: str = "finetune") -> list[Base]:
    return [Base(i, relation, ("me/model", i)) for i in ids]


def test_the_model_s_own_failure_wins_over_a_passing_base() -> None:
    rows = [_row("me/model", "fail", code="ncc_eoom001"), _row("org/base")]
    d = decide(model_id="me/model", revision="a" * 40, task=TG, rows=rows, hops=[_hop("org/base")], family=LLAMA)
    assert d.verdict == "measured-fail" and "fails (ncc_eoom001)" in d.reason
    assert [e["kind"] for e in d.evidence] == ["model"] and "another revision" not in d.reason


def test_cpu_rows_of_the_model_or_its_base_are_never_trainium_evidence() -> None:
    rows = [_row("me/model", device="cpu"), _row("org/base", device="cpu")]
    d = decide(model_id="me/model", revision=None, task=TG, rows=rows, hops=[_hop("org/base")], family=LLAMA)
    assert d.verdict == "unknown" and d.evidence == []
    assert "me/model was measured on cpu only" in d.reason and "org/base was measured on cpu only" in d.reason
    assert "(2 models measured on CPU or cuda only: not Trainium2 evidence)" in d.reason


def test_an_emulated_row_is_never_trainium_evidence() -> None:
    """Emulated rows never reach a dataset (validate refuses them); if one were read, check would not count it."""
    rows = [_row("me/model") | {"emulated": True}, _row("org/base") | {"emulated": True}]
    d = decide(model_id="me/model", revision=None, task=TG, rows=rows, hops=[_hop("org/base")], family=LLAMA)
    assert d.verdict == "unknown" and d.evidence == []
    assert decide(model_id="me/model", revision=None, task=TG, rows=[_row("me/model")], hops=[],
                  family=LLAMA).verdict == "measured-pass"  # fmt: skip


def test_the_nearest_hop_with_a_result_decides_and_disagreeing_bases_are_a_failure() -> None:
    rows = [_row("org/a"), _row("org/b", "fail", code="x"), _row("org/far", "pass")]
    hops = [_hop("org/a", "org/b", relation="merge"), _hop("org/far")]
    d = decide(model_id="me/model", revision=None, task=TG, rows=rows, hops=hops, family=LLAMA)
    assert d.verdict == "likely-fails" and "they disagree" in d.reason
    assert {e["model_id"] for e in d.evidence} == {"org/a", "org/b"}  # the far base is not reached
    d = decide(model_id="me/model", revision=None, task=TG, rows=rows[2:], hops=hops, family=LLAMA)
    assert d.verdict == "likely-runs" and d.evidence[0]["model_id"] == "org/far"


def test_the_architecture_counts_on_the_family_s_newest_toolchain_only() -> None:
    old = [_row(f"o/old{i}", "fail", cc="2.20.0", code="old_bug") for i in range(5)]
    new = [_row("o/n1", cc="2.21.0", day=3), _row("o/n2", cc="2.21.0", day=3), _row("o/n3", "fail", cc="2.21.0",
                                                                                     day=3, code="ncc_x")]  # fmt: skip
    d = decide(model_id="me/model", revision=None, task=TG, rows=old + new, family=LLAMA)
    assert d.verdict == "likely-runs" and "2 of 3 pass (1 fails: ncc_x x1)" in d.reason and "old_bug" not in d.reason
    assert "neuronx-cc 2.21.0" in d.reason and len(d.evidence) == 3


def test_an_evenly_split_architecture_says_nothing() -> None:
    rows = [_row("o/a"), _row("o/b", "fail", code="c")]
    assert decide(model_id="me/m", revision=None, task=TG, rows=rows, family=LLAMA).verdict == "unknown"


def test_other_tasks_and_model_types_are_other_families() -> None:
    rows = [_row("o/a", task="image-text-to-text"), _row("o/b", model_type="llama4")]
    d = decide(model_id="me/m", revision=None, task=TG, rows=rows, family=LLAMA)
    assert d.verdict == "unknown" and d.evidence == []


def test_what_the_planner_says_cannot_load_turns_runs_into_fails() -> None:
    rows = [_row("org/base")]
    blocker = "the planner says its bitsandbytes checkpoint cannot load on Neuron: needs CUDA kernels"
    hops = [_hop("org/base", relation="quantized")]
    d = decide(model_id="me/m-bnb-4bit", revision=None, task=TG, rows=rows, hops=hops, family=LLAMA, blocker=blocker)
    assert d.verdict == "likely-fails" and d.reason.endswith(blocker) and "(quantized)" in d.reason


def test_unknown_architecture_and_no_evidence_say_what_was_looked_at() -> None:
    d = decide(model_id="me/m", revision=None, task=TG, rows=[], hops=[_hop("org/base")], family=Family())
    assert d.verdict == "unknown" and "its base model org/base" in d.reason and "architecture is unknown" in d.reason


def _trn3(row: dict[str, Any]) -> dict[str, Any]:
    return row | {"hardware": "trn3.48xlarge"}


def test_a_trainium3_row_is_never_trainium2_evidence_and_is_named_apart() -> None:
    rows = [_trn3(_row("me/model")), _trn3(_row("org/base")), _trn3(_row("org/other"))]
    d = decide(model_id="me/model", revision=None, task=TG, rows=rows, hops=[_hop("org/base")], family=LLAMA)
    assert d.verdict == "unknown" and d.evidence == []
    assert "me/model was measured on Trainium3 only: not Trainium2 evidence" in d.reason
    assert "org/base was measured on Trainium3 only" in d.reason
    assert "measured on CPU, cuda or Trainium3 only: not Trainium2 evidence" in d.reason


def test_a_model_measured_on_both_is_judged_on_trainium2_with_trainium3_beside_it() -> None:
    rows = [_row("me/model", "fail", code="ncc_eoom001"), _trn3(_row("me/model", day=2)) | {"cores": 1}]
    d = decide(model_id="me/model", revision="a" * 40, task=TG, rows=rows, family=LLAMA)
    assert d.verdict == "measured-fail"  # the Trainium3 pass does not turn a Trainium2 failure into a pass
    trn2, trn3 = d.reason.split("; on Trainium3 (kept apart): ")
    assert "fails (ncc_eoom001) on trn2.48xlarge over 2 cores" in trn2
    assert trn3.startswith("passes on trn3.48xlarge over 1 core ")
    assert [r["hardware"] for r in d.rows] == ["trn2.48xlarge"]
