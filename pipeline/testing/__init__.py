"""Offline fixtures shared by the tests, the demo and the benchmarks: tiny models and sample records.

- :mod:`~pipeline.testing.tiny`: tiny real models built locally (a 2-layer Llama, a tiny LLaVA, a BERT wrapped as a
  sentence-transformers model, a Stable-Diffusion-shaped pipeline) and hostile ones for the gates' tests;
- :mod:`~pipeline.testing.tiny_speech`: a tiny Whisper (the speech-recognition task's model);
- :mod:`~pipeline.testing.records`: sample records of each kind;
- :mod:`~pipeline.testing.browser`: Debian's Chromium for the page's browser tests;
- :mod:`~pipeline.testing.mutation`: the mutation check of the Neuron path (``python -m pipeline.testing.mutation``,
  its bugs in ``neuron_mutants.yaml``; imported by nothing but its test).

Nothing here downloads anything. May import: the top-level modules only. Imported by: the demo (the CLI),
``trncat doctor --smoke`` (:mod:`pipeline.bench`), the tests and the benchmarks.
"""

from __future__ import annotations

from pipeline.testing.tiny import (
    VLLM_HIDDEN_SIZE,
    build_remote_code_model,
    build_tiny_llama,
    build_tiny_llava,
    build_tiny_sentence_bert,
    build_tiny_stable_diffusion,
    build_tokenizer,
    build_unknown_architecture,
)
from pipeline.testing.tiny_speech import build_tiny_whisper
