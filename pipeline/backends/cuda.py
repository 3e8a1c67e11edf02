"""CUDA backend: the same harness on NVIDIA GPUs, so the catalog pattern serves other accelerators too.

Eager by default (``compile_s`` is 0); a spec with ``compile=True`` compiles ``generate()``'s decode step
with inductor over a static cache. A "core" is a GPU. The parent learns about the GPU from a short probe
subprocess, so it never imports torch itself.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from pipeline import constants
from pipeline.backends.base import Backend, hardware_record, sum_across_ranks, world_of
from pipeline.errors import BackendUnavailableError, ConfigError

#: Peak HBM bandwidth per GPU in bytes/s (vendor datasheets, decimal units), matched in order on the
#: lowercased device name; the first match wins, so the specific variants come first.
BANDWIDTH_TABLE: tuple[tuple[str, float], ...] = (
    (r"\bb200\b", 8.0e12),
    (r"\bh200\b", 4.8e12),
    (r"\bh100\b.*\bnvl\b", 3.9e12),
    (r"\bh100\b.*\bpcie\b", 2.0e12),
    (r"\bh100\b", 3.35e12),
    (r"\ba100\b.*80\s*gb", 2.039e12),
    (r"\ba100\b", 1.555e12),
    (r"\bl40s\b", 864e9),
    (r"\ba10g\b", 600e9),
    (r"\bl4\b", 300e9),
)

_PROBE = "import json; from pipeline.backends.cuda import gpu_facts; print(json.dumps(gpu_facts()))"


def gpu_facts() -> dict[str, Any]:
    """Count, name, memory and CUDA version of the visible GPUs (imports torch)."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    props = torch.cuda.get_device_properties(0) if count else None
    return {
        "count": count,
        "name": props.name if props else None,
        "total_memory": int(props.total_memory) if props else None,
        "cuda": torch.version.cuda,
    }


def probe_gpus(timeout_s: float = 120.0) -> dict[str, Any]:
    """Count, name and memory of the GPUs, from a child python (torch stays out of the parent)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {"count": 0}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {"count": 0}


def hardware_name(device_name: str) -> str:
    """Record-safe name of a GPU: ``"NVIDIA H200"`` -> ``"nvidia-h200"``."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")
    return (slug or "cuda")[:64]


def gpu_bandwidth(device_name: str) -> float | None:
    """Peak memory bandwidth of one GPU in bytes/s from :data:`BANDWIDTH_TABLE`, or None when unknown."""
    return next((bandwidth for pattern, bandwidth in BANDWIDTH_TABLE if re.search(pattern, device_name.lower())), None)


class CudaBackend(Backend):
    name: ClassVar[str] = "cuda"
    compile_backend: ClassVar[str | None] = "inductor"
    shards_over_cores: ClassVar[bool] = True

    def __init__(self, *, probe: Callable[[], dict[str, Any]] = probe_gpus) -> None:
        self._probe = probe

    @functools.cached_property
    def gpus(self) -> dict[str, Any]:
        """The probe's answer: ``count``, ``name``, ``total_memory``, ``cuda``."""
        if self._probe is probe_gpus and "torch" in sys.modules:
            return gpu_facts()  # in the benchmark child torch is loaded already: no second python
        return self._probe()

    def check_available(self) -> None:
        if not self.gpus.get("count"):
            raise BackendUnavailableError("the cuda backend needs an NVIDIA GPU and a CUDA build of torch; none here")

    def environment(self, *, cores: int, compile_cache: Path | None = None) -> dict[str, str]:
        # A GPU runner owns a slice of the instance's GPUs (CUDA_VISIBLE_DEVICES): the run takes the first ones of
        # it, never a neighbour's.
        inherited = [d.strip() for d in (constants.CUDA_VISIBLE_DEVICES or "").split(",") if d.strip()]
        if inherited and len(inherited) < cores:
            raise ConfigError(f"the run needs {cores} GPU(s); this runner owns {len(inherited)}: {','.join(inherited)}")
        devices = inherited[:cores] if inherited else [str(i) for i in range(cores)]
        return {"CUDA_VISIBLE_DEVICES": ",".join(devices)}

    def versions(self) -> dict[str, str | None]:
        versions = super().versions()
        versions["cuda"] = self.gpus.get("cuda")
        return versions

    def hardware(self, *, cores: int) -> dict[str, Any]:
        name = self.gpus.get("name") or "cuda"
        return hardware_record(
            name=hardware_name(name),
            # Set by a GPU runner (runners/setup-runner.sh --class gpu): what prices the row; None elsewhere.
            instance_type=constants.TRNCAT_INSTANCE_TYPE,
            accelerator=name,
            memory_per_core_bytes=self.gpus.get("total_memory"),
            cores_available=self.gpus.get("count") or None,
        )

    def bandwidth_bytes_per_s(self, *, cores: int) -> float | None:
        per_gpu = gpu_bandwidth(self.gpus.get("name") or "")
        return per_gpu * cores if per_gpu else None

    # -- child side ---------------------------------------------------------------------------------
    def device(self) -> Any:
        import torch

        return torch.device("cuda", world_of()[1])

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def reset_peak_memory(self) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats()

    def peak_memory_bytes(self) -> int | None:
        import torch

        torch.cuda.synchronize()
        return sum_across_ranks(int(torch.cuda.max_memory_allocated()))
