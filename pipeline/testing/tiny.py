"""Tiny models built offline, saved as ordinary model folders: what the tests and the demo benchmark.

Everything is deterministic (fixed corpus, fixed seeds), so a folder's content hash, and therefore the
revision a local folder gets, is stable across runs and machines.

The speech-recognition task's model is a 2-layer encoder, 2-layer decoder Whisper (about 120k parameters) with a
byte-level BPE tokenizer trained on the workload's own transcripts, wrapped as a ``WhisperTokenizer`` (the pipeline
decodes Whisper output with it) with Whisper's special tokens, and Whisper's feature extractor (80 log-mel bins
over a 30 s window, which the encoder's 1500 positions take). Its weights are random (seed 0): it transcribes
nothing right, so its word error rate against the true transcripts is about 1; the answer check compares it with
its own CPU float32 run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

IMAGE_TOKEN = "<image>"
_SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", IMAGE_TOKEN]
_CORPUS = [
    "Trainium2 runs transformers models on NeuronCores.",
    "The quick brown fox jumps over the lazy dog.",
    "A catalog tells engineers which models run unmodified, on how many cores, and how fast.",
    "Describe the image in one sentence.",
    "Large language models generate text one token at a time.",
    "Compile once, run many times: the compiler caches its graphs.",
    "Memory bandwidth bounds the speed of decoding.",
    "What is in this picture? A red square on a blue background.",
] * 4

_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)


#: The sizes of the small BERT and CLIP towers: 2 layers of 2 heads, 32 wide (the MLP 64).
_SMALL: dict[str, Any] = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}


def _bpe(corpus: list[str], *, vocab_size: int, special: list[str], unk: str | None = None) -> Any:
    """A byte-level BPE tokenizer (``tokenizers``) trained on ``corpus``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=unk))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return tokenizer


def build_tokenizer(*, vocab_size: int = 384):
    """A byte-level BPE tokenizer trained on a built-in corpus, wrapped as a transformers fast tokenizer."""
    from transformers import PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # every tiny model starts from a tokenizer: no progress bars from here on
    fast = PreTrainedTokenizerFast(
        tokenizer_object=_bpe(_CORPUS, vocab_size=vocab_size, special=_SPECIAL, unk="<unk>"),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": IMAGE_TOKEN},
    )
    fast.chat_template = _CHAT_TEMPLATE
    return fast


def _text_config(tokenizer: Any, *, kv_heads: int = 2, hidden_size: int = 64) -> Any:
    """The tiny Llama text model, sized to ``tokenizer`` and using its special tokens."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )


def _generation_config(tokenizer: Any) -> Any:
    from transformers import GenerationConfig

    return GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )


def _save_model(model_class: Any, config: Any, folder: Path, *, generation: Any = None, seed: int = 0) -> None:
    """Save a ``model_class`` of ``config`` with random weights drawn from ``seed`` (and ``generation`` as its
    generation config, when given) into ``folder``."""
    import torch

    torch.manual_seed(seed)
    model = model_class(config).eval()
    if generation is not None:
        model.generation_config = generation
    model.save_pretrained(folder)


#: Text-generation models of config files only (no weights): the demo seeds them for discovery and the planner, never
#: benchmarks them, so the stage matrix shows them predicted (documented by vLLM Neuron's docs or not listed).
_TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
    "torch_dtype": "bfloat16",
}
CONFIG_ONLY_MODELS: tuple[tuple[str, dict[str, object]], ...] = (
    ("trncat-demo/tiny-llama-chat", {**_TINY, "architectures": ["LlamaForCausalLM"], "model_type": "llama"}),
    ("trncat-demo/tiny-qwen3", {**_TINY, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 16}),
    ("trncat-demo/tiny-gpt2", {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_layer": 2,
                               "n_head": 4, "vocab_size": 1000, "n_positions": 512}),
)  # fmt: skip
#: The tiny Llama's hidden size where vLLM serves it on the CPU (the demo's, the vLLM serving test's): 4 heads of
#: 64. The default 64 gives a head_dim of 16, which vLLM's CPU attention refuses (docs/neuron-facts.md).
VLLM_HIDDEN_SIZE = 256


def build_tiny_llama(folder: Path, *, kv_heads: int = 2, hidden_size: int = 64, seed: int = 0) -> Path:
    """Save a 2-layer Llama causal LM (about 100k parameters) with its tokenizer into ``folder``.

    Args:
        folder: Where to save it.
        kv_heads: Key/value heads (of 4 attention heads); tensor parallelism over N cores needs a multiple of N.
        hidden_size: Its hidden size (the MLP is twice as wide); another size is another model's shapes.
        seed: The seed of its random weights: another seed is a "fine-tune" of the same config, other weights.

    Returns:
        The folder, ready for ``AutoModelForCausalLM.from_pretrained``.
    """
    from transformers import LlamaForCausalLM

    tokenizer = build_tokenizer()
    config = _text_config(tokenizer, kv_heads=kv_heads, hidden_size=hidden_size)
    config.architectures = ["LlamaForCausalLM"]
    _save_model(LlamaForCausalLM, config, folder, generation=_generation_config(tokenizer), seed=seed)
    tokenizer.save_pretrained(folder)
    logger.debug("built tiny llama in %s", folder)
    return folder


def build_tiny_llava(folder: Path) -> Path:
    """Save a tiny LLaVA (CLIP vision tower + Llama text model) with a PIL image processor into ``folder``."""
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
    from transformers.models.llava.processing_llava import LlavaProcessor

    tokenizer = build_tokenizer()
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(**_SMALL, image_size=32, patch_size=8, projection_dim=32),
        text_config=_text_config(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    config.architectures = ["LlavaForConditionalGeneration"]
    _save_model(LlavaForConditionalGeneration, config, folder, generation=_generation_config(tokenizer))
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}, do_convert_rgb=True
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_CHAT_TEMPLATE,
    )
    processor.save_pretrained(folder)
    logger.debug("built tiny llava in %s", folder)
    return folder


def build_tiny_sentence_bert(folder: Path) -> Path:
    """Save a 2-layer BERT wrapped as a sentence-transformers model (Transformer + mean Pooling) into ``folder``.

    Returns:
        The folder, ready for ``SentenceTransformer(folder)``.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel

    tokenizer = build_tokenizer()
    config = BertConfig(
        **_SMALL, vocab_size=len(tokenizer), max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id
    )
    config.architectures = ["BertModel"]
    _save_model(BertModel, config, folder)
    tokenizer.save_pretrained(folder)
    word = Transformer(str(folder), max_seq_length=128)
    pooling = Pooling(word.get_embedding_dimension(), "mean")
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(folder))
    logger.debug("built tiny sentence-transformers BERT in %s", folder)
    return folder


