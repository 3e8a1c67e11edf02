"""The interface every backend implements, with the defaults most of them share."""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from typing import Any, ClassVar

import pipeline


def package_version(name: str) -> str | None:
    """Installed version of distribution ``name`` without importing it, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class Backend:
    """One kind of device. Subclasses override what differs; the harness calls only these methods.

    The methods that touch torch are called in the benchmark child process only, so importing a backend
    module never imports torch or a device runtime.
    """

    name: ClassVar[str] = ""
    #: `torch.compile` backend name, or None when the model runs eagerly.
    compile_backend: ClassVar[str | None] = None

    # -- parent side: no torch needed -------------------------------------------------------------
    def check_available(self) -> None:
        """Raise :class:`pipeline.errors.BackendUnavailableError` (one clear line) when unusable here."""

    def environment(self, *, cores: int) -> dict[str, str]:
        """Environment variables the benchmark child needs for ``cores`` cores."""
        return {}

    def launcher(self, *, cores: int) -> list[str] | None:
        """Command prefix that starts the child on ``cores`` cores (e.g. torchrun), or None for plain python."""
        return None

    def versions(self) -> dict[str, str | None]:
        """Versions recorded in every result of this backend (package metadata, no imports)."""
        return {
            "pipeline": pipeline.__version__,
            "python": platform.python_version(),
            "torch": package_version("torch") or "unknown",
            "transformers": package_version("transformers") or "unknown",
            "torch_neuronx": None,
            "neuronx_cc": None,
            "runtime": None,
            "driver": None,
            "sdk": None,
            "container_image": None,
            "cuda": None,
        }

    def hardware(self, *, cores: int) -> dict[str, Any]:
        """The record's ``hardware`` object."""
        raise NotImplementedError

    def bandwidth_bytes_per_s(self, *, cores: int) -> float | None:
        """Memory bandwidth available to ``cores`` cores, for the roofline; None when unknown."""
        return None

    # -- child side: torch imported -----------------------------------------------------------------
    def device(self) -> Any:
        """The torch device models and inputs go to."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait for queued device work (timings are only true after it)."""

    def reset_peak_memory(self) -> None:
        """Start a fresh peak-memory window."""

    def peak_memory_bytes(self) -> int | None:
        """Peak device memory since the last reset, or None when the backend has no device memory."""
        return None

    def prepare(self, model: Any) -> Any:
        """Move ``model`` to the device and compile it when the backend compiles; returns the model to call."""
        return model.to(self.device())


def python_executable() -> str:
    return sys.executable
