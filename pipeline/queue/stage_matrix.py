"""The stage matrix's rows (issue 49): every discovered model x task x device class, each stage and feature with its
state, the record that decided it, and what vLLM Neuron's docs promise (``runners/vllm-neuron-docs.yaml``).

The rules, in the order they apply: a stage is ``passing`` or ``failing`` only from a real-hardware record of that
device class (a latest row, a serving record, a warm check); a stage run only on the Neuron emulator is
``emulated``, one run only on the CPU ``cpu``, whatever their outcome; nothing ran: ``untested``. The ``plan`` stage
is ``predicted`` from the config files alone (the planner), ``failing`` where the planner says the model cannot fit.
A feature is decided by the serving records that exercised it (``serving.features``: the flag-only ones,
:mod:`pipeline.serve.features`) by the same rules: its probe's verdict, else the run's (the engine did not serve
with the flag on); its detail says the flags and what the probe saw. LoRA (an adapter), EAGLE3 (a draft model) and
the quantized checkpoints (FP8, MXFP4, MXFP8: a checkpoint of their own) need more than a flag: no run exercises
them, and their rows carry what the docs say beside ``untested``. A plan is made once per
model, task and device class and kept from the previous matrix after that, so a publish plans only new candidates.
The refresh is incremental (:func:`refresh_matrix`): a model whose latest shard a publish does not mirror keeps
its rows, but what the docs say is set again on every row from the docs' tables of the day.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from pipeline.constants import REPO_ROOT
from pipeline.dataset import (
    EXCLUSIONS_FILE,
    LATEST_DIR,
    MATRIX_FILE,
    SERVING_FILE,
    WARM_CHECKS_FILE,
    model_shard,
    read_exclusions,
    read_latest_columns,
    read_matrix,
    read_rankings,
    read_serving,
    read_summary,
    read_warm_checks,
    write_matrix,
)
from pipeline.errors import ConfigError, PipelineError
from pipeline.hardware import TRAINIUM3, row_device
from pipeline.plan import Plan
from pipeline.records import parse_time, record_id
from pipeline.types import MATRIX_FEATURES as FEATURES
from pipeline.types import MATRIX_STAGES as STAGES

SUPPORT_FILE = REPO_ROOT / "runners" / "vllm-neuron-docs.yaml"
#: The instance each Trainium device class is planned for.
PLAN_INSTANCES = {"trn2": "trn2.48xlarge", "trn3": "trn3.48xlarge"}
#: (model_id, task, instance) -> the plan. Raises PipelineError when it cannot plan.
MatrixPlanner = Callable[[str, str, str], Plan]
_CLASS = {"neuron": "trn2", TRAINIUM3: "trn3", "cuda": "gpu"}
#: Failure stages at or before the compile: the compile stage did not get through.
_BEFORE_RUN = ("load", "compile", "oom", "timeout", "crash")
_LATEST = ["model_id", "task", "revision", "device", "hardware", "accelerator", "emulated", "status", "failure_stage",
           "failure_code", "record_id", "source", "finished_at", "architecture", "agreement_grade"]  # fmt: skip
_ARCH = re.compile(r"\(([A-Za-z0-9_]+)\)$")


def load_support(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The documented architectures (architecture -> ``source``, ``as_of``, ``trn2`` and ``trn3`` tables).

    Raises:
        ConfigError: the file is unreadable or not the documented tables.
    """
    path = path or SUPPORT_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        table = data["architectures"]
        for entry in table.values():
            for name in ("trn2", "trn3"):
                if set(entry[name]) != {"model", *FEATURES} or not str(entry["source"]).startswith("https://"):
                    raise ValueError(f"{name}: not the documented table")
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable documented support: {exc}") from None
    return dict(table)


