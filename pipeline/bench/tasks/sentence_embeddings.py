"""sentence-embeddings: a sentence-transformers model encodes fixed sentences of exactly ``input_tokens`` tokens.

Registered so that discovery, the workload and the schema know the task; the benchmark child does not run it
yet (``pipeline.workload.TASK_SOURCES`` marks it not benchmarked, and :class:`pipeline.bench.spec.BenchSpec`
refuses it), because the test and runner toolchain has no sentence-transformers.
"""

from __future__ import annotations

from typing import ClassVar

from pipeline.bench.tasks.base import TaskRunner


class SentenceEmbeddings(TaskRunner):
    name: ClassVar[str] = "sentence-embeddings"
