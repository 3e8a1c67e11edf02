"""The fixed workload of each task: what every benchmark of that task runs, recorded in the record."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pipeline.errors import ConfigError
from pipeline.types import TASKS, Task


@dataclass(frozen=True)
class Workload:
    """One benchmark workload.

    Args:
        batch_size: prompts per call.
        input_tokens: prompt length in tokens (text part; image tokens come on top for VLMs).
        output_tokens: tokens generated per call (greedy, no early stop).
        image_size: square image side in pixels, or None for text-only tasks.
    """

    batch_size: int = 1
    input_tokens: int = 128
    output_tokens: int = 64
    image_size: int | None = None

    def __post_init__(self) -> None:
        for name in ("batch_size", "input_tokens", "output_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"workload {name} must be a positive integer, got {value!r}")
        if self.image_size is not None and (not isinstance(self.image_size, int) or self.image_size < 1):
            raise ConfigError(f"workload image_size must be a positive integer or None, got {self.image_size!r}")

    @property
    def total_tokens(self) -> int:
        """Sequence length the KV cache must hold: input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)


DEFAULT_WORKLOADS: dict[str, Workload] = {
    "text-generation": Workload(batch_size=1, input_tokens=128, output_tokens=64),
    "image-text-to-text": Workload(batch_size=1, input_tokens=64, output_tokens=32, image_size=224),
}
assert set(DEFAULT_WORKLOADS) == set(TASKS)


def default_workload(task: Task | str) -> Workload:
    """The catalog's fixed workload for ``task``.

    Raises:
        ConfigError: unknown task.
    """
    try:
        return DEFAULT_WORKLOADS[task]
    except KeyError:
        raise ConfigError(f"unknown task {task!r}; choose from {', '.join(TASKS)}") from None
