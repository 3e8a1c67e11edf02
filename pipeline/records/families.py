"""A model's family in the catalog: the row that tells how each measured model fared, and per architecture how
that family fared on Trainium2.

One rule for two readers: ``trncat check`` answers a model the catalog has not measured from these, and the catalog
page shows the same per-architecture table (and the same lines in its search box). Only Trainium2 rows are evidence:
a CPU, cuda or Trainium3 row is counted apart (``elsewhere``), never as a Trainium2 result
(:func:`trainium3_rows` reads the Trainium3 ones, to set beside them). Every function here is pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.hardware import TRAINIUM3
from pipeline.records.rows import device_of, toolchain_label

#: The device whose rows are Trainium2 evidence.
TRAINIUM = "neuron"
#: The statuses that are measurements (``error`` is the infrastructure failing: no evidence either way).
MEASURED = ("pass", "fail")
#: (column, kind) of a family row: the key, what the run found, the model's family and the toolchain's versions.
FAMILY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("model_id", "string"),
    ("task", "string"),
    ("hardware", "string"),
    ("device", "string"),
    ("status", "string"),
    ("failure_code", "string"),
    ("cores", "int64"),
    ("revision", "string"),
    ("finished_at", "timestamp"),
    ("source", "string"),
    ("architecture", "string"),
    ("model_type", "string"),
    ("base_model", "strings"),
    *((f"{name}_version", "string") for name in ("neuronx_cc", "torch_neuronx", "transformers", "torch")),
    # The row's compiled-cache bundle and what it was compiled for: trncat check hands a fine-tune its base's bundle
    # (pipeline.check.warm) when the key matches.
    ("dtype", "string"),
    ("nki_version", "string"),
    *((f"compiled_cache_{name}", "string") for name in ("repo_id", "revision", "path", "sha256")),
    *((f"compiled_cache_{name}", "int64") for name in ("bytes", "files")),
)
_FAMILY_NAMES = tuple(name for name, _ in FAMILY_COLUMNS)
_KEPT_FROM_LATEST = ("model_id", "task", "hardware", "architecture", "model_type", "base_model")


def family_row(row: Mapping[str, Any], earlier: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """What one latest key says about its model: the latest row, or, when that run was an infrastructure error,
    the newest pass or fail among its earlier runs (an error tells nothing about the model).

    Args:
        row: a latest row (flat columns).
        earlier: the key's earlier runs (its ``history`` entries).

    Returns:
        The row's :data:`FAMILY_COLUMNS`; the key and the family always come from the latest row.
    """
    if row.get("status") in MEASURED:  # the common case: the latest row says it all (key, family and device alike)
        return dict(zip(_FAMILY_NAMES, map(row.get, _FAMILY_NAMES), strict=True))
    runs = sorted((e for e in earlier if e.get("status") in MEASURED), key=_finished, reverse=True)
    chosen: Mapping[str, Any] = runs[0] if runs else row
    out = {name: chosen.get(name) for name, _ in FAMILY_COLUMNS}
    out.update({name: row.get(name) for name in _KEPT_FROM_LATEST})
    out["device"] = chosen.get("device") or row.get("device")
    return out


def _finished(row: Mapping[str, Any]) -> Any:
    return row.get("finished_at") or ""


def trainium_rows(rows: Iterable[Mapping[str, Any]], *, task: str) -> list[Mapping[str, Any]]:
    """The rows of ``task`` measured on Trainium2 (pass or fail): the only ones that are evidence.

    An emulated row (trncat's Neuron emulator) never reaches a dataset (validate refuses its record); it is left out
    here too, so no path that reads rows from elsewhere could count one as Trainium2 evidence.
    """
    return [r for r in rows if _measured(r, device_of(r), TRAINIUM, task)]


def trainium3_rows(rows: Iterable[Mapping[str, Any]], *, task: str) -> list[Mapping[str, Any]]:
    """The rows of ``task`` measured on Trainium3 (pass or fail): never Trainium2 evidence, shown beside it."""
    return [r for r in rows if _measured(r, device_of(r), TRAINIUM3, task)]


def _measured(row: Mapping[str, Any], device: str | None, wanted: str, task: str) -> bool:
    """Whether ``row`` (counted under ``device``) is a pass or fail of ``task`` on ``wanted``, and not emulated."""
    return device == wanted and row.get("task") == task and row.get("status") in MEASURED and not row.get("emulated")


def rows_of(rows: Iterable[Mapping[str, Any]], model_id: str) -> list[Mapping[str, Any]]:
    """The rows of one model (Hub ids resolve case-insensitively, so the comparison does too)."""
    wanted = model_id.casefold()
    return [r for r in rows if str(r.get("model_id") or "").casefold() == wanted]


def evidence(kind: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """One evidence item of ``trncat check``: ``{kind, model_id, status, cores, toolchain, failure_code}``."""
    return {
        "kind": kind,
        "model_id": row.get("model_id"),
        "status": row.get("status"),
        "cores": row.get("cores"),
        "toolchain": toolchain_label(row),
        "failure_code": row.get("failure_code"),
    }


def _standing(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The row that stands for a model among its rows: a pass before a failure, then the newest."""
    return (row.get("status") == "pass", _finished(row))


def one_per_model(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One row per model (its pass on some hardware before a failure on another, then the newest), by model id."""
    best: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        key = str(row.get("model_id"))
        if key not in best or _standing(row) > _standing(best[key]):
            best[key] = row
    return [best[key] for key in sorted(best)]


@dataclass(frozen=True)
class FamilyStat:
    """How one architecture (and model_type) fared on Trainium2 for one task, on its newest toolchain.

    ``rows`` are the counted models, one row each (:func:`one_per_model`) on ``toolchain``, by model id; ``ordered``
    are the same rows as the evidence lists them (:func:`evidence_order`) and ``brief`` their ``(model_id, status,
    cores, failure_code)``, so the evidence is written without reading a whole row. ``elsewhere`` counts the
    family's models measured only on a CPU or a cuda device (never Trainium evidence); ``trainium3`` says whether
    any of the family's rows is a Trainium3 one. The rows may be a lazy sequence (the family index reads one row
    only when it is asked for: :mod:`pipeline.dataset.family_index`).
    """

    architecture: str
    model_type: str | None
    task: str
    toolchain: str | None
    passed: int
    failed: int
    cores_min: int | None
    cores_max: int | None
    failure_codes: tuple[tuple[str, int], ...]
    elsewhere: int
    rows: Sequence[Mapping[str, Any]]
    ordered: Sequence[Mapping[str, Any]] = ()
    brief: tuple[tuple[Any, Any, Any, Any], ...] = ()
    trainium3: bool = False

    @property
    def models(self) -> int:
        return self.passed + self.failed

    def counts_text(self) -> str:
        """``3 of 4 pass (1 fails: ncc_eoom001 x1)``."""
        text = f"{self.passed} of {self.models} pass"
        if self.failed:
            codes = ", ".join(f"{code} x{n}" for code, n in self.failure_codes)
            text += f" ({self.failed} fail{'s' if self.failed == 1 else ''}" + (f": {codes})" if codes else ")")
        return text

    def evidence(self, kind: str) -> list[dict[str, Any]]:
        """The evidence items of the counted models, in ``ordered``'s order: :func:`evidence` of each (every one
        ran on ``toolchain``)."""
        return [
            {"kind": kind, "model_id": model_id, "status": status, "cores": cores, "toolchain": self.toolchain,
             "failure_code": code}
            for model_id, status, cores, code in self.brief
        ]  # fmt: skip


def evidence_order(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows as the evidence lists them: passes first, then by finish time (the oldest first), else as they came."""
    return sorted(rows, key=lambda r: (r.get("status") != "pass", str(r.get("finished_at") or "")))


