"""The serving workload contract and the service level a row's headline is read at.

The contract is InferenceX's (so a row can be set beside theirs): random prompts at a fixed input and output
length with a range ratio, ignore-EOS, warm-up requests at twice the concurrency, and a sweep of concurrencies
1, 2, 4 ... 256 that stops early when a point's success rate falls. The service level is MLPerf Inference's
Llama-3.1-8B server limits by default (TTFT p99 <= 2 s, >= 10 tok/s per user at p99), kept in the record so a
reader can recompute the headline at another.

An image workload (an image-text-to-text model's) is the same contract plus a fixed number of synthetic images per
request at a fixed resolution, made and sent by guidellm itself (its ``synthetic_image`` data, as ``image_url``
content parts of a ``/v1/chat/completions`` request): docs/methodology.md, "Serving rows".
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
#: The synthetic images, as the load generator names and makes them (its defaults: JPEG, a colour gradient).
IMAGE_DATASET = "guidellm synthetic_image"
IMAGE_FORMAT = "jpeg"
IMAGE_CONTENT = "gradient"
#: guidellm 0.8.1 names the images of a row ``image_0``, ``image_1`` ... when it makes more than one, and its column
#: mapper reads a ``_<n>`` suffix as a conversation turn (``GenerativeColumnMapper.column_name_pattern``): the
#: images would go out as turns of a conversation, not as images of one request. One image per request only.
MAX_IMAGES_PER_REQUEST = 1


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
        images_per_request: Synthetic images sent with every request (0: a text workload; at most
            :data:`MAX_IMAGES_PER_REQUEST`).
        image_width / image_height: Their size in pixels (even: guidellm rounds an odd size down to even).
    """

    name: str
    input_tokens: int
    output_tokens: int
    range_ratio: float = 0.8
    concurrencies: tuple[int, ...] = FULL_CONCURRENCIES
    measured_per_stream: int = 6
    warmup_per_stream: int = 2
    seed: int = 42
    images_per_request: int = 0
    image_width: int = 0
    image_height: int = 0

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
        self._check_images()

    def _check_images(self) -> None:
        count, size = self.images_per_request, (self.image_width, self.image_height)
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in (count, *size)):
            raise ConfigError(f"serving workload images must be non-negative integers, got {count!r} of {size!r}")
        if count > MAX_IMAGES_PER_REQUEST:
            raise ConfigError(
                f"serving workload images_per_request {count} > {MAX_IMAGES_PER_REQUEST}: guidellm 0.8.1 sends the "
                "images of a row after the first as turns of a conversation, not as images of one request"
            )
        if count and not all(0 < v <= 8192 and v % 2 == 0 for v in size):
            raise ConfigError(f"serving workload image size must be even and in 2 ... 8192 pixels, got {size!r}")
        if not count and any(size):
            raise ConfigError("serving workload image size is given without images_per_request")

    @property
    def image_tokens_bound(self) -> int:
        """A bound on the prompt tokens the images take, which the engine's context must hold beside the text: one
        token per 14 x 14 patch of the image as sent, for every image (a CLIP ViT-L/14 tower's patch, LLaVA's,
        with no token merging; a model that resizes or merges patches takes fewer)."""
        per_image = -(-self.image_width // 14) * -(-self.image_height // 14)
        return self.images_per_request * per_image

    @property
    def task(self) -> str:
        """The task a record of this workload serves: image-text-to-text when it sends images."""
        return "image-text-to-text" if self.images_per_request else "text-generation"

    @property
    def input_min(self) -> int:
        """The shortest prompt the range ratio allows."""
        return max(1, int(self.input_tokens * (1 - self.range_ratio)))

    def to_record(self) -> dict[str, Any]:
        out = asdict(self)
        out["concurrencies"] = list(self.concurrencies)
        out["dataset"] = DATASET
        out["ignore_eos"] = True
        out["warmups"] = f"{self.warmup_per_stream} x concurrency"
        for name in ("images_per_request", "image_width", "image_height"):
            del out[name]
        if self.images_per_request:
            out["images"] = {
                "per_request": self.images_per_request,
                "width": self.image_width,
                "height": self.image_height,
                "format": IMAGE_FORMAT,
                "content": IMAGE_CONTENT,
                "dataset": IMAGE_DATASET,
            }
        return out

    @classmethod
    def from_record(cls, value: dict[str, Any]) -> ServingWorkload:
        """The workload a record's ``serving.workload`` describes (serve.sh rebuilds its scenario from it)."""
        images = value.get("images") or {}
        return cls(
            name=str(value["name"]),
            input_tokens=int(value["input_tokens"]),
            output_tokens=int(value["output_tokens"]),
            range_ratio=float(value["range_ratio"]),
            concurrencies=tuple(int(c) for c in value["concurrencies"]),
            measured_per_stream=int(value["measured_per_stream"]),
            warmup_per_stream=int(value["warmup_per_stream"]),
            seed=int(value["seed"]),
            images_per_request=int(images.get("per_request") or 0),
            image_width=int(images.get("width") or 0),
            image_height=int(images.get("height") or 0),
        )


#: InferenceX's two real-model workloads, the image one (1k/1k plus one 1280 x 720 image, guidellm's own "720p"
#: preset), and the small ones the CPU tests and the demo serve (the tiny Llava's: one 64 x 48 image).
WORKLOADS: dict[str, ServingWorkload] = {
    "1k/1k": ServingWorkload(name="1k/1k", input_tokens=1024, output_tokens=1024),
    "8k/1k": ServingWorkload(name="8k/1k", input_tokens=8192, output_tokens=1024),
    "1k/1k-image": ServingWorkload(
        name="1k/1k-image",
        input_tokens=1024,
        output_tokens=1024,
        images_per_request=1,
        image_width=1280,
        image_height=720,
    ),  # fmt: skip
    "cpu-tiny": ServingWorkload(
        name="cpu-tiny", input_tokens=24, output_tokens=8, range_ratio=0.25, concurrencies=(1, 2, 4)
    ),
    "cpu-tiny-image": ServingWorkload(
        name="cpu-tiny-image",
        input_tokens=24,
        output_tokens=8,
        range_ratio=0.25,
        concurrencies=(1, 2),
        images_per_request=1,
        image_width=64,
        image_height=48,
    ),  # fmt: skip
}
#: The image workload a text workload's queue gives a passing image-text-to-text row (the same text contract).
IMAGE_WORKLOADS: dict[str, str] = {"1k/1k": "1k/1k-image", "cpu-tiny": "cpu-tiny-image"}


def serving_workload(name: str) -> ServingWorkload:
    """The named workload.

    Raises:
        ConfigError: no such workload.
    """
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ConfigError(f"unknown serving workload {name!r} (known: {', '.join(WORKLOADS)})") from None


def image_workload(name: str) -> ServingWorkload | None:
    """The image workload beside the text workload ``name`` (None: it has none)."""
    companion = IMAGE_WORKLOADS.get(name)
    return WORKLOADS[companion] if companion else None


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
