"""``trncat check``: does a model run on Trainium2? The catalog's answer for a model it may not have measured.

The model's listing and small files (:mod:`pipeline.check.model`), its base models a few hops up, the dataset's
family rows (:mod:`pipeline.check.catalog`), the planner, then the rules (:mod:`pipeline.check.rules`). When the
answer is not "runs", optimum-neuron's cache is asked for precompiled configurations
(:mod:`pipeline.check.neuron_cache`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.check.answer import Answer
from pipeline.check.catalog import Catalog, from_folder, from_repo
from pipeline.check.model import ModelFacts, infer_task, read_model
from pipeline.check.neuron_cache import CACHE_REPO, cached_configs, routes_text
from pipeline.check.rules import Base, Decision, decide
from pipeline.check.warm import WarmBundle, warm_start
from pipeline.dataset import read_matrix
from pipeline.errors import ConfigError, PipelineError
from pipeline.hardware import DEFAULT_INSTANCE, get_instance
from pipeline.hub import together
from pipeline.ids import is_revision, validate_model_id
from pipeline.models import MAX_FILE_BYTES, Family, read_small_json, transformer_config_path
from pipeline.plan import Plan, plan_config, plan_model, resolve_workload
from pipeline.records import trainium_rows
from pipeline.render import run_script
from pipeline.taskspec import check_task, task_source

if TYPE_CHECKING:
    from pipeline.hub import Hub

logger = logging.getLogger(__name__)

#: How far up the model tree a check follows base models (a quantization of an adapter of a fine-tune, ...).
MAX_HOPS = 3
#: Base models followed per hop (a merge can name a dozen).
MAX_BASES_PER_HOP = 8
#: The task of a model whose listing (and whose bases') names none.
DEFAULT_TASK = "text-generation"
#: The verdicts after which no other route is looked for.
RUNS = ("measured-pass", "likely-runs")
#: A branch or tag name a revision may be given as (the Hub resolves it; the answer names the commit).
REF_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")


def check_model(
    model_id: str,
    *,
    hub: Hub,
    revision: str | None = None,
    task: str | None = None,
    dataset_repo: str | None = None,
    dataset_dir: Path | None = None,
    instance: str = DEFAULT_INSTANCE,
    cache_repo: str | None = CACHE_REPO,
) -> Answer:
    """The catalog's answer on ``model_id``.

    Args:
        model_id: a Hub model id (untrusted: validated).
        hub: the Hub client (the model's files, its bases, the dataset, optimum-neuron's cache).
        revision: the model's revision (default: main's head).
        task: the catalog task; None infers it from the model's library and pipeline tag (or its base's).
        dataset_repo: the Hub dataset whose merged main is read.
        dataset_dir: a local dataset folder instead.
        instance: the instance the planner sizes for.
        cache_repo: optimum-neuron's cache repo to look for precompiled configurations in; None: none.

    Returns:
        The :class:`~pipeline.check.answer.Answer`.

    Raises:
        ConfigError: a bad id, revision, task or instance, or no dataset named.
        HubError: the Hub failed (a missing model is an answer, not an error).
        DatasetError: the dataset holds an unreadable file.
    """
    if (dataset_repo is None) == (dataset_dir is None):
        raise ConfigError("name exactly one dataset: a Hub dataset repo or a local dataset folder")
    if task is not None:
        check_task(task)
    get_instance(instance)  # an unknown instance is the caller's error, not a plan that could not be made
    if revision is not None and (not (is_revision(revision) or REF_NAME.fullmatch(revision)) or ".." in revision):
        raise ConfigError(f"a revision is a 40-hex commit sha or a branch or tag name, got {revision[:80]!r}")
    validate_model_id(model_id)  # before any request

    def dataset() -> Catalog:
        return from_folder(dataset_dir) if dataset_dir is not None else from_repo(hub, str(dataset_repo))

    # The model's requests and the dataset's do not wait for each other: sent together, they overlap.
    facts, catalog = together.results(functools.partial(read_model, hub, model_id, revision=revision), dataset)
    hops, known = _lineage(hub, facts, catalog, task)
    planned = facts if facts.runnable else _planned_base(hub, hops, known)
    # An adapter's listing often names no task: its base's does.
    bases = [b for b in (planned, *known.values()) if b is not None]
    task = task or infer_task(facts.listing) or next((t for b in bases if (t := infer_task(b.listing))), DEFAULT_TASK)
    plan, plan_note = _plan(planned, task=task, instance=instance) if planned else (None, _no_plan_note(facts))
    family = facts.family if facts.family.architecture else _base_family(hops, known, planned)
    wanted = [model_id, *(b.model_id for hop in hops for b in hop)]
    decision = decide(
        model_id=model_id,
        revision=facts.revision,
        task=task,
        # Only the rows the rules read (its own, its bases'), never the whole index; its family is counted over
        # the index's columns, only when the rules come to it.
        rows=catalog.index.select(model_ids=wanted),
        hops=hops,
        family=family,
        missing=facts.missing,
        refusal=facts.refusal,
        blocker=_blocker(plan),
        stats=catalog.index.family_stat,
    )
    reason, routes = decision.reason, []
    if decision.verdict not in RUNS and cache_repo and not facts.missing:
        routes = cached_configs(hub, wanted, repo=cache_repo)
        if routes:
            reason = f"{reason}; {routes_text(routes, repo=cache_repo)}"
    warm = None
    if facts.refusal is None and not facts.missing and decision.verdict in RUNS:  # a base's bundle (check.warm)
        warm = warm_start(hub, decision.rows[0] if decision.rows else None, planned=planned,
                          cores=plan.cores if plan else None, task=task)  # fmt: skip
        reason = f"{reason}; {warm.note}" if warm is not None else reason
    run_py = (
        _run_py(decision, planned, plan, task=task, warm=warm) if facts.refusal is None and not facts.missing else None
    )
    return Answer(
        model_id=model_id,
        revision=facts.revision,
        task=task,
        verdict=decision.verdict,
        reason=reason,
        evidence=decision.evidence,
        plan=plan.to_dict() if plan else None,
        run_py=run_py,
        planned=planned.model_id if planned else None,
        plan_note=plan_note,
        routes=routes,
        catalog=catalog.source,
        missing=facts.missing,
        matrix=_matrix(catalog, model_id, task),
    )


def _matrix(catalog: Catalog, model_id: str, task: str) -> list[dict[str, Any]]:
    """The stage matrix's rows of the model and task, as JSON values (the same rows the page shows)."""
    rows = read_matrix(catalog.matrix_root, model_id=model_id) if catalog.matrix_root else []
    return [{k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in r.items()} for r in rows
            if r["task"] == task]  # fmt: skip


