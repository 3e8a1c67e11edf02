"""A fine-tune starts warm from its base's compiled cache, when the two share the cache's key.

Under ``torch.compile`` the parameters are graph inputs, so a NEFF is keyed by their shapes and dtypes, not their
values (docs/neuron-facts.md, "parameters are graph inputs": an inference from the docs). When the evidence row
``trncat check`` found is a base model's Trainium2 pass that ships a bundle, and the checked model has that base's
architecture, config shapes, dtype, workload and cores (the toolchain is the row's: run.py's requirements pin it),
:func:`base_bundle` hands the base's bundle to the run.py it renders, and says so; else it says which part differs.
run.py checks again, against the key manifest inside the bundle and the model it loads, and compiles cold (saying
why) when they differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipeline.backends.neuron import config_shapes, read_config
from pipeline.check.model import ModelFacts, read_model
from pipeline.plan import resolve_workload

if TYPE_CHECKING:
    from pipeline.hub import Hub

#: The family row's columns that name a row's bundle, and the record's ``compiled_cache`` field each fills.
BUNDLE_COLUMNS = {
    f"compiled_cache_{name}": name for name in ("repo_id", "revision", "path", "sha256", "bytes", "files")
}


@dataclasses.dataclass(frozen=True)
class WarmBundle:
    """The base's bundle for the checked model's run.py (``compiled_cache`` None: not handed over) and the
    sentence that says why."""

    compiled_cache: dict[str, Any] | None
    base: str | None
    dtype: str | None
    note: str


def _offered(row: Mapping[str, Any] | None, model_id: str) -> dict[str, Any] | None:
    """The bundle of the evidence ``row`` (a family row), when it is another model's pass that ships one."""
    if row is None or row.get("model_id") == model_id or row.get("status") != "pass":
        return None
    cache = {field: row.get(column) for column, field in BUNDLE_COLUMNS.items()}
    return cache if all(value is not None for value in cache.values()) else None


def base_bundle(
    row: Mapping[str, Any] | None,
    *,
    model_id: str,
    task: str,
    cores: int,
    model_config: Mapping[str, Any],
    base_config: Mapping[str, Any] | None,
    workload: Mapping[str, Any],
    base_workload: Mapping[str, Any] | None,
) -> WarmBundle | None:
    """Whether the checked model ``model_id`` may start warm from the bundle of the evidence ``row`` (a family row).

    Returns None when there is nothing to say: no row, the model's own row, or a row without a bundle.
    """
    if row is None or (cache := _offered(row, model_id)) is None:
        return None
    base = str(row.get("model_id"))
    differ = []
    if base_config is None:
        differ.append("its config could not be read")
    else:
        mine, theirs = dict(model_config), dict(base_config)
        if mine.get("architectures") != theirs.get("architectures"):
            differ.append(f"architecture ({theirs.get('architectures')} -> {mine.get('architectures')})")
        shapes, base_shapes = config_shapes(mine), config_shapes(theirs)
        changed = [f"{f} {base_shapes.get(f)} -> {shapes.get(f)}" for f in sorted(set(shapes) | set(base_shapes))
                   if shapes.get(f) != base_shapes.get(f)]  # fmt: skip
        if changed:
            differ.append(f"config_shapes ({', '.join(changed)})")
    if base_workload is not None and dict(workload) != dict(base_workload):
        differ.append("workload")
    if row.get("cores") != cores:
        differ.append(f"cores ({row.get('cores')} -> {cores})")
    if row.get("task") != task:
        differ.append(f"task ({row.get('task')} -> {task})")
    if differ:
        return WarmBundle(None, base, None, f"{base}'s compiled cache is not handed over: {'; '.join(differ)} differ")
    return WarmBundle(
        cache,
        base,
        row.get("dtype"),
        f"run.py starts warm from {base}'s compiled cache (the same architecture, config shapes, workload and cores; "
        "run.py checks the key again against the model it loads, and compiles when it differs)",
    )


def _config(facts: ModelFacts | None, task: str) -> dict[str, Any] | None:
    """A model's config that sizes its compiled graph (None when its small files hold none)."""
    return (read_config(facts.folder, task) or None) if facts is not None and facts.folder is not None else None


def warm_start(
    hub: Hub, row: Mapping[str, Any] | None, *, planned: ModelFacts | None, cores: int | None, task: str
) -> WarmBundle | None:
    """:func:`base_bundle` for the model ``planned`` (the one run.py runs) and the evidence ``row``, reading the
    base's small files at the row's revision (only when the row ships a bundle: a few requests)."""
    if planned is None or cores is None or row is None or _offered(row, planned.model_id) is None:
        return None
    base = read_model(hub, str(row["model_id"]), revision=row.get("revision"))
    workload = resolve_workload(task, folder=planned.folder, model_id=planned.model_id).to_dict()
    base_workload = (
        resolve_workload(task, folder=base.folder, model_id=base.model_id).to_dict() if base.folder else None
    )
    mine = _config(planned, task) or {}
    return base_bundle(row, model_id=planned.model_id, task=task, cores=cores, model_config=mine,
                       base_config=_config(base, task), workload=workload, base_workload=base_workload)  # fmt: skip
