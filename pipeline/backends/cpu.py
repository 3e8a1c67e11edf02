"""CPU backend: eager PyTorch, host memory only. Runs anywhere; the demo and the tests use it."""

from __future__ import annotations

import functools
import platform
import time
from pathlib import Path
from typing import Any, ClassVar

from pipeline.backends.base import Backend, hardware_record


def _cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()[:200] or platform.processor() or "cpu"
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


@functools.cache
def measure_copy_bandwidth(*, size_bytes: int = 256 * 1024 * 1024, repeats: int = 3) -> float:
    """Host memory bandwidth in bytes/s from a large tensor copy (read + write counted), best of ``repeats``."""
    import torch

    src = torch.empty(size_bytes // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return 2 * size_bytes / best


class CpuBackend(Backend):
    name: ClassVar[str] = "cpu"
    default_dtype: ClassVar[str] = "float32"
    pins_torchvision: ClassVar[bool] = False

    def hardware(self, *, cores: int) -> dict[str, Any]:
        return hardware_record(name=f"cpu-{platform.machine().lower() or 'unknown'}", accelerator=_cpu_model_name())

    def bandwidth_bytes_per_s(self, *, cores: int) -> float | None:
        return measure_copy_bandwidth()

    def device(self) -> Any:
        import torch

        return torch.device("cpu")
