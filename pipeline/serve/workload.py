"""The serving workload contract and the service level a row's headline is read at.

The contract is InferenceX's (so a row can be set beside theirs): random prompts at a fixed input and output
length with a range ratio, ignore-EOS, warm-up requests at twice the concurrency, and a sweep of concurrencies
1, 2, 4 ... 256 that stops early when a point's success rate falls. The service level is MLPerf Inference's
Llama-3.1-8B server limits by default (TTFT p99 <= 2 s, >= 10 tok/s per user at p99), kept in the record so a
reader can recompute the headline at another.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.errors import ConfigError

#: The concurrencies of a full sweep (InferenceX's 1 ... 256, doubling).
FULL_CONCURRENCIES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: A point whose success rate is below this ends the sweep (the engine cannot take more).
MIN_SUCCESS_RATE = 0.99
#: The random-prompt dataset, as the load generator names it.
DATASET = "random (guidellm synthetic_text)"


@dataclass(frozen=True)
class ServingWorkload:
    """One serving workload.

    Args:
        name: Its label ("1k/1k", "8k/1k", "cpu-tiny").
        input_tokens: Mean prompt length in tokens.
        output_tokens: Output length in tokens (ignore-EOS: every request generates exactly this many, where the
            engine honours it).
        range_ratio: Prompt lengths are drawn from [input x (1 - range_ratio), input] (InferenceX's
            ``--random-range-ratio``); 0 is fixed.
        concurrencies: The sweep, ascending.
        measured_per_stream: Measured requests per concurrent stream at each point (on top of the warm-ups).
        warmup_per_stream: Warm-up requests per stream (2: twice the concurrency).
        seed: The dataset's seed.
    """

    name: str
    input_tokens: int
    output_tokens: int
    range_ratio: float = 0.8
    concurrencies: tuple[int, ...] = FULL_CONCURRENCIES
    measured_per_stream: int = 6
    warmup_per_stream: int = 2
    seed: int = 42

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "measured_per_stream"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"serving workload {name} must be a positive integer, got {value!r}")
        if isinstance(self.warmup_per_stream, bool) or not isinstance(self.warmup_per_stream, int):
            raise ConfigError(f"serving workload warmup_per_stream must be an integer: {self.warmup_per_stream!r}")
        if self.warmup_per_stream < 0:
            raise ConfigError("serving workload warmup_per_stream must be >= 0")
        if not 0 <= self.range_ratio < 1:
            raise ConfigError(f"serving workload range_ratio must be in [0, 1), got {self.range_ratio!r}")
        levels = self.concurrencies
        if not levels or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in levels):
            raise ConfigError(f"serving concurrencies must be positive integers, got {levels!r}")
        if list(levels) != sorted(set(levels)):
            raise ConfigError(f"serving concurrencies must be strictly ascending, got {levels!r}")

    @property
    def input_min(self) -> int:
        """The shortest prompt the range ratio allows."""
        return max(1, int(self.input_tokens * (1 - self.range_ratio)))

    def requests_at(self, concurrency: int) -> int:
        """Requests sent at one point: warm-ups plus measured."""
        return (self.warmup_per_stream + self.measured_per_stream) * concurrency

    def warmups_at(self, concurrency: int) -> int:
        return self.warmup_per_stream * concurrency

    def to_record(self) -> dict[str, Any]:
        out = asdict(self)
        out["concurrencies"] = list(self.concurrencies)
        out["dataset"] = DATASET
        out["ignore_eos"] = True
        out["warmups"] = f"{self.warmup_per_stream} x concurrency"
        return out


#: InferenceX's two real-model workloads, and the small pair the CPU tests and the demo serve.
WORKLOADS: dict[str, ServingWorkload] = {
    "1k/1k": ServingWorkload(name="1k/1k", input_tokens=1024, output_tokens=1024),
    "8k/1k": ServingWorkload(name="8k/1k", input_tokens=8192, output_tokens=1024),
    "cpu-tiny": ServingWorkload(
        name="cpu-tiny", input_tokens=24, output_tokens=8, range_ratio=0.25, concurrencies=(1, 2, 4)
    ),
}


def serving_workload(name: str) -> ServingWorkload:
    """The named workload.

    Raises:
        ConfigError: no such workload.
    """
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ConfigError(f"unknown serving workload {name!r} (known: {', '.join(WORKLOADS)})") from None


@dataclass(frozen=True)
class ServiceLevel:
    """The service level a row's headline is read at: a point meets it when its TTFT at ``percentile`` is at
    most ``ttft_s`` and its tokens per second per user at that percentile (1 / TPOT) at least ``tok_s_per_user``."""

    ttft_s: float = 2.0
    tok_s_per_user: float = 10.0
    percentile: str = "p99"
    source: str = field(default="MLPerf Inference Llama-3.1-8B server latency limits (the catalog's default)")

    def __post_init__(self) -> None:
        if self.percentile not in ("p50", "p90", "p99"):
            raise ConfigError(f"service level percentile must be p50, p90 or p99, got {self.percentile!r}")
        if not (self.ttft_s > 0 and self.tok_s_per_user > 0):
            raise ConfigError("service level limits must be positive")

    def to_record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, value: dict[str, Any]) -> ServiceLevel:
        return cls(**{k: value[k] for k in ("ttft_s", "tok_s_per_user", "percentile", "source")})


DEFAULT_SLO = ServiceLevel()
