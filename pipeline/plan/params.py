"""Exact parameter counts and attention shapes of a model, from its config.json alone.

The architecture is instantiated on PyTorch's meta device (shapes without storage, so a 47B MoE costs a few
milliseconds and no memory) through the same Auto class a benchmark would load it with, and its unique
parameters are counted: tied embeddings once, every expert of an MoE, vision towers and projectors. The same
pass records which parameters transformers' tensor-parallel plan shards (the rest is replicated on every
core) and the attention shape the KV cache is sized from.

Results are cached per (architecture, config hash): the Hub holds thousands of fine-tunes with the same
config, and those plan from one instantiation. Configs that differ in any size hash differently, so the
cache never trades exactness for speed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.errors import PlanError, PlanLimitError
from pipeline.plan.limits import check_config, limited
from pipeline.plan.model_types import known_model_types, transformers_version
from pipeline.plan.quantization import quantized_matcher
from pipeline.plan.shapes import AttentionShape, VisionShape, attention_shape, config_int, vision_shape

logger = logging.getLogger(__name__)

#: Config keys that never change the parameter count or attention shape; dropped before hashing so that
#: copies saved by different transformers versions or at different dtypes share a cache entry.
_HASH_IGNORED_KEYS = frozenset({"_name_or_path", "transformers_version", "torch_dtype", "dtype", "_commit_hash"})
#: Config keys, in order of preference, for the routed experts of an MoE and the experts used per token.
_NUM_EXPERTS_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "num_selected_experts", "top_k")
_CACHE_SIZE = 4096
#: Words in a parameter's module path that mark a vision or audio tower (or its projector into the text
#: model): run once per image or clip, so not counted as active per token.
_TOWER_WORDS = ("vision", "visual", "multi_modal_projector", "audio", "image_newline")
#: Module names of a decoder layer's attention.
_ATTENTION_WORDS = frozenset({"self_attn", "attn", "attention", "self_attention"})


@dataclass(frozen=True)
class ModelShape:
    """Everything the planner needs to know about one config.

    Args:
        architecture: the class named in ``architectures`` (or the Auto class's choice), if any.
        model_type: the config's ``model_type``.
        attention: the decoder's attention shape, or None when the config does not give one.
        vision: the image tokenizer's shape for image-text models, else None.
        instantiable: True when transformers built the model on the meta device and the counts below are set.
        reason: why it could not be built, when ``instantiable`` is False.
        params: unique parameters (None when not instantiable).
        active_params: parameters one text token passes through: the decoder (MoE: shared part + top-k of
            the routed experts) with the input embedding table and the output head; vision and audio
            towers excluded (they run once per image, not per token).
        tp_sharded_params: parameters transformers' tensor-parallel plan splits across cores.
        has_tp_plan: whether transformers has a tensor-parallel plan for the architecture at all.
        active_without_embedding: ``active_params`` less the input embedding table (a lookup reads one
            row of it per token); the output head, a real matrix product, still counts.
        ep_params: parameters transformers' expert-parallel plan splits by expert (0: no such plan).
        ep_tp_sharded_params: tensor-parallel sharded parameters outside the expert-parallel plan (what
            the tp plan still splits when both run: expert rules take precedence).
        num_experts: routed experts per MoE layer, when the config says.
        attention_sharded: whether the tp plan splits the decoder's attention (and so its KV cache).
        quantized_params: parameters the checkpoint's ``quantization_config`` stores quantized.
    """

    architecture: str | None
    model_type: str | None
    attention: AttentionShape | None
    vision: VisionShape | None
    instantiable: bool = False
    reason: str | None = None
    params: int | None = None
    active_params: int | None = None
    tp_sharded_params: int | None = None
    has_tp_plan: bool = False
    active_without_embedding: int | None = None
    ep_params: int = 0
    ep_tp_sharded_params: int = 0
    num_experts: int | None = None
    attention_sharded: bool = True
    quantized_params: int = 0


_cache: dict[tuple[str, str, bool], ModelShape] = {}


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 of the config's canonical JSON, ignoring keys that cannot change the count.

    Args:
        config: a parsed config.json.

    Returns:
        64 hex digits.
    """
    canonical = json.dumps(_strip(config), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _strip(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip(v) for k, v in value.items() if k not in _HASH_IGNORED_KEYS}
    if isinstance(value, (list, tuple)):
        return [_strip(v) for v in value]
    return value


def describe(config: Mapping[str, Any], *, base_model: bool = False, isolated: bool = False) -> ModelShape:
    """Count the parameters of ``config``'s architecture and read its attention shape.

    Args:
        config: a parsed config.json (a plain dict, as on the Hub).
        base_model: count the bare model ``transformers.AutoModel`` builds, whatever ``architectures`` names
            (what sentence-transformers loads: its ``Transformer`` module calls ``AutoModel.from_pretrained``;
            all-mpnet-base-v2's config names ``MPNetForMaskedLM``, whose LM head its checkpoint does not hold).
        isolated: import transformers (and so torch) only in the child that builds, never in this process (what
            ``trncat check`` asks: one build per process, and a process that stays small).

    Returns:
        The :class:`ModelShape`; ``instantiable`` is False when transformers does not know the architecture
        or could not build it, and then only the shapes read from the raw config are filled in.

    Raises:
        PlanError: the config is not a JSON object or names neither a model_type nor an architecture.
        PlanLimitError: the config is too large to build (:mod:`pipeline.plan.limits`), or building it ran past
            the time or memory limit.
    """
    if not isinstance(config, Mapping):
        raise PlanError(f"config.json must be a JSON object, got {type(config).__name__}")
    architectures = config.get("architectures") or []
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    model_type = config.get("model_type")
    if not model_type and not architecture:
        raise PlanError("config.json names neither a model_type nor an architecture")
    check_config(config)
    key = (str(architecture or model_type), config_hash(config), base_model)
    info = _cache.get(key)
    if info is None:
        info = _describe(dict(config), architecture, model_type, base_model, isolated)
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[key] = info
    return info


def _describe(
    config: dict[str, Any], architecture: str | None, model_type: str | None, base_model: bool, isolated: bool
) -> ModelShape:
    known = known_model_types()  # read without importing transformers, which imports torch
    if not model_type or (known is not None and model_type not in known):
        return _raw(config, architecture, model_type, f"transformers {transformers_version()} does not know "
                                                      f"model_type {model_type!r}")  # fmt: skip
    if isolated:  # the whole of it in the limited child: this process never imports transformers
        name, imports = architecture or model_type, ("torch", "transformers")
        return limited(_describe_here, config, architecture, model_type, base_model, False, what=name, imports=imports)
    return _describe_here(config, architecture, model_type, base_model, True)


def _raw(config: Mapping[str, Any], architecture: str | None, model_type: str | None, reason: str) -> ModelShape:
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    vision = vision_shape(config, config.get("vision_config") or {})
    return ModelShape(architecture, model_type, attention_shape(text), vision, reason=reason)


def _describe_here(
    config: dict[str, Any], architecture: str | None, model_type: str, base_model: bool, limit: bool
) -> ModelShape:
    import transformers

    def raw(reason: str) -> ModelShape:
        return _raw(config, architecture, model_type, reason)

    if model_type not in transformers.CONFIG_MAPPING:
        return raw(f"transformers {transformers.__version__} does not know model_type {model_type!r}")
    name = architecture or model_type
    try:
        with quiet():
            hf_config = transformers.CONFIG_MAPPING[model_type].from_dict(config)
            build = _builder(hf_config, architecture, model_type, base_model)
        # The build in a child under a time and memory limit (pipeline.plan.limits): past them, PlanLimitError.
        args = (build, hf_config, config.get("quantization_config"))
        counts, architecture = limited(_build_and_count, *args, what=name) if limit else _build_and_count(*args)
    except PlanLimitError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to build means "count from the weights instead"
        logger.warning("cannot instantiate %s on the meta device: %s", name, exc)
        why = str(exc) if isinstance(exc, PlanError) else f"{type(exc).__name__}: {exc}"
        return raw(f"transformers could not build {name}: {why}")
    attention = attention_shape(hf_config.get_text_config())
    vision = vision_shape(hf_config, getattr(hf_config, "vision_config", None) or {})
    return ModelShape(architecture, model_type, attention, vision, instantiable=True, reason=None, **counts)


def _builder(hf_config: Any, architecture: str | None, model_type: str, base_model: bool) -> Callable[[], Any]:
    """What builds the model on the meta device, with the Auto class a benchmark would use. Its modeling module is
    imported here, in this process, so that the child that builds (:func:`limited`) never imports it again."""
    import transformers
    from transformers.models.auto import modeling_auto as auto

    causal = auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    image_text = auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    speech = {*auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES.values(), *auto.MODEL_FOR_CTC_MAPPING_NAMES.values()}
    # The checkpoint's own class decides first (Gemma 3 is in both mappings; a text-only Llama 4 checkpoint
    # says ForCausalLM); the model_type decides when the class name is absent or foreign.
    auto_cls: Any
    if base_model:
        auto_cls, mapping = transformers.AutoModel, auto.MODEL_MAPPING
    elif architecture in image_text.values() or (architecture not in causal.values() and model_type in image_text):
        auto_cls, mapping = transformers.AutoModelForImageTextToText, auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING
    elif architecture in speech and isinstance(own := getattr(transformers, architecture, None), type):
        speech_cls: Any = own  # Whisper's model_type maps to a decoder-only class too: the pipeline loads this one
        return lambda: speech_cls._from_config(hf_config)
    elif architecture in causal.values() or model_type in causal:
        auto_cls, mapping = transformers.AutoModelForCausalLM, auto.MODEL_FOR_CAUSAL_LM_MAPPING
    else:
        cls = getattr(transformers, architecture or "", None)
        if isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel):
            return lambda: cls._from_config(hf_config)
        auto_cls, mapping = transformers.AutoModel, auto.MODEL_MAPPING
    with contextlib.suppress(Exception):  # only an import ahead of time; from_config says what is wrong
        mapping[type(hf_config)]
    return lambda: auto_cls.from_config(hf_config, trust_remote_code=False)


def _build_and_count(build: Callable[[], Any], hf_config: Any, quantization: Any) -> tuple[dict[str, Any], str]:
    """The child's side: build on the meta device and count (:func:`_count`); the counts and the class's name."""
    import torch

    with quiet(), torch.device("meta"), no_torch_init():
        model = build()
    return _count(model, hf_config, quantization), type(model).__name__


def plan_matcher(plan: Mapping[str, Any], *, skip_replicated: bool) -> Callable[[str], bool] | None:
    """A test for "this parameter is under a module the plan names" (the ``*`` stands for a layer number)."""
    keys = [k for k, v in plan.items() if not (skip_replicated and str(v).startswith("replicated"))]
    if not keys:
        return None
    alternatives = "|".join(re.escape(k).replace(r"\*", r"\d+") for k in keys)
    pattern = re.compile(rf"(?:{alternatives})(?:\..+)?")
    return lambda name: pattern.fullmatch(name) is not None


def _count(model: Any, hf_config: Any, quantization: Any) -> dict[str, Any]:
    """Parameter counts of a meta model: totals, per-token, and what each parallel plan splits."""
    is_tp = plan_matcher(
        getattr(model, "tp_plan", None) or getattr(model, "_tp_plan", None) or {}, skip_replicated=True
    )
    is_ep = plan_matcher(getattr(model, "ep_plan", None) or {}, skip_replicated=False)
    is_quantized = quantized_matcher(quantization)
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    embedding_ids = {id(p) for p in embeddings.parameters()} if embeddings is not None else set()
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    table_ids = embedding_ids | ({id(p) for p in head.parameters()} if head is not None else set())
    total = experts = sharded = tower = embedding = ep = ep_tp = quantized = 0
    attention_sharded = False
    # named_parameters() yields a tied tensor once, which is exactly "tied embeddings counted once".
    for name, param in model.named_parameters():
        n = param.numel()
        parts = name.split(".")
        total += n
        if "experts" in parts:
            experts += n
        if any(word in part for part in parts for word in _TOWER_WORDS):
            tower += n
        if id(param) in embedding_ids:
            embedding += n
        in_ep = is_ep is not None and is_ep(name)
        ep += n if in_ep else 0
        if is_tp is not None and is_tp(name):
            sharded += n
            ep_tp += 0 if in_ep else n
            attention_sharded |= not _ATTENTION_WORDS.isdisjoint(parts) and not any(w in name for w in _TOWER_WORDS)
        if is_quantized is not None and id(param) not in table_ids and is_quantized(name, param.dim()):
            quantized += n
    text = hf_config.get_text_config()
    num_experts = config_int(text, *_NUM_EXPERTS_KEYS)
    top_k = config_int(text, *_TOP_K_KEYS)
    active = total - tower
    if experts and num_experts and top_k and top_k < num_experts:
        active = active - experts + experts * top_k // num_experts
    return {
        "params": total,
        "active_params": active,
        "active_without_embedding": active - embedding,
        "tp_sharded_params": sharded,
        "has_tp_plan": is_tp is not None,
        "ep_params": ep,
        "ep_tp_sharded_params": ep_tp,
        "num_experts": num_experts if experts else None,
        "attention_sharded": attention_sharded,
        "quantized_params": quantized,
    }


@contextlib.contextmanager
def quiet(*libraries: str) -> Iterator[None]:
    """Silence the per-instantiation warnings of transformers and ``libraries`` (``diffusers``): unused or unknown
    config keys, default dtypes, ..."""
    loggers = [importlib.import_module(f"{name}.utils.logging") for name in ("transformers", *libraries)]
    previous = [module.get_verbosity() for module in loggers]
    for module in loggers:
        module.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for module, level in zip(loggers, previous, strict=True):
            module.set_verbosity(level)


@contextlib.contextmanager
def no_torch_init() -> Iterator[None]:
    """Make torch.nn.init functions no-ops while building: on meta tensors they only cost time (~30 %).

    transformers' own ``init_weights`` still runs, so weight tying (which it performs) is kept. Uses the
    list of init functions transformers itself patches; if that moves, building is just slower. Patches
    module globals for the duration, like transformers' ``no_init_weights``: not for concurrent threads.
    """
    try:
        from transformers import initialization as hf_init

        module_names = tuple(hf_init.TORCH_MODULES_TO_PATCH)
        function_names = tuple(hf_init.TORCH_INIT_FUNCTIONS)
    except (ImportError, AttributeError):
        yield
        return

    def skip(tensor: Any = None, *args: Any, **kwargs: Any) -> Any:
        return tensor

    originals: list[tuple[Any, str, Any]] = []
    try:
        for module_name in module_names:
            module = sys.modules.get(module_name)
            for function_name in function_names if module is not None else ():
                if hasattr(module, function_name):
                    originals.append((module, function_name, getattr(module, function_name)))
                    setattr(module, function_name, skip)
        yield
    finally:
        for module, function_name, function in reversed(originals):
            setattr(module, function_name, function)
