"""The verdict of ``trncat check``, in order: the model's own Trainium2 result, else its base model's, else its
architecture's, else unknown. Pure: family rows and facts in, a :class:`Decision` out.

1. The model itself measured on Trainium2 (any revision, named): ``measured-pass`` / ``measured-fail``.
2. Its base models (through adapters, quantizations and merges, the nearest hop that has a result):
   ``likely-runs`` / ``likely-fails`` from theirs (most of them; a tie is a failure: they disagree).
3. The models of its architecture and model_type for the task, on the toolchain the family ran with last:
   ``likely-runs`` when most pass, ``likely-fails`` when most fail (a tie says nothing: unknown).
4. ``unknown``.

Only Trainium2 rows are evidence; a CPU, cuda or Trainium3 row is named in the reason, never counted (a model's own
Trainium3 results follow its Trainium2 ones, "kept apart"). A model trncat would
never run (remote code) is ``likely-fails``; one it cannot read (missing, gated) is ``unknown``, with the reason
discover gives. What the planner says cannot load on Neuron (a quantization it does not support) turns a
``likely-runs`` into ``likely-fails``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pipeline.models import Family
from pipeline.records import (
    MEASURED,
    TRAINIUM,
    FamilyStat,
    device_of,
    evidence,
    evidence_order,
    family_stat,
    rows_of,
    toolchain_label,
    trainium3_rows,
    trainium_rows,
)

Verdict = Literal["measured-pass", "measured-fail", "likely-runs", "likely-fails", "unknown"]
VERDICTS: tuple[str, ...] = get_args(Verdict)


@dataclass(frozen=True)
class Base:
    """A base model of the checked one: its id, how its child was made from it, and the path to it."""

    model_id: str
    relation: str
    path: tuple[str, ...]

    def text(self) -> str:
        via = " -> ".join(self.path[1:-1])
        return f"{self.model_id} ({self.relation}{', via ' + via if via else ''})"


@dataclass(frozen=True)
class Decision:
    """A verdict, the sentence that explains it, and the evidence (``{kind, model_id, status, cores, toolchain,
    failure_code}`` each). ``rows`` are the evidence's family rows (the first names the toolchain run.py uses; a
    lazy sequence when the family index counted the architecture: :mod:`pipeline.dataset.family_index`)."""

    verdict: Verdict
    reason: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    rows: Sequence[Mapping[str, Any]] = ()


def row_text(row: Mapping[str, Any]) -> str:
    """``passes on trn2.48xlarge over 2 cores at revision 0123456 (neuronx-cc 2.21.0, ...)``."""
    status = "passes" if row.get("status") == "pass" else f"fails ({row.get('failure_code') or 'no code'})"
    cores = row.get("cores")
    where = f" on {row.get('hardware')}" + (f" over {cores} core{'s' if cores != 1 else ''}" if cores else "")
    revision = str(row.get("revision") or "")[:7]
    return f"{status}{where} at revision {revision} ({toolchain_label(row)})"


def _elsewhere(rows: Sequence[Mapping[str, Any]], task: str) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("task") == task and device_of(r) != TRAINIUM and r.get("status") in MEASURED]


#: How a family is counted: (architecture, model_type, task) -> its :class:`~pipeline.records.FamilyStat`.
FamilyStats = Callable[[str, str | None, str], FamilyStat]


def decide(
    *,
    model_id: str,
    revision: str | None,
    task: str,
    rows: Sequence[Mapping[str, Any]],
    hops: Sequence[Sequence[Base]] = (),
    family: Family | None = None,
    missing: str | None = None,
    refusal: tuple[str, str] | None = None,
    blocker: str | None = None,
    stats: FamilyStats | None = None,
) -> Decision:
    """The verdict on ``model_id`` for ``task`` from the catalog's family ``rows``.

    Args:
        model_id: the checked model.
        revision: the revision checked (None when the Hub has no such model).
        task: the catalog task.
        rows: the dataset's family rows (:func:`pipeline.records.family_row`).
        hops: its base models, nearest first (one list per hop).
        family: its architecture and model_type (or its base's, for an adapter without a config).
        missing: why the Hub has no such model.
        refusal: ``(kind, reason)`` when trncat would not run it (remote code) or cannot read it (gated).
        blocker: what the planner says keeps its checkpoint off Neuron (an unsupported quantization).
        stats: counts a family (the family index does it over its columns:
            :meth:`pipeline.dataset.FamilyIndex.family_stat`); None: :func:`pipeline.records.family_stat` of
            ``rows``, which then hold the family's rows too.
    """
    own = rows_of(rows, model_id)
    measured = evidence_order(trainium_rows(own, task=task))
    if measured:
        verdict: Verdict = "measured-pass" if any(r["status"] == "pass" for r in measured) else "measured-fail"
        revisions = {str(r.get("revision")) for r in measured}
        note = ""
        if revision and revision not in revisions:
            note = f"; measured at another revision than the one checked ({revision[:7]})"
        reason = "measured on Trainium2: " + "; ".join(row_text(r) for r in measured) + note
        trn3 = evidence_order(trainium3_rows(own, task=task))  # set beside them, never counted as them
        reason += f"; on Trainium3 (kept apart): {'; '.join(row_text(r) for r in trn3)}" if trn3 else ""
        return Decision(verdict, reason, [evidence("model", r) for r in measured], tuple(measured))
    cpu_note = _cpu_note(model_id, _elsewhere(own, task))
    if missing:
        return Decision("unknown", missing + cpu_note)
    if refusal is not None:
        kind, why = refusal
        return Decision("likely-fails" if kind == "remote_code" else "unknown", f"{kind}: {why}{cpu_note}")
    seen: list[str] = []
    for hop in hops:
        found = [(base, evidence_order(trainium_rows(rows_of(rows, base.model_id), task=task))) for base in hop]
        found = [(base, base_rows) for base, base_rows in found if base_rows]
        seen.extend(base.model_id for base in hop)
        if not found:
            continue
        passing = [base for base, base_rows in found if base_rows[0]["status"] == "pass"]
        runs = len(passing) > len(found) - len(passing)
        parts = [f"{base.text()} {row_text(base_rows[0])}" for base, base_rows in found]
        reason = f"not measured itself; its base model{'s' if len(found) > 1 else ''} on Trainium2: " + "; ".join(parts)
        if len(found) > 1 and 0 < len(passing) < len(found):
            reason += f" ({len(passing)} of {len(found)} pass{': they disagree' if not runs else ''})"
        verdict = "likely-runs" if runs else "likely-fails"
        if runs and blocker:
            verdict, reason = "likely-fails", f"{reason}; but {blocker}"
        items = [evidence("base_model", r) for _, base_rows in found for r in base_rows]
        return Decision(verdict, reason, items, tuple(r for _, base_rows in found for r in base_rows))
    bases_text = f", its base model{'s' if len(seen) > 1 else ''} {', '.join(seen)}" if seen else ""
    for base_id in seen:  # a base measured elsewhere is named, never counted
        cpu_note += _cpu_note(base_id, _elsewhere(rows_of(rows, base_id), task))
    if family is None or family.architecture is None:
        why = f"no Trainium2 result for it{bases_text}, and its architecture is unknown"
        return Decision("unknown", why + cpu_note)
    name = f"{family.architecture} ({family.model_type})" if family.model_type else family.architecture
    if stats is None:
        stat = family_stat(rows, architecture=family.architecture, model_type=family.model_type, task=task)
    else:
        stat = stats(family.architecture, family.model_type, task)
    if stat.models:
        cores = f"; cores {stat.cores_min}-{stat.cores_max}" if stat.cores_min != stat.cores_max else (
            f"; {stat.cores_min} core{'s' if stat.cores_min != 1 else ''}" if stat.cores_min else "")  # fmt: skip
        summary = f"{stat.counts_text()} among {name} {task} models on Trainium2 with {stat.toolchain}{cores}"
        items = stat.evidence("architecture")
        if stat.passed == stat.failed:
            return Decision("unknown", f"no Trainium2 result for it{bases_text}; its architecture is evenly split: "
                                       f"{summary}", items, stat.rows)  # fmt: skip
        verdict = "likely-runs" if stat.passed > stat.failed else "likely-fails"
        reason = f"no Trainium2 result for it{bases_text}; {summary}"
        if verdict == "likely-runs" and blocker:
            verdict, reason = "likely-fails", f"{reason}; but {blocker}"
        return Decision(verdict, reason, items, stat.ordered)
    plural = "s" if stat.elsewhere != 1 else ""
    trainium3 = stat.trainium3 or any(device_of(r) == "trainium3" for r in rows)
    where = "CPU, cuda or Trainium3" if trainium3 else "CPU or cuda"
    elsewhere = (
        f" ({stat.elsewhere} model{plural} measured on {where} only: not Trainium2 evidence)" if stat.elsewhere else ""
    )
    reason = f"no Trainium2 result for it{bases_text}, or for any {name} {task} model{elsewhere}"
    return Decision("unknown", reason + cpu_note)


def _cpu_note(model_id: str, rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    devices = sorted({"Trainium3" if device_of(r) == "trainium3" else str(r.get("device")) for r in rows})
    return f" ({model_id} was measured on {' and '.join(devices)} only: not Trainium2 evidence)"
