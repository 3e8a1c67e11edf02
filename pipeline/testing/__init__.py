"""Offline fixtures shared by the tests, the demo and the benchmarks: tiny models built locally.

- :mod:`~pipeline.testing.tiny`: tiny real models built locally (a 2-layer Llama, a tiny LLaVA, a BERT wrapped as a
  sentence-transformers model, a Stable-Diffusion-shaped pipeline, a tiny Whisper: the speech-recognition task's).

The Neuron emulator, the sample records, the browser settings and the mutation check are the tests' own
(``tests/support/``).

Nothing here downloads anything. May import: the top-level modules only. Imported by: the demo (the CLI),
``trncat doctor --smoke`` (:mod:`pipeline.bench`), the tests and the benchmarks.
"""

from __future__ import annotations

from pipeline.testing.tiny import (
    CONFIG_ONLY_MODELS,
    VLLM_HIDDEN_SIZE,
    build_tiny_llama,
    build_tiny_llava,
    build_tiny_sentence_bert,
    build_tiny_stable_diffusion,
    build_tiny_whisper,
)