def _measured(catalog: Catalog, model_id: str, task: str | None) -> bool:
    own = catalog.index.select(model_ids=[model_id])
    tasks = {task} if task else {str(r.get("task")) for r in own}
    return any(trainium_rows(own, task=t) for t in tasks)


def _lineage(
    hub: Hub, facts: ModelFacts, catalog: Catalog, task: str | None
) -> tuple[list[list[Base]], dict[str, ModelFacts]]:
    """The model's base models, nearest first, up to :data:`MAX_HOPS` hops: a hop's bases are read (one
    ``model_info`` each, no files) only when none of the hop before has a Trainium2 result."""
    seen = {facts.model_id.casefold()}
    known: dict[str, ModelFacts] = {}
    frontier = [Base(b, facts.relation, (facts.model_id, b)) for b in facts.bases]
    hops: list[list[Base]] = []
    while frontier and len(hops) < MAX_HOPS:
        hop = [
            b for b in dict((b.model_id.casefold(), b) for b in frontier).values() if b.model_id.casefold() not in seen
        ]
        hop = hop[:MAX_BASES_PER_HOP]
        if not hop:
            break
        seen.update(b.model_id.casefold() for b in hop)
        hops.append(hop)
        if any(_measured(catalog, b.model_id, task) for b in hop):
            break
        frontier = []
        # A hop's listings are sent together (a merge names several bases).
        listings = together.results(*(functools.partial(read_model, hub, b.model_id, files=False) for b in hop))
        for base, base_facts in zip(hop, listings, strict=True):
            known[base.model_id] = base_facts
            frontier.extend(Base(b, base_facts.relation, (*base.path, b)) for b in base_facts.bases)
    return hops, known


