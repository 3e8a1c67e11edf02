"""text-to-image: a diffusers pipeline denoises a fixed prompt into one image at the model's resolution.

Registered so that discovery, the workload and the schema know the task; the benchmark child does not run it
yet (``pipeline.workload.TASK_SOURCES`` marks it not benchmarked, and :class:`pipeline.bench.spec.BenchSpec`
refuses it), because the test and runner toolchain has no diffusers. The refusal of pipelines that name code
outside diffusers and transformers (:func:`pipeline.bench.models.check_pipeline_classes`) needs no diffusers.
"""

from __future__ import annotations

from typing import ClassVar

from pipeline.bench.tasks.base import TaskRunner


class TextToImage(TaskRunner):
    name: ClassVar[str] = "text-to-image"
