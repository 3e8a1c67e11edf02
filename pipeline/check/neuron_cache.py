"""Another route to Trainium when trncat's answer is not "runs": optimum-neuron's precompiled configurations.

optimum-neuron publishes a compile cache on the Hub (``aws-neuron/optimum-neuron-cache``) with a registry of the
configurations it exported (``optimum/neuron/cache/hub_cache.py``; the "Neuron model cache lookup" section of
its cache guide): ``neuronxcc-<compiler>/0_REGISTRY/<optimum-neuron version>/<model_type>/<org>/<name>/<hash>.json``
(newer releases put ``inference/`` or ``training/`` before the model type). Each entry is the model's config with
its export parameters under ``neuron`` (``num_cores``, ``batch_size``, ``sequence_length``, ``auto_cast_type``,
or ``tp_degree`` and ``torch_dtype`` in newer ones), and ``optimum-cli neuron cache lookup <model_id>`` lists them.

One listing of the repo per check (the whole file list, as optimum-neuron's own lookup reads it), then one small
JSON download per matching entry, at most :data:`MAX_ENTRIES`.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline.errors import HubError, RepoNotFoundError
from pipeline.ids import model_id_problem

if TYPE_CHECKING:
    from pipeline.hub import Hub

logger = logging.getLogger(__name__)

#: optimum-neuron's public compile cache on the Hub.
CACHE_REPO = "aws-neuron/optimum-neuron-cache"
#: The command optimum-neuron documents to list a model's precompiled configurations.
LOOKUP_COMMAND = "optimum-cli neuron cache lookup"
REGISTRY = "0_REGISTRY"
MODES = ("inference", "training")
#: Entries read per check (each is one small JSON download).
MAX_ENTRIES = 12
#: What of the cache's own text (a folder name, a dtype) is kept for printing: it is untrusted, and a terminal
#: would act on an escape sequence in it.
_PLAIN = re.compile(r"[^A-Za-z0-9._+-]")


def _plain(text: str, limit: int = 40) -> str:
    return _PLAIN.sub("", text)[:limit]


@dataclass(frozen=True)
class CachedConfig:
    """One precompiled configuration: whose, with which compiler, and its export parameters (None: not said)."""

    model_id: str
    compiler: str
    cores: int | None
    batch_size: int | None
    sequence_length: int | None
    dtype: str | None

    def text(self) -> str:
        parts = [
            f"{self.cores} cores" if self.cores else None,
            f"batch {self.batch_size}" if self.batch_size else None,
            f"sequence {self.sequence_length}" if self.sequence_length else None,
            self.dtype,
        ]
        return ", ".join(p for p in parts if p) + f" (neuronx-cc {self.compiler})"


def registry_entry(path: str) -> tuple[str, str, str] | None:
    """``(compiler, model_type, model_id)`` of a registry entry's path, None for any other path of the repo.

    Only inference entries count (a training entry says nothing about running the model).
    """
    parts = path.split("/")
    inference = parts[3:4] == ["inference"]
    rest = parts[4:] if inference else parts[3:]
    if not (parts[0].startswith("neuronxcc-") and parts[1:2] == [REGISTRY] and parts[-1].endswith(".json")):
        return None
    if len(rest) != 4 or (not inference and rest[0] in MODES):  # a training entry, or no model type
        return None
    model_type, org, name, _ = rest
    model_id = f"{org}/{name}"
    if model_id_problem(model_id) is not None:
        return None
    return _plain(parts[0].removeprefix("neuronxcc-")), _plain(model_type), model_id


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def entry_config(data: Any, *, model_id: str, compiler: str) -> CachedConfig | None:
    """The export parameters of one registry entry (its ``neuron`` section), or None when it has none."""
    neuron = data.get("neuron") if isinstance(data, dict) else None
    if not isinstance(neuron, dict):
        return None
    dtype = neuron.get("auto_cast_type") or neuron.get("torch_dtype") or neuron.get("dtype")
    return CachedConfig(
        model_id=model_id,
        compiler=compiler,
        cores=_int(neuron.get("num_cores")) or _int(neuron.get("tp_degree")),
        batch_size=_int(neuron.get("batch_size")),
        sequence_length=_int(neuron.get("sequence_length")),
        dtype=(_plain(dtype, 32) or None) if isinstance(dtype, str) else None,
    )


def cached_configs(hub: Hub, model_ids: list[str], *, repo: str = CACHE_REPO) -> list[CachedConfig]:
    """The precompiled configurations ``repo`` registers for any of ``model_ids`` (the model, then its bases).

    A cache the Hub cannot list (missing, down) gives none: it is another route, never a reason to fail a check.
    """
    wanted = {m.casefold(): m for m in model_ids}
    try:
        paths = hub.list_files(repo, repo_type="model")
    except RepoNotFoundError:  # a Hub without optimum-neuron's cache (a local hub, a mirror): one quiet line
        logger.info("no %s on this Hub: no precompiled configurations to name", repo)
        return []
    except HubError as exc:
        logger.warning("cannot list %s (%s): no precompiled configurations to name", repo, exc)
        return []
    matches = []
    for path in sorted(paths, reverse=True):  # newest compiler first
        entry = registry_entry(path)
        if entry is not None and entry[2].casefold() in wanted:
            matches.append((path, entry))
    found: list[CachedConfig] = []
    for path, (compiler, _, model_id) in matches[:MAX_ENTRIES]:
        try:
            data = json.loads(hub.download(repo, path).read_text(encoding="utf-8"))
        except (HubError, OSError, ValueError) as exc:
            logger.warning("skipping %s of %s: %s", path, repo, exc)
            continue
        config = entry_config(data, model_id=wanted[model_id.casefold()], compiler=compiler)
        if config is not None and config not in found:
            found.append(config)
    return found


def routes_text(found: list[CachedConfig], *, repo: str = CACHE_REPO) -> str:
    """The sentence ``trncat check`` adds: what the cache holds and the command that lists it."""
    by_model: dict[str, list[CachedConfig]] = {}
    for config in found:
        by_model.setdefault(config.model_id, []).append(config)
    parts = [
        f"{model_id}: " + "; ".join(c.text() for c in configs) + f" (`{LOOKUP_COMMAND} {model_id}`)"
        for model_id, configs in by_model.items()
    ]
    return f"optimum-neuron's cache ({repo}) holds precompiled configurations of " + " and ".join(parts)