def _documented(support: Mapping[str, Any], arch: str | None, device_class: str, item: str) -> dict[str, Any]:
    if device_class == "gpu" or arch is None:
        return {"documented": None, "documented_source": None, "documented_as_of": None}
    entry = support.get(arch)
    if entry is None:
        return {"documented": "not_listed", "documented_source": None, "documented_as_of": None}
    value = entry[device_class]["model" if item in STAGES else item]
    return {"documented": value, "documented_source": entry["source"], "documented_as_of": str(entry["as_of"])}


def _with_documented(row: dict[str, Any], support: Mapping[str, Any], arch: str | None) -> dict[str, Any]:
    """``row`` with its documented columns and ``documented_but_fails`` set: a pure function of its architecture,
    device class and item and the docs' tables, so every refresh sets them again (kept rows too)."""
    row.update(_documented(support, arch, row["device_class"], row["item"]))
    # a measurement that failed: a plan that does not fit is a prediction, never "documented but fails"
    failed = row["state"] == "failing" and row["item"] != "plan"
    row["documented_but_fails"] = row["documented"] == "supported" and failed
    return row


def _plan_row(plan: Plan) -> dict[str, Any]:
    tp = f"tp={plan.tp_degree}" + (f", ep={plan.ep_degree}" if plan.ep_degree else "") if plan.tp_degree else None
    detail = f"{plan.cores} NeuronCores, {tp or 'no tp'}, {plan.instance}" if plan.fits else plan.advice
    return {"state": "predicted" if plan.fits else "failing", "revision": plan.revision, "params": plan.params,
            "neuron_cores": plan.cores, "instance": plan.instance, "parallelism": tp,
            "detail": f"{detail} ({plan.architecture})" if plan.architecture else detail}  # fmt: skip


def _evidence(row: Mapping[str, Any], device_class: str | None, items: dict[str, str | None]) -> list[tuple]:
    """(device classes, item, rank, state, detail, row) for each stage a run decided; ``items``: item -> failure
    code, or None for a pass. A real run of a class ranks 3, an emulated one 2, a CPU one 1 (on every class)."""
    if row.get("emulated"):
        rank, states = 2, ("emulated", "emulated")
    elif device_class is None:
        rank, states = 1, ("cpu", "cpu")
    else:
        rank, states = 3, ("passing", "failing")
    classes = (device_class,) if device_class else ("trn2", "trn3", "gpu")
    return [(classes, item, rank, states[code is not None], code, row) for item, code in items.items()]


def _row_items(row: Mapping[str, Any]) -> dict[str, str | None]:
    status, stage, code = row["status"], row.get("failure_stage"), row.get("failure_code") or "fail"
    if status not in ("pass", "fail"):  # an infrastructure error says nothing about the model
        return {}
    if status == "fail" and stage in _BEFORE_RUN:
        return {"compile": code}
    items: dict[str, str | None] = {"compile": None}
    if status == "fail" and stage == "accuracy":
        items["answer_check"] = code
    elif status == "pass" and row.get("agreement_grade"):
        items["answer_check"] = "diverges" if row["agreement_grade"] == "diverges" else None
    return items


