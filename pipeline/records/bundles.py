"""A record's compiled-cache bundle (its ``compiled_cache``): where it lives on the Hub, and who may name one.

The bundle itself (what it may hold, its packing and unpacking) belongs to :mod:`pipeline.backends.neuron`; this
module says where publish puts it in the compiled-cache repo and what a record naming one must satisfy: only the
project's own (CI) passing neuron run has one, in the folder of its compiler, model, revision and workload.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pipeline.backends.neuron import BUNDLE_SUFFIX


def workload_key(record: dict[str, Any]) -> str:
    """The folder name of a run's workload: what decides the graphs it compiles (task, dtype, cores, the core
    config (LNC), the workload's fields; a serving run's engine, its options and its workload's name), readable in
    front and hashed behind (a NEFF of one shape serves no other)."""
    decided = {
        "task": record["task"],
        "dtype": record["dtype"],
        "cores": record["cores"],
        "core_config": record["hardware"]["core_config"],
        "workload": record["workload"],
    }
    serving = record.get("serving")
    if serving:  # a serving engine compiles per bucket of its options (max_num_seqs, max_model_len, parallelism)
        engine = serving.get("engine") or {}
        decided["serving"] = {"engine": engine.get("name"), "options": engine.get("options"),
                              "workload": (serving.get("workload") or {}).get("name")}  # fmt: skip
    digest = hashlib.sha256(json.dumps(decided, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{record['task']}-{record['dtype']}-{record['cores']}c-{digest[:16]}"


def bundle_folder(record: dict[str, Any]) -> str:
    """``neuronx-cc-<version>/<model_id>/<revision>/<workload key>``: where a record's bundle goes."""
    compiler = record["versions"].get("neuronx_cc")
    return f"neuronx-cc-{compiler}/{record['model_id']}/{record['revision']}/{workload_key(record)}"


def bundle_path(record: dict[str, Any], sha256: str) -> str:
    """The bundle's path in the compiled-cache repo: its folder, and a name from its digest (a changed bundle of
    the same run never replaces the file an older row names)."""
    return f"{bundle_folder(record)}/{sha256[:16]}{BUNDLE_SUFFIX}"


def compiled_cache_problems(record: dict[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with a (schema-valid) record's ``compiled_cache`` and ``compiled_cache_skipped``.

    A bundle is what the project's own CI compiled: a community or local record naming one is refused (its
    NEFFs would run on every user's device unreviewed); so is one on a run that did not pass on neuron, one whose
    path is not its own run's folder, and one that both names a bundle and says why it has none.
    """
    out: list[tuple[str, str]] = []
    cache, skipped = record.get("compiled_cache"), record.get("compiled_cache_skipped")
    if cache is None:
        return out
    source = record["run"]["source"]
    if source != "ci":
        out.append(("compiled_cache", f"a {source} record must not name a compiled-cache bundle: only CI makes them"))
    if record["device"] != "neuron" or record["status"] != "pass":
        out.append(("compiled_cache", "only a passing neuron run has a compiled-cache bundle"))
    folder = bundle_folder(record)
    if not cache["path"].startswith(folder + "/"):
        out.append(("compiled_cache.path", f"{cache['path']!r} is not in this run's folder {folder!r}"))
    if not cache["path"].endswith(f"/{cache['sha256'][:16]}{BUNDLE_SUFFIX}"):
        out.append(("compiled_cache.path", "the file name is not the first 16 hex digits of its sha256"))
    if skipped is not None:
        out.append(("compiled_cache_skipped", "a record that names a bundle cannot also say why it has none"))
    return out