def build_tiny_stable_diffusion(folder: Path) -> Path:
    """Save a Stable-Diffusion-shaped pipeline (UNet, VAE, CLIP text encoder, tokenizer, Euler scheduler) of about
    1.5M parameters into ``folder``: 32 x 32 images (UNet sample size 16 x VAE scale factor 2).

    Returns:
        The folder, ready for ``DiffusionPipeline.from_pretrained``.
    """
    import torch
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from diffusers.utils import logging as diffusers_logging
    from transformers import CLIPTextConfig, CLIPTextModel

    diffusers_logging.set_verbosity_error()
    tokenizer = build_tokenizer()
    tokenizer.model_max_length = 32
    torch.manual_seed(0)
    unet: Any = UNet2DConditionModel(
        sample_size=16,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
    )
    vae: Any = AutoencoderKL(
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(32, 64),
        latent_channels=4,
        sample_size=32,
    )
    text_config = CLIPTextConfig(
        **_SMALL,
        vocab_size=len(tokenizer),
        max_position_embeddings=tokenizer.model_max_length,
        projection_dim=32,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", num_train_timesteps=1000, steps_offset=1
    )
    pipe: Any = StableDiffusionPipeline(
        vae=vae.eval(),
        text_encoder=CLIPTextModel(text_config).eval(),
        tokenizer=tokenizer,
        unet=unet.eval(),
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(folder)
    logger.debug("built tiny stable diffusion in %s", folder)
    return folder


#: Whisper's special tokens, after the byte-level vocabulary, in its order.
_WHISPER = ("<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|translate|>", "<|notimestamps|>")
_SPEECH_CORPUS = (
    "the quick brown fox jumps over the lazy dog",
    "please call stella and ask her to bring these things with her from the store",
    "engineers want to know whether a model runs on trainium and how fast it is",
    "the weather today is cold and windy with a chance of rain in the evening",
)


def _whisper_tokenizer(vocab_size: int) -> Any:
    """A byte-level BPE trained on the workload's transcripts, as a ``WhisperTokenizer`` with Whisper's special
    tokens."""
    from transformers import WhisperTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    bpe = _bpe(list(_SPEECH_CORPUS) * 4, vocab_size=vocab_size, special=[])
    trained = json.loads(bpe.to_str())["model"]  # its vocabulary, and its merges in rank order ([a, b] pairs)
    vocab: dict[str, int] = trained["vocab"]
    merges = [tuple(pair) for pair in trained["merges"]]
    tokenizer = WhisperTokenizer(vocab={**vocab, _WHISPER[0]: len(vocab)}, merges=merges, pad_token=_WHISPER[0])
    tokenizer.add_special_tokens({"additional_special_tokens": list(_WHISPER[1:])})
    return tokenizer


def build_tiny_whisper(folder: Path) -> Path:
    """Save a tiny random Whisper (``WhisperForConditionalGeneration``) with its processor into ``folder``.

    Returns:
        The folder, ready for ``transformers.pipeline("automatic-speech-recognition", model=folder)``.
    """
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
    )

    tokenizer = _whisper_tokenizer(320)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in _WHISPER}
    end, start = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = WhisperConfig(
        vocab_size=len(tokenizer),
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
    generation = GenerationConfig(
        decoder_start_token_id=start,
        bos_token_id=end,
        eos_token_id=end,
        pad_token_id=end,
        no_timestamps_token_id=ids["<|notimestamps|>"],
    )
    _save_model(WhisperForConditionalGeneration, config, folder, generation=generation)
    processor = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer)
    processor.save_pretrained(folder)
    logger.debug("built tiny whisper in %s", folder)
    return folder
