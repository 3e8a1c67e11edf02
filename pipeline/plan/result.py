"""What the planner answers: the :class:`Plan` of a model or a diffusers pipeline, and the dtype names it takes.

Kept apart from :mod:`pipeline.plan.model` (transformers models) so that :mod:`pipeline.plan.diffusion` (diffusers
pipelines) can build the same record without importing the module that dispatches to it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from pipeline.errors import ConfigError
from pipeline.plan.advice import cores_text, size_text
from pipeline.plan.memory import DTYPE_BYTES
from pipeline.types import DTYPES

ParamSource = Literal["meta-device", "safetensors"]

_DTYPE_ALIASES: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}


@dataclass(frozen=True, kw_only=True)
class Plan:
    """How much memory a model needs and on how many NeuronCores it runs.

    Byte counts cover the whole model on the layout's cores; ``per_core_bytes`` is what each core holds.
    ``weights_bytes`` is the weights as the device holds them (a quantized checkpoint that transformers
    dequantizes at load, in the benchmark dtype); ``download_bytes`` the checkpoint's size.
    ``overhead_bytes`` = ``total_bytes`` - weights - KV cache: headroom, runtime reserve, activations and
    the copies the layout makes (weights outside transformers' parallel plans, replicated kv heads).
    When ``fits`` is False, ``tp_degree`` is None and ``cores`` and the byte counts are those of the
    smallest layout that would hold the model on more cores of the same kind (possibly more than the
    instance has), or, when no layout transformers runs would, of the layers split evenly over cores.
    ``active_params`` counts what one text token passes through with the embedding table and output head;
    ``active_params_without_embedding`` the same without the input embedding table.

    A diffusers pipeline (``components`` set) has one entry per weight-bearing component (name, library,
    class, role, params, weights_bytes, source, sharded); ``architecture`` is the pipeline class, ``params``
    the sum over the components (``active_params`` equals it: every component runs for each image), and
    ``activations`` the estimated peak activation bytes on one core of each stage (text encoders, denoiser
    step, VAE decode) at the resolution in ``workload["image_size"]``. Transformers models leave both None.
    """

    model: str | None = None
    revision: str | None = None
    architecture: str | None
    model_type: str | None = None
    source: ParamSource
    dtype: str
    instance: str
    lnc: int
    memory_per_core_bytes: int
    params: int
    active_params: int
    active_params_without_embedding: int
    download_bytes: int
    quantization: dict[str, Any] | None
    weights_bytes: int
    replicated_weights_bytes: int
    kv_cache_bytes: int = 0
    overhead_bytes: int
    total_bytes: int
    per_core_bytes: int
    cores: int
    tp_degree: int | None
    ep_degree: int | None = None
    kv_replication: int = 1
    num_attention_heads: int | None
    num_key_value_heads: int | None = None
    fits: bool
    advice: str
    workload: dict[str, int | None]
    components: list[dict[str, Any]] | None = None
    activations: dict[str, int] | None = None

    def layout_line(self) -> str:
        """The instance and the cores the plan takes, as ``trncat plan`` prints them."""
        where = f"{self.instance}, LNC={self.lnc}, {size_text(self.memory_per_core_bytes)} per NeuronCore"
        if self.fits:
            return f"{where}: {cores_text(self.cores)}, {size_text(self.per_core_bytes)} each"
        return f"{where}: does not fit (the smallest layout that would hold it: {cores_text(self.cores)})"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field (what ``trncat plan --json`` prints)."""
        return asdict(self)


def normalize_dtype(dtype: str) -> str:
    """Canonical dtype name (``bf16`` -> ``bfloat16``).

    Args:
        dtype: a name from :data:`pipeline.types.DTYPES` or a short form (bf16, fp16, fp32, fp8).

    Returns:
        The canonical name.

    Raises:
        ConfigError: not a known dtype.
    """
    name = _DTYPE_ALIASES.get(dtype, dtype)
    if name not in DTYPE_BYTES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    return name


def count_text(n: int) -> str:
    """A parameter count for people: ``8.03B``, ``123.06M``."""
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)
