"""What a task implements. Tasks run in the benchmark child, so they may import torch and transformers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pipeline.workload import Workload

#: Text the prompts are cut from: long enough for any workload once repeated.
PROMPT_TEXT = (
    "Engineers want to know, in minutes rather than weeks, whether a model runs on Trainium, how many "
    "NeuronCores it needs, how long it takes to compile and how fast it generates. "
)


class TaskRunner:
    """One Hub pipeline task (``text-generation``, ``image-text-to-text``, ...)."""

    name: ClassVar[str] = ""
    #: transformers auto class that loads the model.
    auto_model: ClassVar[str] = ""

    def load_model(self, path: Path, *, dtype: Any, **kwargs: Any) -> Any:
        """Load the model from a local folder with transformers' own code (never remote code).

        Extra ``kwargs`` go to ``from_pretrained`` (e.g. ``tp_plan="auto"`` under torchrun).
        """
        import transformers

        kwargs["trust_remote_code"] = False
        auto = getattr(transformers, self.auto_model)
        return auto.from_pretrained(path, dtype=dtype, **kwargs).eval()

    def load_processor(self, path: Path) -> Any:
        raise NotImplementedError

    def make_inputs(self, processor: Any, workload: Workload) -> dict[str, Any]:
        """Tensors for one call on the fixed workload (on the CPU; the harness moves them)."""
        raise NotImplementedError

    def prompt_ids(self, tokenizer: Any, n_tokens: int) -> list[int]:
        """Exactly ``n_tokens`` token ids cut from :data:`PROMPT_TEXT` repeated."""
        ids: list[int] = []
        text = PROMPT_TEXT
        while len(ids) < n_tokens:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            text += PROMPT_TEXT
        return ids[:n_tokens]

    def generate_kwargs(self, processor: Any, workload: Workload) -> dict[str, Any]:
        """Greedy decoding of exactly ``output_tokens`` tokens (end-of-sequence ignored)."""
        tokenizer = getattr(processor, "tokenizer", processor)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        return {
            "max_new_tokens": workload.output_tokens,
            "min_new_tokens": workload.output_tokens,
            "do_sample": False,
            "pad_token_id": pad,
        }
