"""The stage matrix's features a serving run exercises by a ``vllm serve`` flag alone (issue 49:
:data:`FEATURE_FLAGS`, added to an engine's command by :func:`with_features`), and what the run measured of each:
``serving.features``.

Prefix caching is the one such feature: vLLM 0.32 and vLLM Neuron both enable it by default, so the flags state
it (and vLLM Neuron's block size) rather than change the sweep; after the sweep, on the same engine,
:func:`exercise` sends :data:`PROBE_REQUESTS` prompts sharing one prefix, one after another, and reads the
engine's own ``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries`` counters (``/metrics``, in tokens)
before and after: hits are the feature at work. An engine that reports no such counters passes on its answers
alone, and the detail says so. The others are not flag-only (docs/neuron-facts.md): LoRA needs an adapter,
EAGLE3 a draft model, FP8 and MXFP8 a quantized checkpoint (vLLM Neuron: "Do not set vLLM's ``--quantization``
flag"), MXFP4 a gpt-oss checkpoint on Trainium3.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.error
import urllib.request
from typing import Any

from pipeline.errors import ConfigError
from pipeline.serve.engine import EngineSpec, first_completion

#: The features a flag of ``vllm serve`` alone turns on. Prefix caching: on by default in vLLM 0.32 and vLLM Neuron,
#: stated; vLLM Neuron asks for a block size with it (its features guide's example: 32), which also lets a short
#: prompt fill a block on the CPU (its default there: 128).
FEATURE_FLAGS: dict[str, tuple[str, ...]] = {"prefix_caching": ("--enable-prefix-caching", "--block-size", "32")}
#: The probe's requests: the first fills the cache, the others can hit it.
PROBE_REQUESTS = 8
#: The counters' lines in ``/metrics`` (Prometheus text: a counter's sample is named ``<name>_total``).
_COUNTER = re.compile(r"^vllm:prefix_cache_(hits|queries)_total(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.MULTILINE)


def with_features(spec: EngineSpec, features: tuple[str, ...]) -> EngineSpec:
    """``spec`` with the features' flags added to its command, each named in its options (``prefix_caching: true``:
    serve.sh adds the flags back from it).

    Raises:
        ConfigError: features asked of an engine that is not vLLM (``transformers serve`` where vLLM cannot serve).
    """
    if features and not spec.engine.startswith("vllm"):
        raise ConfigError(f"--feature needs a vLLM engine; {spec.engine} serves this model here")
    flags = tuple(flag for name in features for flag in FEATURE_FLAGS[name])
    options = {**spec.options, **dict.fromkeys(features, True)}
    command = spec.command and spec.command + flags  # empty: the record's command is argv
    return dataclasses.replace(spec, argv=spec.argv + flags, command=command, options=options)


def _counters(spec: EngineSpec, timeout_s: float) -> dict[str, float]:
    """The engine's prefix-cache counters, summed over its engines; empty when it reports none."""
    request = urllib.request.Request(f"{spec.base_url}/metrics", headers=spec.auth())  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310 - loopback only
            text = answer.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError, ValueError):
        return {}
    found: dict[str, float] = {}
    for name, value in _COUNTER.findall(text):
        found[name] = found.get(name, 0.0) + float(value)
    return found


def _prefix_caching(spec: EngineSpec, timeout_s: float) -> dict[str, Any]:
    """Requests that share a prefix (token ids, the context less 16 tokens, then 8 of their own; a few output tokens
    each); passed: every request answered and, where the engine counts them, some prompt tokens hit its cache."""
    length = int(spec.options.get("max_model_len") or 512) - 16
    prefix = [10 + (7 * i) % 90 for i in range(length - 8)]  # ids every tokenizer has
    before = _counters(spec, timeout_s)
    for index in range(PROBE_REQUESTS):
        if problem := first_completion(spec, timeout_s=timeout_s, prompt=prefix + [11 + index] * 8):
            return {"passed": False, "hit_rate": None, "detail": f"probe request {index + 1}: {problem}"[:300]}
    after = _counters(spec, timeout_s)
    said = f"{PROBE_REQUESTS} requests sharing a {len(prefix)}-token prefix"
    queries = after.get("queries", 0.0) - before.get("queries", 0.0)
    if "queries" not in after or queries <= 0:
        return {"passed": True, "hit_rate": None, "detail": f"{said} answered; the engine reports no prefix-cache "
                "counters (vllm:prefix_cache_queries), so no hit rate"}  # fmt: skip
    hits = after.get("hits", 0.0) - before.get("hits", 0.0)
    rate = hits / queries
    detail = f"{said}: prefix-cache hit rate {rate:.2f} ({hits:.0f} of {queries:.0f} prompt tokens, vLLM's /metrics)"
    return {"passed": hits > 0, "hit_rate": round(rate, 4), "detail": detail}


_PROBES = {"prefix_caching": _prefix_caching}


def exercise(spec: EngineSpec, features: tuple[str, ...], *, served: bool, timeout_s: float) -> list[dict[str, Any]]:
    """``serving.features``: each feature with its flags and what the probe saw; ``served`` False (the engine did
    not get through the sweep): ``passed`` None, and the run's verdict is the feature's."""
    out = []
    for name in features:
        flags = list(FEATURE_FLAGS[name])
        if not served:
            found = {"passed": None, "hit_rate": None, "detail": "not probed: the engine did not get through the "
                     "sweep with the flags on, so the run's verdict is the feature's"}  # fmt: skip
        else:
            found = _PROBES[name](spec, timeout_s)
        out.append({"name": name, "flags": flags, **found})
    return out
