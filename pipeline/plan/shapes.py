"""Shapes read from a model config: the decoder's attention (for the KV cache) and the image tokenizer.

Every reader accepts a transformers config object or a raw config.json dict alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Keys giving the image tokens a processor adds per image.
IMAGE_TOKEN_KEYS = ("image_seq_length", "mm_tokens_per_image", "image_seq_len", "num_image_tokens")
#: Layer kinds (in ``layer_types``) that keep no KV cache.
STATELESS_KINDS = ("linear", "mamba", "conv", "recurrent")


@dataclass(frozen=True)
class AttentionShape:
    """What the KV cache of the text decoder is sized from.

    Args:
        num_layers: decoder layers.
        num_attention_heads: query heads (None when the config does not say).
        num_key_value_heads: key/value heads (GQA/MQA); equals the query heads for plain multi-head attention.
        key_dim: width of one token's cached key in one layer (all kv heads together).
        value_dim: same for the value.
        layer_types: per-layer attention kind (``full_attention``, ``sliding_attention``, ...), or None when
            every layer is alike.
        window: tokens a sliding or chunked layer keeps, or None.
        hidden_size: model width (for the activation estimate).
        intermediate_size: MLP width (for the activation estimate).
        vocab_size: vocabulary size (for the logits estimate).
    """

    num_layers: int
    num_attention_heads: int | None
    num_key_value_heads: int | None
    key_dim: int
    value_dim: int
    layer_types: tuple[str, ...] | None
    window: int | None
    hidden_size: int
    intermediate_size: int
    vocab_size: int

    def kv_values(self, tokens: int) -> int:
        """Values a static KV cache holds for one sequence of ``tokens`` tokens (times bytes = its size).

        Sum over layers of (key width + value width) x cached tokens, where a sliding-window or chunked
        layer caches at most its window and a linear-attention or state-space layer caches none.
        """
        kinds: tuple[str | None, ...] = self.layer_types[: self.num_layers] if self.layer_types else ()
        kinds += (None,) * (self.num_layers - len(kinds))
        cached = 0
        for kind in kinds:
            if kind is not None and any(word in kind for word in STATELESS_KINDS):
                continue
            windowed = self.window is not None and (kind is None or "sliding" in kind or "chunked" in kind)
            cached += min(tokens, self.window) if windowed and self.window else tokens
        return cached * (self.key_dim + self.value_dim)


@dataclass(frozen=True)
class VisionShape:
    """How many tokens one image turns into.

    Args:
        fixed_tokens: tokens per image when the config fixes it (LLaVA's 576, Gemma 3's 256).
        patch_size: vision patch side in pixels.
        image_size: the vision tower's native input side in pixels.
        reduction: patches merged into one token (Qwen2-VL's spatial merge, Idefics3's pixel shuffle).
        dynamic: True when the tower takes the image at its own resolution (Qwen2-VL) instead of resizing.
    """

    fixed_tokens: int | None
    patch_size: int | None
    image_size: int | None
    reduction: int
    dynamic: bool

    def image_tokens(self, image_size: int) -> int:
        """Estimated tokens for one square image of ``image_size`` pixels (no tiling)."""
        if self.fixed_tokens:
            return self.fixed_tokens
        if not self.patch_size:
            return 0
        side = image_size if self.dynamic or not self.image_size else self.image_size
        patches = -(-side // self.patch_size)
        return max(1, patches * patches // max(1, self.reduction))


def config_value(source: Any, *names: str) -> Any:
    """First non-None of ``names``, read alike from a transformers config (attributes) or a raw dict."""
    for name in names:
        value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
        if value is not None:
            return value
    return None


def config_int(source: Any, *names: str) -> int | None:
    value = config_value(source, *names)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def attention_shape(text: Any) -> AttentionShape | None:
    """The decoder's attention shape from a (text) config, or None when it gives no layers or width."""
    layers = config_int(text, "num_hidden_layers", "n_layer", "num_layers")
    hidden = config_int(text, "hidden_size", "n_embd", "d_model")
    heads = config_int(text, "num_attention_heads", "n_head", "num_heads")
    if not layers or not hidden:
        return None
    kv_heads = config_int(text, "num_key_value_heads", "num_kv_heads", "multi_query_group_num") or heads
    head_dim = config_int(text, "head_dim") or (hidden // heads if heads else hidden)
    key_dim = value_dim = (kv_heads or 1) * head_dim
    if config_int(text, "kv_lora_rank") and heads:
        # Multi-head latent attention (DeepSeek V2/V3): transformers caches the decompressed per-head keys
        # (nope + rope parts) and values of every query head.
        kv_heads = heads
        key_dim = heads * ((config_int(text, "qk_nope_head_dim") or 0) + (config_int(text, "qk_rope_head_dim") or 0))
        value_dim = heads * (config_int(text, "v_head_dim") or head_dim)
    layer_types = config_value(text, "layer_types")
    use_window = config_value(text, "use_sliding_window") is not False
    window = config_int(text, "sliding_window") if use_window else None
    window = window or config_int(text, "attention_chunk_size")
    return AttentionShape(
        num_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        key_dim=key_dim,
        value_dim=value_dim,
        layer_types=tuple(str(t) for t in layer_types) if isinstance(layer_types, (list, tuple)) else None,
        window=window,
        hidden_size=hidden,
        intermediate_size=config_int(text, "intermediate_size", "ffn_dim", "n_inner") or 4 * hidden,
        vocab_size=config_int(text, "vocab_size") or 0,
    )


def vision_shape(top: Any, vision: Any) -> VisionShape | None:
    """The image tokenizer's shape of an image-text config, or None when it gives neither tokens nor patches."""
    fixed = config_int(top, *IMAGE_TOKEN_KEYS)
    patch = config_int(vision, "patch_size")
    if not fixed and not patch:
        return None
    merge = config_int(vision, "spatial_merge_size") or config_int(top, "spatial_merge_size")
    scale = config_int(top, "scale_factor") or 1
    return VisionShape(
        fixed_tokens=fixed,
        patch_size=patch,
        image_size=config_int(vision, "image_size"),
        reduction=(merge or scale) ** 2,
        dynamic=bool(merge),
    )
