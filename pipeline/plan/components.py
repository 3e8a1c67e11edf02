"""The components of a diffusers pipeline and their parameters, from config files alone.

A pipeline folder (or Hub repo) has ``model_index.json`` naming each component ``name: [library, class]``, and
each weight-bearing component's config in ``<name>/config.json``: diffusers configs for the denoiser (``unet``,
``transformer``) and the VAE, transformers configs for the text encoders. Tokenizers, schedulers and feature
extractors hold no weights. Each weight-bearing component is built on PyTorch's meta device with the class
model_index.json names (diffusers' ``from_config``, or a transformers class's ``_from_config`` of its own config
class: what ``DiffusionPipeline.from_pretrained`` loads), so counts are exact and cost no memory. Only classes of
diffusers, transformers or diffusers' own pipeline modules are ever resolved, after
:func:`pipeline.models.check_model_index` accepted the index; nothing of a repo is imported.

A class the installed libraries lack (or cannot build) is counted from its folder's safetensors headers instead.
Results are cached per (library, class, config hash), as :mod:`pipeline.plan.params` caches transformers models.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pipeline.errors import ConfigError, PlanError, PlanLimitError, RemoteCodeRefused, RepoNotFoundError
from pipeline.ids import validate_model_id
from pipeline.models import check_model_index, safetensors_param_count
from pipeline.plan.limits import check_config, limited
from pipeline.plan.params import config_hash, no_torch_init, plan_matcher, quiet

if TYPE_CHECKING:
    from pipeline.hub import Hub

logger = logging.getLogger(__name__)

Role = Literal["denoiser", "text_encoder", "vae", "other"]
_CACHE_SIZE = 1024
#: The shard part of a weights file name: ``model-00001-of-00002.safetensors``, ``model.fp16-00001-of-00002...``.
_SHARD = re.compile(r"-\d+-of-\d+$")


@dataclass(frozen=True)
class ComponentShape:
    """One component of a pipeline as the planner sees it.

    Args:
        name: the key in model_index.json (``unet``, ``text_encoder_2``).
        library: where model_index.json says its class comes from (``diffusers``, ``transformers``,
            ``stable_diffusion``: a diffusers pipeline module).
        class_name: the class model_index.json names.
        role: what it does in the pipeline (from its name).
        params: its parameters, or None when it could not be built (then ``reason`` says why).
        tp_sharded_params: parameters under the class's diffusers tensor-parallel plan (``_tp_plan``).
        has_tp_plan: whether the class has such a plan (diffusers 0.42: Flux, Flux 2, QwenImage).
        reason: why it could not be built.
    """

    name: str
    library: str
    class_name: str
    role: Role
    params: int | None
    tp_sharded_params: int = 0
    has_tp_plan: bool = False
    reason: str | None = None


#: (library, class, config hash) -> (params, tp-sharded params, has a tp plan, reason it could not be built).
_cache: dict[tuple[str, str, str], tuple[int | None, int, bool, str | None]] = {}


def role_of(name: str) -> Role:
    """The role of a component from its model_index.json key (diffusers' own naming)."""
    if name.startswith(("unet", "transformer", "prior")):
        return "denoiser"
    if name.startswith("text_encoder"):
        return "text_encoder"
    if name.startswith("vae"):
        return "vae"
    return "other"


def index_entries(index: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(name, library, class)`` of every component model_index.json names (absent ``[null, null]`` ones left out)."""
    return [
        (name, value[0], value[1])
        for name, value in index.items()
        if not name.startswith("_")
        and isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, str) for v in value)
    ]


def resolve_class(library: str, class_name: str) -> type | None:
    """The class diffusers would load for ``[library, class_name]``, or None when the installed libraries lack it.

    Resolved as attributes of diffusers, transformers or ``diffusers.pipelines.<library>`` only (the names were
    checked as plain identifiers by the pipeline gate); never an import of another module.
    """
    module: Any
    if library in ("diffusers", "transformers"):
        module = importlib.import_module(library)
    else:
        module = getattr(importlib.import_module("diffusers.pipelines"), library, None)
    found = getattr(module, class_name, None)
    return found if isinstance(found, type) else None


def holds_weights(library: str, class_name: str) -> bool | None:
    """Whether the component is a torch module (None: the installed libraries lack the class)."""
    import torch

    with quiet():  # transformers warns on importing some processor classes (a missing optional backend)
        cls = resolve_class(library, class_name)
    return None if cls is None else issubclass(cls, torch.nn.Module)


def describe_component(name: str, library: str, class_name: str, config: Mapping[str, Any]) -> ComponentShape:
    """Count one component's parameters on the meta device from its config.json.

    Args:
        name: its key in model_index.json.
        library: its library in model_index.json.
        class_name: its class in model_index.json.
        config: its parsed ``<name>/config.json``.

    Returns:
        The :class:`ComponentShape`; ``params`` is None (and ``reason`` set) when the class is missing from the
        installed libraries or could not be built from the config.

    Raises:
        PlanError: the config is not a JSON object.
    """
    if not isinstance(config, Mapping):
        raise PlanError(f"{name}/config.json must be a JSON object, got {type(config).__name__}")
    check_config(config)
    key = (library, class_name, config_hash(config))
    counts = _cache.get(key)
    if counts is None:
        counts = _count(library, class_name, dict(config))
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[key] = counts
    # Cached per class and config: the name (text_encoder or text_encoder_2) is the caller's.
    return ComponentShape(name, library, class_name, role_of(name), *counts)


def _count(library: str, class_name: str, config: dict[str, Any]) -> tuple[int | None, int, bool, str | None]:
    cls = resolve_class(library, class_name)
    if cls is None:
        import diffusers
        import transformers

        versions = f"diffusers {diffusers.__version__} and transformers {transformers.__version__}"
        return None, 0, False, f"{versions} have no {library} class {class_name}"
    plan = getattr(cls, "_tp_plan", None) if library == "diffusers" else None
    in_plan = plan_matcher(plan, skip_replicated=False) if isinstance(plan, Mapping) else None
    try:
        # The build in a child under a time and memory limit (pipeline.plan.limits): past them, PlanLimitError.
        total, sharded = limited(_build_and_count, cls, config, in_plan, what=class_name)
    except PlanLimitError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to build means "count from the weights instead"
        logger.warning("cannot build %s on the meta device: %s", class_name, exc)
        why = str(exc) if isinstance(exc, PlanError) else f"{type(exc).__name__}: {exc}"
        return None, 0, False, f"could not build {class_name}: {why}"
    return total, sharded, in_plan is not None, None


def _build_and_count(cls: type, config: dict[str, Any], in_plan: Callable[[str], bool] | None) -> tuple[int, int]:
    """The child's side: build on the meta device, then (total, tensor-parallel sharded) parameters."""
    model = _build(cls, config)
    total = sharded = 0
    # named_parameters() yields a shared tensor once: tied weights count once.
    for param_name, param in model.named_parameters():
        total += param.numel()
        sharded += param.numel() if in_plan is not None and in_plan(param_name) else 0
    return total, sharded


def _build(cls: type, config: dict[str, Any]) -> Any:
    """Instantiate ``cls`` from ``config`` on the meta device (shapes only: no storage, no initialisation)."""
    import torch
    from diffusers import ModelMixin
    from transformers import PreTrainedModel

    with torch.device("meta"), no_torch_init(), quiet("diffusers"):
        if issubclass(cls, ModelMixin):
            return cls.from_config(config)
        if issubclass(cls, PreTrainedModel) and cls.config_class is not None:
            return cls._from_config(cls.config_class.from_dict(config))
    raise TypeError(f"{cls.__name__} is neither a diffusers nor a transformers model class")


def weight_files(names: list[str]) -> list[str]:
    """The safetensors files of one variant among a component folder's file names (each parameter once).

    A diffusers repo often holds a component's weights several times (``diffusion_pytorch_model.safetensors``
    beside ``.fp16.`` and ``.non_ema.`` variants); the files without a variant are taken, else those of the first
    variant by name.
    """
    variants: dict[str, list[str]] = {}
    for file in names:
        base = file.rsplit("/", 1)[-1]
        if base.endswith(".safetensors"):
            _, _, variant = _SHARD.sub("", base.removesuffix(".safetensors")).partition(".")
            variants.setdefault(variant, []).append(file)
    if not variants:
        return []
    return sorted(variants.get("") or variants[min(variants)])


def read_pipeline(files: PipelineFiles, model: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, int]]:
    """model_index.json, the config.json of every weight-bearing component, and the safetensors counts of those
    the installed libraries cannot build (their headers only: no weights are downloaded).

    Raises:
        PlanError: no model_index.json (not a diffusers pipeline), or one naming code outside diffusers and
            transformers (:func:`pipeline.models.check_model_index`), or an unreadable config.
        HubError: (or a child) the Hub could not answer.
    """
    try:
        index = files.json("model_index.json")
        check_model_index(index)
    except (RemoteCodeRefused, RepoNotFoundError) as exc:
        raise PlanError(f"cannot plan {model} as a diffusers pipeline: {exc}") from None
    configs: dict[str, dict[str, Any]] = {}
    counted: dict[str, int] = {}
    for name, library, class_name in index_entries(index):
        weighted = holds_weights(library, class_name)
        if weighted:
            configs[name] = files.json(f"{name}/config.json")
            if describe_component(name, library, class_name, configs[name]).params is not None:
                continue
        elif weighted is False:
            continue
        logger.info("%s: counting %s (%s) from its safetensors headers", model, name, class_name)
        if n := files.weights(name):
            counted[name] = n
    return index, configs, counted


class PipelineFiles(Protocol):
    """Where a model's files come from: a local folder or a Hub repo at a revision."""

    def json(self, path: str) -> dict[str, Any]: ...

    def weights(self, folder: str) -> int | None: ...

    def params(self) -> int | None:
        """The parameters of the whole model, from its safetensors headers (None when it has none)."""


class LocalFiles(PipelineFiles):
    def __init__(self, root: Path) -> None:
        self.root = root

    def json(self, path: str) -> dict[str, Any]:
        try:
            data = json.loads((self.root / path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PlanError(f"cannot plan {self.root}: no {path} in it") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PlanError(f"cannot plan {self.root}: unreadable {path} ({exc})") from None
        if not isinstance(data, dict):
            raise PlanError(f"cannot plan {self.root}: {path} is not a JSON object")
        return data

    def weights(self, folder: str) -> int | None:
        files = weight_files([p.name for p in (self.root / folder).glob("*.safetensors")])
        return safetensors_param_count(self.root / folder, [self.root / folder / f for f in files]) if files else None

    def params(self) -> int | None:
        return safetensors_param_count(self.root)


class HubFiles(PipelineFiles):
    def __init__(self, hub: Hub, repo: str, revision: str | None) -> None:
        self.hub, self.repo, self.revision = hub, repo, revision

    def json(self, path: str) -> dict[str, Any]:
        return self.hub.fetch_json(self.repo, path, revision=self.revision)

    def weights(self, folder: str) -> int | None:
        listed = self.hub.list_files(self.repo, repo_type="model", revision=self.revision, under=folder)
        files = weight_files([f for f in listed if f.count("/") == folder.count("/") + 1])
        rev = self.revision
        return sum(self.hub.fetch_safetensors_params(self.repo, revision=rev, file=f) or 0 for f in files) or None

    def params(self) -> int | None:
        return self.hub.fetch_safetensors_params(self.repo, revision=self.revision)


def model_files(model: str | Path, revision: str | None, hub: Hub | None) -> PipelineFiles:
    """The files of ``model``: an existing folder, else the Hub repo of that id at ``revision``.

    Raises:
        ConfigError: a Hub id without a Hub client, or an invalid Hub id.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        return LocalFiles(path)
    if hub is None:
        raise ConfigError(f"cannot plan {model}: a Hub id needs a Hub client")
    return HubFiles(hub, validate_model_id(str(model)), revision)
