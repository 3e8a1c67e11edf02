"""Quantized checkpoints: what a ``quantization_config`` stores, its download size, and whether it runs on Neuron.

A checkpoint's config.json names its method in ``quantization_config.quant_method``. For each method the
planner needs three facts, kept in :data:`METHODS` with where each comes from (``docs/planner.md``,
"Quantized checkpoints"):

- which parameters the checkpoint stores quantized (the rest stays in the checkpoint's 16-bit dtype);
- the bits one quantized weight takes on disk, scales and zero points included;
- what transformers does with it on a NeuronCore: dequantize it at load (then the device holds the
  benchmark dtype), or refuse to load (a CUDA-only kernel or package), or nothing either documentation says.

An OCP microscaling (MX) checkpoint (:func:`mx_format`: transformers' ``mxfp4``, compressed-tensors'
``mxfp8-quantized`` and ``mxfp4-pack-quantized``) also depends on the device: only Trainium3 runs the MX formats
("MX quantization is only supported on trn3 and above", aws-neuron-sdk#1366), so a compressed-tensors MX
checkpoint is held in its MX format there and refused before it (docs/planner.md, "MX formats and Trainium3").
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pipeline.plan.shapes import config_int
from pipeline.types import QuantSupport

#: Bytes per parameter of a checkpoint's unquantized tensors, by the config's ``torch_dtype``; 2 (bf16 /
#: fp16, as most published checkpoints are) when it names none.
STORED_BYTES: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2}
UNQUANTIZED_BYTES = 2


@dataclass(frozen=True)
class Method:
    """What the planner knows of one ``quant_method``.

    Args:
        support: ``dequantized`` (transformers dequantizes it at load on a Neuron device: it runs, in the
            benchmark dtype), ``unsupported`` (transformers cannot load it there), ``unverified`` (neither
            transformers' nor the Neuron documentation says; the benchmark tells).
        reason: one sentence saying why, naming the source.
        experts_only: only routed-expert tensors are quantized (mxfp4 in transformers).
    """

    support: QuantSupport
    reason: str
    experts_only: bool = False


_NEEDS_CUDA = "transformers' quantization overview lists {} kernels for CUDA/ROCm/CPU/XPU only; no Neuron kernel exists"
METHODS: dict[str, Method] = {
    "mxfp4": Method(
        "dequantized",
        "transformers dequantizes MXFP4 to bfloat16 when the accelerator is not CUDA, XPU or CPU",
        experts_only=True,
    ),
    "fp8": Method(
        "dequantized",
        "transformers dequantizes fine-grained FP8 to bfloat16 without a CUDA or XPU GPU "
        "(and Trainium2 has no float8_e4m3fn, per Neuron compiler error NCC_EVRF051)",
    ),
    "compressed-tensors": Method(
        "unverified",
        "runs through the compressed-tensors package in plain PyTorch; neither transformers' nor the Neuron "
        "documentation says whether it runs on a Neuron device",
    ),
    "bitsandbytes": Method("unsupported", _NEEDS_CUDA.format("bitsandbytes")),
    "gptq": Method("unsupported", _NEEDS_CUDA.format("GPTQ (gptqmodel)")),
    "awq": Method("unsupported", _NEEDS_CUDA.format("AWQ (gptqmodel)")),
    "fbgemm_fp8": Method("unsupported", "transformers requires a CUDA or XPU GPU for fbgemm FP8"),
    "eetq": Method("unsupported", _NEEDS_CUDA.format("EETQ")),
}


#: compressed-tensors' format names of the MX formats (its ``CompressionFormat``; a group may name its own).
CT_MX_FORMATS: dict[str, str] = {"mxfp8-quantized": "mxfp8", "mxfp4-pack-quantized": "mxfp4"}
#: Why an MX checkpoint is refused on a device without the MX formats (docs/neuron-facts.md, "Trainium3").
MX_TRN3_ONLY = (
    'the MX formats run on Trainium3 only ("MX quantization is only supported on trn3 and above", '
    'aws-neuron-sdk#1366; vLLM Neuron\'s recipes: "MXFP8 is Trn3-only", "MXFP4 is Trn3 only")'
)


@dataclass(frozen=True)
class Quantization:
    """The ``quantization`` field of a plan.

    Args:
        method: ``quant_method`` as the config gives it (``bitsandbytes`` for both 4- and 8-bit).
        bits: bits of one quantized weight, without scales (None when the config does not say).
        support: see :class:`Method`.
        held_as: the dtype the device holds the weights in (None when unsupported).
        reason: why, with its source.
        mx_format: the checkpoint's MX format (``mxfp8``, ``mxfp4``), None for any other.
    """

    method: str
    bits: int | None
    support: QuantSupport
    held_as: str | None
    reason: str
    mx_format: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def method_of(config: Any) -> str | None:
    """The ``quant_method`` of a ``quantization_config`` (a dict), or None when there is none."""
    if not isinstance(config, Mapping):
        return None
    method = config.get("quant_method")
    return str(method).lower() if method else None


def mx_format(config: Any) -> str | None:
    """The OCP microscaling format of a ``quantization_config``: ``mxfp4`` (transformers' method, or
    compressed-tensors' ``mxfp4-pack-quantized``), ``mxfp8`` (compressed-tensors' ``mxfp8-quantized``), else None."""
    method = method_of(config)
    if method == "mxfp4":
        return "mxfp4"
    if method != "compressed-tensors":
        return None
    assert isinstance(config, Mapping)
    formats = [config.get("format")]
    groups = config.get("config_groups")
    if isinstance(groups, Mapping):
        formats += [g.get("format") for g in groups.values() if isinstance(g, Mapping)]
    found = [CT_MX_FORMATS[f] for f in formats if isinstance(f, str) and f in CT_MX_FORMATS]
    return found[0] if found else None


def bits_per_weight(config: Mapping[str, Any]) -> tuple[int | None, float]:
    """(nominal bits, bits on disk with scales and zero points) of one quantized weight.

    The on-disk figure follows each method's storage layout: MXFP4 blocks of 32 4-bit values share one
    8-bit exponent; fine-grained FP8 keeps one float32 scale per ``weight_block_size`` block; bitsandbytes
    NF4/FP4 one absmax per 64 values (8-bit with double quantization, else float32); GPTQ and AWQ one
    16-bit scale and one packed zero point per ``group_size`` values; compressed-tensors one 16-bit scale
    per group (or per channel) of its first weight scheme, except an MX format's one 8-bit (E8M0) exponent per
    block of 32.
    """
    method = method_of(config) or ""
    if method == "mxfp4":
        return 4, 4 + 8 / 32
    if method in ("fp8", "fbgemm_fp8", "eetq"):
        block = config.get("weight_block_size")
        size = math.prod(block) if isinstance(block, list) and all(isinstance(b, int) and b > 0 for b in block) else 0
        return 8, 8 + (32 / size if size else 0)
    if method == "bitsandbytes":
        if config.get("load_in_8bit") or config.get("_load_in_8bit"):
            return 8, 8.0
        return 4, 4 + (8 / 64 + 32 / (64 * 256) if config.get("bnb_4bit_use_double_quant") else 32 / 64)
    if method in ("gptq", "awq"):
        bits = config_int(config, "bits") or 4
        group = config_int(config, "group_size") or 0
        return bits, bits + ((16 + bits) / group if group else 0)
    if method == "compressed-tensors":
        scheme = _first_weight_scheme(config)
        bits = config_int(scheme, "num_bits") or 8
        group = config_int(scheme, "group_size") or 0
        if mx_format(config) is not None:
            return bits, bits + 8 / (group or 32)
        return bits, bits + (16 / group if group else 0)
    return None, UNQUANTIZED_BYTES * 8


def _first_weight_scheme(config: Mapping[str, Any]) -> Mapping[str, Any]:
    groups = config.get("config_groups")
    if isinstance(groups, Mapping):
        for group in groups.values():
            if isinstance(group, Mapping) and isinstance(group.get("weights"), Mapping):
                return group["weights"]
    return {}


def _skip_patterns(config: Mapping[str, Any]) -> list[str]:
    """Module names or globs the checkpoint leaves unquantized, under whichever key its method uses."""
    found: list[str] = []
    for key in ("modules_to_not_convert", "llm_int8_skip_modules", "ignore", "modules_to_not_quantize"):
        value = config.get(key)
        if isinstance(value, list):
            found.extend(str(v) for v in value if isinstance(v, str) and not v.startswith("re:"))
    return found


def quantized_matcher(config: Any) -> Callable[[str, int], bool] | None:
    """A test ``(parameter name, ndim) -> stored quantized?`` for a ``quantization_config``; None without one.

    Quantized: matrices (ndim >= 2) named ``weight`` or a fused expert projection, outside the embedding
    tables (the caller excludes those) and outside the modules the config leaves unquantized; for mxfp4 only
    the routed experts. Norms, biases and routers' vectors stay unquantized.
    """
    method = method_of(config)
    if method is None:
        return None
    assert isinstance(config, Mapping)
    skips = _skip_patterns(config)
    experts_only = method in METHODS and METHODS[method].experts_only

    def matches(name: str, ndim: int) -> bool:
        parts = name.split(".")
        if ndim < 2 or parts[-1].endswith("bias") or (experts_only and "experts" not in parts):
            return False
        if not (parts[-1] == "weight" or parts[-1].endswith("_proj")):
            return False
        module = ".".join(parts[:-1])
        for pattern in skips:
            if fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, f"*{pattern}"):
                return False
            if f".{pattern}." in f".{module}.":
                return False
        return True

    return matches


def describe_quantization(config: Any, *, dtype: str, mx_formats: tuple[str, ...] = ()) -> Quantization | None:
    """The plan's ``quantization`` field for a ``quantization_config``, or None when the config has none.

    Args:
        config: the config.json's ``quantization_config``.
        dtype: the benchmark dtype: what a dequantized checkpoint is held in.
        mx_formats: the MX formats the planned device runs (``Instance.mx_formats``: Trainium3's, else none).
    """
    method = method_of(config)
    if method is None:
        return None
    assert isinstance(config, Mapping)
    bits, _ = bits_per_weight(config)
    mx = mx_format(config)
    known = METHODS.get(method)
    if known is None:
        known = Method("unverified", f"trncat has not assessed quantization method {method!r} for Neuron")
    if mx is not None and method == "mxfp4":
        # transformers' own MXFP4 path dequantizes on any accelerator but cuda/xpu/cpu, Trainium3 included.
        native = "Trainium3 runs MXFP4 natively, but" if mx in mx_formats else f"{MX_TRN3_ONLY};"
        known = Method(known.support, f"{native} {known.reason}", known.experts_only)
    elif mx is not None and mx in mx_formats:
        known = Method(
            "unverified",
            f"Trainium3 runs {mx.upper()} natively (NeuronCore-v4's Tensor Engine; vLLM Neuron's native {mx.upper()} "
            "path), so it is held as such; whether transformers' compressed-tensors path keeps it so on TorchNeuron "
            "is not documented: the benchmark tells",
        )
        return Quantization(method, bits, known.support, mx, known.reason, mx)
    elif mx is not None:
        known = Method("unsupported", MX_TRN3_ONLY)
    held = None if known.support == "unsupported" else dtype
    return Quantization(method, bits, known.support, held, known.reason, mx)


def download_bytes(params: int, quantized_params: int, config: Mapping[str, Any]) -> int:
    """Estimated checkpoint bytes of a config.json: quantized weights at their on-disk bits, the rest at the
    config's ``torch_dtype`` (16 bits when it names none or a quantized one)."""
    stored = config.get("torch_dtype") or config.get("dtype")
    per_param = STORED_BYTES.get(stored, UNQUANTIZED_BYTES) if isinstance(stored, str) else UNQUANTIZED_BYTES
    quantization = config.get("quantization_config")
    if method_of(quantization) is None:
        return params * per_param
    assert isinstance(quantization, Mapping)
    _, on_disk = bits_per_weight(quantization)
    return math.ceil(quantized_params * on_disk / 8) + (params - quantized_params) * per_param
