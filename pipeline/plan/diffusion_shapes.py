"""A diffusers pipeline's resolution and activation memory, read from its components' configs, and the workload
a run of a model gets (:func:`resolve_workload`: the task's, at the pipeline's own resolution).

Every figure here is an estimate, an upper bound of one stage's working set on one core (``docs/planner.md``,
"Diffusers pipelines"): the stages run one after another (text encoders, then the denoiser once per step, then
the VAE decoder), so the peak is the largest of the three, not their sum.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.models import read_config
from pipeline.plan.shapes import config_int, config_value
from pipeline.taskspec import default_workload
from pipeline.types import Task
from pipeline.workload import Workload

#: diffusers' own default VAE scale factor, used by its pipelines when they have no VAE.
DEFAULT_VAE_SCALE = 8
#: Classifier-free guidance runs the denoiser on the prompt and the negative prompt in one batch: twice the
#: batch. Assumed for every pipeline (an upper bound: guidance-distilled models such as FLUX.1 run one batch).
GUIDANCE_BATCH = 2
#: Width of a transformer block's MLP hidden layer over the model width (4 in SD, SDXL, SD3, FLUX.1, PixArt).
MLP_RATIO = 4


@dataclass(frozen=True)
class StageActivations:
    """Estimated peak activation bytes of each stage on one core.

    ``denoiser_split`` is the part tensor parallelism divides by its degree (attention scores and the MLP's
    hidden layer); ``denoiser_whole`` the part every core holds (block inputs and outputs, UNet skip tensors).
    """

    text_encoders: int
    denoiser_whole: int
    denoiser_split: int
    vae_decode: int

    def denoiser(self, degree: int = 1) -> int:
        return self.denoiser_whole + -(-self.denoiser_split // degree)

    def peak(self, degree: int = 1) -> int:
        """The largest stage at a tensor-parallel degree of the denoiser."""
        return max(self.text_encoders, self.denoiser(degree), self.vae_decode)

    def to_dict(self, degree: int = 1) -> dict[str, int]:
        return {"text_encoders": self.text_encoders, "denoiser": self.denoiser(degree), "vae_decode": self.vae_decode}


def vae_scale_factor(vae: Mapping[str, Any] | None) -> int:
    """Pixels per latent along a side: ``2 ** (len(block_out_channels) - 1)``, as diffusers' pipelines compute it
    (``encoder_block_out_channels`` for the deep-compression autoencoder of Sana)."""
    channels = _channels(vae, "encoder_block_out_channels", "block_out_channels")
    return 2 ** (len(channels) - 1) if channels else DEFAULT_VAE_SCALE


def default_resolution(denoiser: Mapping[str, Any] | None, vae: Mapping[str, Any] | None) -> int | None:
    """The image side the pipeline's configs state: the denoiser's ``sample_size`` (in latents) times the VAE
    scale factor, as diffusers' pipelines default ``height`` and ``width``; None when the denoiser's config
    states no ``sample_size`` (FLUX.1: its pipeline's 1024 px default is in code, not in a config)."""
    sample = config_int(denoiser, "sample_size") if denoiser else None
    return sample * vae_scale_factor(vae) if sample else None


def estimate_activations(
    *,
    resolution: int,
    batch: int,
    text_tokens: int,
    compute_bytes: int,
    denoiser: Mapping[str, Any] | None,
    vae: Mapping[str, Any] | None,
    text_encoders: list[Mapping[str, Any]],
) -> StageActivations:
    """Each stage's activation estimate at ``resolution`` (pixels per side) for ``batch`` images.

    Args:
        resolution: image side in pixels.
        batch: images per call.
        text_tokens: prompt tokens each text encoder reads (and the joint-attention transformers attend to).
        compute_bytes: bytes per activation value.
        denoiser: the denoiser's config (a UNet's or a transformer's), or None.
        vae: the VAE's config, or None.
        text_encoders: the text encoders' configs.
    """
    latent = max(1, resolution // vae_scale_factor(vae))
    text = max((_encoder_bytes(c, batch, text_tokens) for c in text_encoders), default=0) * compute_bytes
    whole, split = _denoiser_values(denoiser or {}, vae or {}, latent, batch * GUIDANCE_BATCH, text_tokens)
    return StageActivations(
        text, whole * compute_bytes, split * compute_bytes, _vae_values(vae, latent, batch) * compute_bytes
    )


def _channels(config: Mapping[str, Any] | None, *keys: str) -> list[int]:
    for key in keys:
        value = config_value(config, key) if config else None
        if isinstance(value, list) and value and all(isinstance(v, int) and v > 0 for v in value):
            return value
    return []


def _encoder_bytes(config: Mapping[str, Any], batch: int, tokens: int) -> int:
    """One encoder layer's working set (values): as the transformers planner sizes a prefill layer."""
    hidden = config_int(config, "hidden_size", "d_model") or 0
    inner = config_int(config, "intermediate_size", "d_ff") or MLP_RATIO * hidden
    heads = config_int(config, "num_attention_heads", "num_heads") or 1
    return batch * tokens * (2 * hidden + 2 * inner) + batch * heads * tokens * tokens


def _per_level(value: Any, levels: int) -> list[int]:
    if isinstance(value, list) and len(value) >= levels:
        return [int(v) for v in value[:levels]]
    return [int(value)] * levels if isinstance(value, int) and value > 0 else [1] * levels


def _denoiser_values(
    config: Mapping[str, Any], vae: Mapping[str, Any], latent: int, batch: int, text_tokens: int
) -> tuple[int, int]:
    """(whole, split) activation values of one denoiser step's largest block."""
    channels = _channels(config, "block_out_channels")
    if channels and isinstance(config.get("down_block_types"), list):
        return _unet_values(config, channels, latent, batch)
    heads, head_dim = config_int(config, "num_attention_heads"), config_int(config, "attention_head_dim")
    if not heads or not head_dim:
        return 0, 0  # a denoiser of another shape: not estimated
    # Tokens: latent patches; FLUX.1 packs 2x2 latents into its 64 input channels before a patch size of 1.
    patch = config_int(config, "patch_size") or 1
    latent_channels, in_channels = config_int(vae, "latent_channels"), config_int(config, "in_channels")
    if latent_channels and in_channels and in_channels > latent_channels and in_channels % latent_channels == 0:
        packed = math.isqrt(in_channels // latent_channels)
        patch *= packed if packed * packed == in_channels // latent_channels else 1
    tokens = (latent // patch) ** 2 + text_tokens
    width = heads * head_dim
    whole = batch * tokens * 2 * width
    split = batch * heads * tokens * tokens + batch * tokens * 2 * MLP_RATIO * width
    return whole, split


def _unet_values(config: Mapping[str, Any], channels: list[int], latent: int, batch: int) -> tuple[int, int]:
    """A UNet: the largest level's block (attention at its resolution, when it has any) plus every skip tensor
    the down path keeps for the up path. diffusers' UNet configs name the heads ``attention_head_dim`` when
    ``num_attention_heads`` is null (a naming its UNet2DConditionModel keeps for compatibility)."""
    kinds = config["down_block_types"]
    levels = min(len(channels), len(kinds))
    heads = _per_level(config.get("num_attention_heads") or config.get("attention_head_dim"), levels)
    skips = (config_int(config, "layers_per_block") or 2) + 1
    best, kept = (0, 0), 0
    for level in range(levels):
        tokens, width = (latent >> level) ** 2, channels[level]
        kept += batch * skips * tokens * width
        if "Attn" in str(kinds[level]):
            whole = batch * tokens * 2 * width
            split = batch * heads[level] * tokens * tokens + batch * tokens * 2 * MLP_RATIO * width
        else:
            whole, split = batch * tokens * 3 * width, 0
        if whole + split > sum(best):
            best = (whole, split)
    return best[0] + kept, best[1]


def _vae_values(vae: Mapping[str, Any] | None, latent: int, batch: int) -> int:
    """The decoder's largest level: the upsampled input and two feature maps at that level's resolution, plus
    the single-head attention of AutoencoderKL's mid block over the latent (DC-AE's attention is linear)."""
    channels = list(reversed(_channels(vae, "decoder_block_out_channels", "block_out_channels")))
    if not channels:
        return 0
    peak = 0
    for level, width in enumerate(channels):
        side = latent << level
        peak = max(peak, batch * side * side * (channels[max(0, level - 1)] + 2 * width))
    if vae and "block_out_channels" in vae and config_value(vae, "mid_block_add_attention") is not False:
        peak = max(peak, batch * latent**4)
    return peak


#: Few-step models (distilled for a handful of steps, without guidance) say so in their names; they run
#: :data:`FEW_STEPS` steps with guidance 0, as their model cards show, and the record's workload states it.
FEW_STEP_NAME = re.compile(r"turbo|schnell|lightning|\blcm\b|hyper-?sd", re.IGNORECASE)
FEW_STEPS = 4


def pipeline_resolution(folder: Path) -> int | None:
    """A diffusers pipeline's default image side from its configs (the rule the planner uses too:
    :func:`default_resolution`); None when they do not say."""
    vae = read_config(folder / "vae")
    for name in ("unet", "transformer"):
        if size := default_resolution(read_config(folder / name), vae):
            return size
    return None


def resolve_workload(task: Task | str, *, folder: Path | None = None, model_id: str = "") -> Workload:
    """The workload a run of ``model_id`` (in ``folder``) gets: the task's, with a text-to-image pipeline's own
    resolution (else 512) and, for a few-step model, :data:`FEW_STEPS` steps without guidance."""
    workload = default_workload(task)
    if task != "text-to-image":
        return workload
    size = pipeline_resolution(folder) if folder is not None else None
    changes: dict[str, Any] = {"image_size": size or workload.image_size}
    if FEW_STEP_NAME.search(model_id):
        changes.update(steps=FEW_STEPS, guidance_scale=0.0)
    return dataclasses.replace(workload, **changes)
