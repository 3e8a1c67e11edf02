"""The planner counts a speech model as the pipeline loads it: Whisper's encoder and decoder, not the decoder-only
class its model_type also maps to."""

from __future__ import annotations

import pytest

from pipeline.plan import plan_config

#: whisper-small's config.json (the fields the count depends on).
WHISPER_SMALL = {
    "architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "d_model": 768,
    "encoder_layers": 12, "decoder_layers": 12, "encoder_attention_heads": 12, "decoder_attention_heads": 12,
    "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072, "vocab_size": 51865, "num_mel_bins": 80,
    "max_source_positions": 1500, "max_target_positions": 448, "torch_dtype": "float32",
}  # fmt: skip


def test_whisper_small_is_counted_whole_within_one_percent_of_its_published_size() -> None:
    plan = plan_config(WHISPER_SMALL, task="automatic-speech-recognition")
    assert plan.params == pytest.approx(242e6, rel=0.01)  # the Hub's model card: 242M parameters
    assert plan.cores == 1 and plan.fits