def family_stat(
    rows: Iterable[Mapping[str, Any]], *, architecture: str, model_type: str | None, task: str
) -> FamilyStat:
    """The :class:`FamilyStat` of one family among ``rows`` (family rows or latest rows of any model).

    The toolchain is the one the family's newest Trainium2 run used: counts over several compilers would mix
    what an old one failed on with what a new one fixed.
    """
    key = (architecture, model_type, task)
    return _stat([r for r in rows if _family_key(r) == key], key)


def _family_key(row: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return (row.get("architecture"), row.get("model_type"), row.get("task"))


def _stat(members: Sequence[Mapping[str, Any]], key: tuple[Any, Any, Any]) -> FamilyStat:
    architecture, model_type, task = key
    devices = [device_of(r) for r in members]  # once per row: Trainium2, elsewhere and Trainium3 all read it
    # The rows trainium_rows picks, in their order.
    trainium = [r for r, device in zip(members, devices, strict=True) if _measured(r, device, TRAINIUM, task)]
    labels = [toolchain_label(r) for r in trainium]
    finished = [_finished(r) for r in trainium]
    toolchain = labels[max(range(len(trainium)), key=finished.__getitem__)] if trainium else None
    counted = one_per_model(r for r, label in zip(trainium, labels, strict=True) if label == toolchain)
    on_trainium = {str(r.get("model_id")) for r in trainium}
    elsewhere = {
        str(r.get("model_id"))
        for r, device in zip(members, devices, strict=True)
        if device != TRAINIUM and r.get("status") in MEASURED and str(r.get("model_id")) not in on_trainium
    }
    failed = [r for r in counted if r.get("status") == "fail"]
    codes = Counter(str(r.get("failure_code")) for r in failed if r.get("failure_code"))
    cores = [int(r["cores"]) for r in counted if isinstance(r.get("cores"), int)]
    ordered = evidence_order(counted)
    return FamilyStat(
        architecture=str(architecture),
        model_type=model_type,
        task=str(task),
        toolchain=toolchain,
        passed=len(counted) - len(failed),
        failed=len(failed),
        cores_min=min(cores) if cores else None,
        cores_max=max(cores) if cores else None,
        failure_codes=tuple(sorted(codes.items(), key=lambda item: (-item[1], item[0]))),
        elsewhere=len(elsewhere),
        rows=tuple(counted),
        ordered=tuple(ordered),
        brief=tuple((r.get("model_id"), r.get("status"), r.get("cores"), r.get("failure_code")) for r in ordered),
        trainium3=TRAINIUM3 in devices,
    )


def family_stats(rows: Iterable[Mapping[str, Any]]) -> list[FamilyStat]:
    """Every family the rows hold (rows without an architecture belong to none), most measured first."""
    groups: dict[tuple[Any, Any, Any], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("architecture"):
            groups.setdefault(_family_key(row), []).append(row)
    return sorted((_stat(members, key) for key, members in groups.items()), key=family_order)


def family_order(stat: FamilyStat) -> tuple[Any, ...]:
    """The order families are listed in: most measured first (on Trainium2, then elsewhere), then by name."""
    return (-stat.models, -stat.elsewhere, stat.architecture, stat.model_type or "", stat.task)