def matrix_rows(
    *,
    models: Iterable[tuple[str, str]],
    latest: Iterable[Mapping[str, Any]],
    serving: Iterable[Mapping[str, Any]] = (),
    warm: Iterable[Mapping[str, Any]] = (),
    previous: Iterable[Mapping[str, Any]] = (),
    planner: MatrixPlanner | None = None,
    support: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """The matrix rows of ``models`` ((model id, task) pairs: discovery's candidates) and of every measured model."""
    keys: dict[tuple[str, str], str] = {(m.lower(), t): m for m, t in models}
    found: list[tuple] = []
    arch: dict[str, str] = {}
    for row in latest:
        keys.setdefault((row["model_id"].lower(), row["task"]), row["model_id"])
        if row.get("architecture"):
            arch[row["model_id"].lower()] = row["architecture"]
        cls = _CLASS.get(row_device(row["device"], hardware=row["hardware"], accelerator=row["accelerator"]) or "")
        found += _evidence(row, cls, _row_items(row))
    for record in serving:
        hardware, status = record["hardware"], record["status"]
        cls = _CLASS.get(
            row_device(record["device"], hardware=hardware["name"], accelerator=hardware.get("accelerator")) or ""
        )
        flat = {"model_id": record["model_id"], "task": record["task"], "emulated": hardware.get("emulated"),
                "record_id": record_id(dict(record)), "source": record["run"]["source"], "revision": record["revision"],
                "finished_at": parse_time(record["run"]["finished_at"])}  # fmt: skip
        code = (record.get("failure") or {}).get("code") or "fail"
        if status in ("pass", "fail"):
            found += _evidence(flat, cls, {"serve": None if status == "pass" else code})
        for feature in (record.get("serving") or {}).get("features") or []:  # its probe's verdict, else the run's
            passed = status == "pass" if feature["passed"] is None else feature["passed"]
            if feature["passed"] is not None or status in ("pass", "fail"):
                said = f"{' '.join(feature['flags'])}: " + (
                    feature["detail"] if feature["passed"] is not None else code
                )
                evidence = _evidence(flat, cls, {feature["name"]: None if passed else "fail"})
                found += [(*cell[:4], said[:300], cell[5]) for cell in evidence]
    tasks: dict[str, list[str]] = {}
    for model, task in keys:
        tasks.setdefault(model, []).append(task)
    for check in warm:  # warm checks run on Trainium2 machines (benchmark.yml's warm jobs), per bundle, not per task
        if check["status"] in ("verified", "missed", "refused"):
            row = {"model_id": check["model_id"], "emulated": check["emulated"], "record_id": None, "source": "ci",
                   "revision": check["revision"], "finished_at": parse_time(check["checked_at"])}  # fmt: skip
            for task in tasks.get(check["model_id"].lower(), []):
                found += _evidence(
                    {**row, "task": task},
                    "trn2",
                    {"warm_start": None if check["status"] == "verified" else check["status"]},
                )
    cells: dict[tuple[str, str, str, str], tuple] = {}
    gpu_models = set()
    for classes, item, rank, state, code, row in found:
        for cls in classes:
            at = (row["model_id"].lower(), row["task"], cls, item)
            old = cells.get(at)
            if old is None or (rank, row["finished_at"]) > (old[0], old[3]["finished_at"]):
                cells[at] = (rank, state, code, row)
            if cls == "gpu" and rank == 3:
                gpu_models.add((row["model_id"].lower(), row["task"]))
    plans = {(str(r["model_id"]).lower(), r["task"], r["device_class"]): r for r in previous if r["item"] == "plan"}
    out: list[dict[str, Any]] = []
    for (model, task), model_id in sorted(keys.items()):
        for cls in ("trn2", "trn3", *(("gpu",) if (model, task) in gpu_models else ())):
            base = {"model_id": model_id, "task": task, "device_class": cls}
            plan = _plan(model_id, task, cls, plans.get((model, task, cls)), planner)
            name = arch.get(model) or (_ARCH.search(plan.get("detail") or "") or [None, None])[1]
            if name and not _ARCH.search(plan.get("detail") or ""):  # the plan row names it: a kept row's source
                plan = {**plan, "detail": f"{plan.get('detail') or 'not planned'} ({name})"}
            for kind, items in (("stage", STAGES), ("feature", FEATURES)):
                for item in items:
                    row = {**base, "kind": kind, "item": item, "state": "untested"}
                    if item == "plan":
                        row.update(plan)
                    elif (cell := cells.get((model, task, cls, item))) is not None:
                        _, state, code, record = cell
                        row.update(state=state, detail=code, record_id=record.get("record_id"))
                        row.update(source=record.get("source"), decided_at=record["finished_at"])
                        row["revision"] = record.get("revision")
                    out.append(_with_documented(row, support, name))
    return out


def _plan(
    model_id: str, task: str, cls: str, previous: Mapping[str, Any] | None, planner: MatrixPlanner | None
) -> dict[str, Any]:
    """The plan row's own fields: kept from the previous matrix, else planned now (untested when it cannot be)."""
    names = ("state", "revision", "params", "neuron_cores", "instance", "parallelism", "detail")
    if previous is not None and previous["state"] != "untested":
        return {name: previous[name] for name in names}
    if cls == "gpu":
        return {"detail": "the planner sizes Trainium instances only"}
    if planner is None:
        return {}
    try:
        return _plan_row(planner(model_id, task, PLAN_INSTANCES[cls]))
    except PipelineError as exc:
        return {"detail": f"not planned: {str(exc).splitlines()[0][:200]}"}


def matrix_inputs() -> list[str]:
    """The dataset files a publish mirrors for the matrix, beside its records' latest shards and the overlay."""
    return [MATRIX_FILE, SERVING_FILE, WARM_CHECKS_FILE, EXCLUSIONS_FILE]


def refresh_matrix(folder: Path, *, planner: MatrixPlanner | None, support: Path | None = None) -> str:
    """Rewrite the dataset folder's ``data/matrix.parquet``; returns a line for the PR.

    Incremental: a publish mirrors only its records' latest shards, so the rows of a model whose shard is not in the
    folder are kept from the previous matrix as they are; the others (the mirrored shards' models, whose rows are all
    there, and new candidates) are recomputed. A folder holding the whole latest view recomputes every model.
    """
    previous = read_matrix(folder)
    # a model discovery keeps out (remote code, gated, hand-kept) is listed with its reason, never planned here
    out = {(str(e["model_id"]).lower(), e["task"]) for e in read_exclusions(folder)}
    summary, held = read_summary(folder), {p.stem for p in (folder / LATEST_DIR).glob("*.parquet")}
    latest = read_latest_columns(folder, _LATEST)
    measured = {r["model_id"].lower() for r in latest}
    known = {str(r["model_id"]).lower() for r in previous}

    @functools.cache
    def here(model_id: str) -> bool:  # its latest rows (if any) are all in the folder, or it has none to keep
        lower = model_id.lower()
        if summary is None or lower in measured or lower not in known:
            return True
        shard = model_shard(model_id, summary["shards"])
        return shard in held or shard not in summary["shards"]  # mirrored, or no file: no latest row anywhere

    def excluded(row: Mapping[str, Any]) -> bool:  # the model itself, or the model for this task
        return bool({(row["model_id"].lower(), row["task"]), (row["model_id"].lower(), None)} & out)

    kept, table = [r for r in previous if not here(r["model_id"]) and not excluded(r)], load_support(support)
    # what the docs say is set again on the kept rows too (the docs' tables may have changed since): from the
    # architecture their plan row names (none named: a row from before it did keeps what it says)
    archs = {r["model_id"]: m[1] for r in kept if r["item"] == "plan" and (m := _ARCH.search(r["detail"] or ""))}
    for row in kept:
        if row["model_id"] in archs:
            _with_documented(row, table, archs[row["model_id"]])
    models = [(r["model_id"], r["task"]) for r in (*read_rankings(folder), *previous)
              if here(r["model_id"]) and not excluded(r)]  # fmt: skip
    serving = [r for r in read_serving(folder) if here(r["model_id"])]
    warm = [r for r in read_warm_checks(folder) if here(r["model_id"])]
    rows = kept + matrix_rows(models=models, latest=latest, serving=serving, warm=warm, previous=previous,
                              planner=planner, support=table)  # fmt: skip
    write_matrix(folder, rows)
    failing = sorted({r["model_id"] for r in rows if r["documented_but_fails"]})
    said = f"stage matrix: {len({(r['model_id'], r['task']) for r in rows})} model(s) and task(s)"
    return said + (f"; documented but fails: {', '.join(failing)}" if failing else "")
