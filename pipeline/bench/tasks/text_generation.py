"""text-generation: a causal LM continues a prompt of exactly ``input_tokens`` tokens."""

from __future__ import annotations

from typing import Any, ClassVar

from pipeline.bench.tasks.generation import GenerationTask
from pipeline.workload import Workload


class TextGeneration(GenerationTask):
    auto_model: ClassVar[str] = "AutoModelForCausalLM"
    # The whole prompt is one chunk: generate() runs it through the compiled forward, as AWS's tutorial does.
    prefill: ClassVar[str | None] = "chunked"

    def make_inputs(self, processor: Any, workload: Workload) -> dict[str, Any]:
        import torch

        ids = self.prompt_ids(processor, workload.input_tokens)
        input_ids = torch.tensor([ids] * workload.batch_size, dtype=torch.long)
        return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