def _planned_base(hub: Hub, hops: list[list[Base]], known: dict[str, ModelFacts]) -> ModelFacts | None:
    """The nearest base that can be planned (an adapter or a GGUF quantization has no config.json of its own)."""
    for hop in hops:
        for base in hop:
            facts = read_model(hub, base.model_id)
            known[base.model_id] = facts
            if facts.runnable and facts.refusal is None:
                return facts
    return None


def _base_family(hops: list[list[Base]], known: dict[str, ModelFacts], planned: ModelFacts | None) -> Family | None:
    """The family of the planned base, else of the nearest base whose family is known."""
    nearest = [planned, *(known.get(base.model_id) for hop in hops for base in hop)]
    return next((facts.family for facts in nearest if facts is not None and facts.family.architecture), None)


def _no_plan_note(facts: ModelFacts) -> str:
    if facts.missing or facts.refusal:
        return "nothing to plan"
    if facts.oversized:
        return f"{', '.join(facts.oversized[:3])} over the {MAX_FILE_BYTES} bytes a small file may be: not downloaded"
    return "neither it nor a base model within reach has a config.json or model_index.json to plan from"


def _plan(facts: ModelFacts, *, task: str, instance: str) -> tuple[Plan | None, str | None]:
    """The planner's answer from the fetched small files, or why there is none."""
    assert facts.folder is not None and facts.listing is not None
    try:
        if task_source(task).library == "diffusers":
            plan = plan_model(
                facts.folder, instance=instance, workload=resolve_workload(task, folder=facts.folder), task=task
            )
        else:
            inner = "config.json"
            if task == "sentence-embeddings":
                modules = read_small_json(facts.folder / "modules.json")
                inner = transformer_config_path(modules) or "config.json"
            config = read_small_json(facts.folder / inner)
            if not isinstance(config, dict):
                return None, f"{facts.model_id} has no readable {inner}"
            plan = plan_config(
                config, task=task, instance=instance, safetensors_params=facts.listing.params, isolated=True
            )
    except PipelineError as exc:
        return None, str(exc)
    return dataclasses.replace(plan, model=facts.model_id, revision=facts.revision), None


def _blocker(plan: Plan | None) -> str | None:
    quantization = plan.quantization if plan else None
    if quantization and quantization.get("support") == "unsupported":
        method, why = quantization.get("method"), quantization.get("reason")
        return f"the planner says its {method} checkpoint cannot load on Neuron: {why}"
    return None


def _run_py(
    decision: Decision, planned: ModelFacts | None, plan: Plan | None, *, task: str, warm: WarmBundle | None
) -> str | None:
    """The run.py to try, from the catalog's templates, on Trainium (``neuron``): the planned model on the plan's
    cores, with the toolchain of the first evidence row; with ``warm`` that hands a bundle over, its base model's
    bundle (and the dtype the base's run had)."""
    if planned is None or plan is None:
        return None
    row = decision.rows[0] if decision.rows else {}
    record: dict[str, Any] = {
        "model_id": planned.model_id,
        "revision": planned.revision,
        "task": task,
        "dtype": "bfloat16",
        "cores": plan.cores,
        "threads": None,
        "workload": resolve_workload(task, folder=planned.folder, model_id=planned.model_id).to_dict(),
        "device": "neuron",
        "status": "pass",
        "versions": {
            key: row.get(f"{key}_version") for key in ("torch_neuronx", "neuronx_cc", "torch", "transformers", "nki")
        },
        "compiled_cache": None,
        "compiled_cache_of": None,
    }
    if warm is not None and warm.compiled_cache:
        record.update(compiled_cache=warm.compiled_cache, compiled_cache_of=warm.base, dtype=warm.dtype or "bfloat16")
    return run_script(record, checked=True)
