"""A tiny Whisper built offline: the speech-recognition task's model for the tests and the demo.

A 2-layer encoder, 2-layer decoder Whisper (about 120k parameters) with a byte-level BPE tokenizer trained on the
workload's own transcripts, wrapped as a ``WhisperTokenizer`` (the pipeline decodes Whisper output with it) with
Whisper's special tokens, and Whisper's feature extractor (80 log-mel bins over a 30 s window, which the encoder's
1500 positions take). Its weights are random (seed 0): it transcribes nothing right, so its word error rate
against the true transcripts is about 1; the answer check compares it with its own CPU float32 run.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

#: Whisper's special tokens, after the byte-level vocabulary, in its order.
SPECIAL = ("<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|translate|>", "<|notimestamps|>")
_CORPUS = (
    "the quick brown fox jumps over the lazy dog",
    "please call stella and ask her to bring these things with her from the store",
    "engineers want to know whether a model runs on trainium and how fast it is",
    "the weather today is cold and windy with a chance of rain in the evening",
)


def _whisper_tokenizer(vocab_size: int) -> object:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import WhisperTokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    bpe.train_from_iterator(list(_CORPUS) * 4, trainer=trainer)
    with tempfile.TemporaryDirectory() as scratch:
        bpe.model.save(scratch)
        vocab: dict[str, int] = json.loads((Path(scratch) / "vocab.json").read_text(encoding="utf-8"))
        lines = (Path(scratch) / "merges.txt").read_text(encoding="utf-8").splitlines()
    merges = [tuple(line.split()) for line in lines if line.strip() and not line.startswith("#")]
    tokenizer = WhisperTokenizer(vocab={**vocab, SPECIAL[0]: len(vocab)}, merges=merges, pad_token=SPECIAL[0])
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL[1:])})
    return tokenizer


def build_tiny_whisper(folder: Path | str) -> Path:
    """Save a tiny random Whisper (``WhisperForConditionalGeneration``) with its processor into ``folder``.

    Returns:
        The folder, ready for ``transformers.pipeline("automatic-speech-recognition", model=folder)``.
    """
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
    )
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder = Path(folder)
    tokenizer = _whisper_tokenizer(320)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL}  # type: ignore[attr-defined]
    end, start = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = WhisperConfig(
        vocab_size=len(tokenizer),  # type: ignore[arg-type]
        num_mel_bins=80,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=1500,
        max_target_positions=128,
        pad_token_id=end,
        bos_token_id=end,
        eos_token_id=end,
        decoder_start_token_id=start,
        suppress_tokens=None,
        begin_suppress_tokens=None,
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(
        decoder_start_token_id=start,
        bos_token_id=end,
        eos_token_id=end,
        pad_token_id=end,
        no_timestamps_token_id=ids["<|notimestamps|>"],
    )
    model.save_pretrained(folder)
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer).save_pretrained(
        folder
    )
    logger.debug("built tiny whisper in %s", folder)
    return folder
