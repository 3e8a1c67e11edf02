"""Every environment variable trncat reads, read once, here. Tests patch this module."""

from __future__ import annotations

import os
from pathlib import Path


def _seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment; the default when unset, unreadable or not positive."""
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if 0 < value < float("inf") else default


#: Hub endpoint, as in huggingface_hub (the local hub sets it for the demo and tests).
HF_ENDPOINT: str = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
#: Hub token; only the publish job has one.
HF_TOKEN: str | None = os.environ.get("HF_TOKEN") or None
#: Seconds a request to the Hub may take to connect, and to send or receive its next bytes once connected (every
#: request, whatever huggingface_hub asks: a Hub that stops answering is a network error, retried on the call's
#: budget). A commit's answer may take the Hub a while: the read timeout is generous.
TRNCAT_HUB_CONNECT_TIMEOUT_S: float = _seconds("TRNCAT_HUB_CONNECT_TIMEOUT_S", 10.0)
TRNCAT_HUB_READ_TIMEOUT_S: float = _seconds("TRNCAT_HUB_READ_TIMEOUT_S", 120.0)
#: The most seconds one ``trncat publish`` spends on the Hub, retries included (the publish job's own limit is 30
#: minutes: the deadline ends it first, with one line).
TRNCAT_PUBLISH_DEADLINE_S: float = _seconds("TRNCAT_PUBLISH_DEADLINE_S", 1200.0)
#: Task modules beside the built-in ones, comma-separated (each a module with its runner and ``SPEC``:
#: :mod:`pipeline.taskspec`); a test's task, seen by the benchmark's child process too.
TRNCAT_TASK_MODULES: str = os.environ.get("TRNCAT_TASK_MODULES", "")
#: True on CI (GitHub Actions sets CI=true): progress bars stay quiet.
IS_CI: bool = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}
#: GitHub Actions provenance, recorded in each result.
GITHUB_RUN_ID: str | None = os.environ.get("GITHUB_RUN_ID") or None
GITHUB_SHA: str | None = os.environ.get("GITHUB_SHA") or None
RUNNER_NAME: str | None = os.environ.get("RUNNER_NAME") or None
#: The machine's name where no instance id or host name tells machines apart: the Neuron emulator's machines on one
#: host (``pipeline.backends.this_machine``; recorded as ``host:<name>``).
TRNCAT_MACHINE: str | None = os.environ.get("TRNCAT_MACHINE") or None
#: Where the schemas live when running from a checkout.
REPO_ROOT: Path = Path(__file__).resolve().parent.parent
#: Neuron settings, recorded by the neuron backend.
NEURON_RT_VISIBLE_CORES: str | None = os.environ.get("NEURON_RT_VISIBLE_CORES") or None
NEURON_LOGICAL_NC_CONFIG: str | None = os.environ.get("NEURON_LOGICAL_NC_CONFIG") or None
#: The neuronx-cc options a Neuron framework forwards to the compiler (docs/neuron-facts.md): a part of the compiled
#: cache's key, recorded in the key manifest of each bundle.
NEURON_CC_FLAGS: str = os.environ.get("NEURON_CC_FLAGS") or ""
#: TorchNeuron's NEFF cache directory of the runner (docs/neuron-facts.md); a benchmark compiles into its own.
TORCH_NEURONX_NEFF_CACHE_DIR: str | None = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or None
#: Whether TorchNeuron falls back to the CPU only for unimplemented ops (not for device execution errors); the
#: benchmark records its value, since it decides what a pass may hide (docs/neuron-facts.md).
TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS: str | None = (
    os.environ.get("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS") or None
)
#: The whole NeuronCore set of one benchmark run, which the parent gives its child: under torchrun each rank
#: reserves only its own core of it (NEURON_RT_VISIBLE_CORES), while the device-memory reads cover all of it.
TRNCAT_NEURON_CORES: str | None = os.environ.get("TRNCAT_NEURON_CORES") or None
#: The toolchain file the runners pin (runners/toolchain.yaml unless set): doctor and the queue compare with it.
TRNCAT_TOOLCHAIN: Path = Path(os.environ.get("TRNCAT_TOOLCHAIN") or REPO_ROOT / "runners" / "toolchain.yaml")
#: Where the machine's fixed paths are read from: /dev, /sys, /etc/os-release and the Neuron runtime's /tmp
#: files. "/" on a real machine; a test's emulated machine (tests/support/neuron/) points it at its root.
TRNCAT_SYSTEM_ROOT: Path = Path(os.environ.get("TRNCAT_SYSTEM_ROOT") or "/")
#: Container image digest of the runner, when the bench runs in one.
TRNCAT_IMAGE_DIGEST: str | None = os.environ.get("TRNCAT_IMAGE_DIGEST") or None
#: Where CPU float32 reference answers are cached (one file per model, revision, task and workload).
TRNCAT_REFERENCE_CACHE: Path = Path(
    os.environ.get("TRNCAT_REFERENCE_CACHE") or Path.home() / ".cache" / "trncat" / "reference"
).expanduser()
#: The GPUs a GPU runner owns (its slice of the instance); the cuda backend runs on the first ones it needs.
CUDA_VISIBLE_DEVICES: str | None = os.environ.get("CUDA_VISIBLE_DEVICES") or None
#: Instance type override (otherwise read from IMDS-free sources such as neuron-ls; a GPU runner sets it so that
#: its rows name their instance, which prices them).
TRNCAT_INSTANCE_TYPE: str | None = os.environ.get("TRNCAT_INSTANCE_TYPE") or None
#: The Hub Space (static) that shows the catalog page, rebuilt from the dataset's main branch (``trncat page``).
TRNCAT_SPACE: str = os.environ.get("TRNCAT_SPACE") or "trncat/catalog"
#: The Hub model repo that ``trncat publish`` uploads the compiled-cache bundles of passing CI Neuron rows to
#: (``--compiled-repo`` overrides it).
TRNCAT_COMPILED_REPO: str = os.environ.get("TRNCAT_COMPILED_REPO") or "trncat/trncat-compiled"
#: The Hub dataset ``trncat check`` reads when given none (its merged main).
TRNCAT_DATASET: str = os.environ.get("TRNCAT_DATASET") or "trncat/results"
