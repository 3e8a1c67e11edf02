"""vLLM Neuron's compile cache, bundled like a benchmark's NEFF cache: packed after a passing serving run, and
unpacked into a fresh ``VLLM_CACHE_ROOT`` before an engine starts, so that engine starts warm.

What the docs say (docs/neuron-facts.md, "vLLM Neuron"): the local cache is
``$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/``, and ``VLLM_NEURON_DISABLE_WARMUP_COMPILE=1`` makes a local cache
miss a fatal error instead of a compile. They do not list the files inside a ``<hash>`` folder, so a serving
bundle takes exactly what the compiled-cache bundle's rule admits (NEFFs and JSON metadata, never code: the rule of
:mod:`pipeline.backends.neuron.bundle`, checked again at collect, publish and every unpack); a cache holding any
other file gives no bundle, and the record's ``compiled_cache_skipped`` names the file. The first hardware run
settles what the folder holds (the serving smoke prints its listing).

The bundle goes beside the record (``<record>.neff-cache.tar.gz``) like a benchmark's, so ``trncat collect`` and
``trncat publish`` take it the same way; its place in the compiled-cache repo is keyed by the engine's options
too (:func:`pipeline.records.workload_key`), since vLLM Neuron compiles per bucket of ``max_num_seqs`` and
``max_model_len``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from pipeline.backends.neuron import pack_cache, unpack_bundle
from pipeline.errors import BundleError

#: Where vLLM Neuron keeps its local compile cache under ``VLLM_CACHE_ROOT``.
COMPILE_CACHE_PARTS = ("neuron", "compile_cache")
#: vLLM Neuron's switch that makes a local cache miss fatal (a strict warm start).
STRICT_VARIABLE = "VLLM_NEURON_DISABLE_WARMUP_COMPILE"


def run_cache_root(work: Path) -> Path:
    """The run-private ``VLLM_CACHE_ROOT`` of a serving run whose work folder is ``work`` (what a pass packs)."""
    return work / "vllm-cache"


def compile_cache_dir(cache_root: Path) -> Path:
    """``<cache_root>/neuron/compile_cache``: the folder a serving bundle packs and unpacks."""
    return cache_root.joinpath(*COMPILE_CACHE_PARTS)


def pack_serving_cache(cache_root: Path, out: Path) -> str | None:
    """Pack the engine's compile cache under ``cache_root`` into the bundle ``out``; None when packed, else why
    there is no bundle (a message for ``compiled_cache_skipped``: no cache, a file the rule refuses, over the cap).
    """
    try:
        pack_cache(compile_cache_dir(cache_root), out)
    except BundleError as exc:
        return f"vLLM Neuron's compile cache: {exc}"
    return None


def warm_cache_root(bundle: Path, *, sha256: str, parent: Path | None = None) -> Path:
    """A fresh ``VLLM_CACHE_ROOT`` holding the bundle's cache (checked member by member, digest first) and nothing
    else: the engine started on it finds every graph the bundle's run compiled.

    Raises:
        BundleError: the bundle's digest is not ``sha256``, or a member breaks the rule (nothing is left).
    """
    root = Path(tempfile.mkdtemp(prefix="trncat-vllm-cache-", dir=parent))
    try:
        unpack_bundle(bundle, compile_cache_dir(root), sha256=sha256)
    except BundleError:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root


def warm_environment(cache_root: Path, *, strict: bool) -> dict[str, str]:
    """The engine's environment for a warm start from ``cache_root``; ``strict``: a cache miss is fatal."""
    env = {"VLLM_CACHE_ROOT": str(cache_root)}
    if strict:
        env[STRICT_VARIABLE] = "1"
    return env
