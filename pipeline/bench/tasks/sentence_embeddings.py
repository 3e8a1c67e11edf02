"""sentence-embeddings: a sentence-transformers model encodes fixed sentences of exactly ``input_tokens`` tokens.

Run as its users run it: ``SentenceTransformer(folder, device=..., trust_remote_code=False)`` and ``encode()``.
Every sentence is longer than the workload and the model's ``max_seq_length`` is set to ``input_tokens``, so
every input is cut to exactly ``input_tokens`` tokens (special tokens included) and the shapes never change:
one compiled graph per batch size, nothing recompiles in the timed calls. On a compiling backend the library's
own module is compiled in place with ``SentenceTransformer.compile`` (``torch.compile`` on its forward, which
``encode()`` calls), ``dynamic=False``.

Measured: latency p50/p90 of one ``encode()`` at each of ``workload.batch_sizes`` (1 and 32), sentences/s at
``workload.batch_size`` (32), the embedding dimension. The answer checked is the batch's embeddings
(float32), against the CPU float32 reference by cosine (the smallest over the batch).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, ClassVar

from pipeline.bench.tasks.base import PROMPT_TEXT, Measured, OneCoreTask, Run, quantiles, save_output, timed_calls


def sentences(tokenizer: Any, *, count: int, n_tokens: int) -> list[str]:
    """``count`` different sentences, each longer than ``n_tokens`` tokens (so truncation cuts every one to
    exactly ``n_tokens``): the prompt text repeated, each starting a few words further on."""
    words = PROMPT_TEXT.split()
    out: list[str] = []
    for index in range(count):
        shift = (3 * index) % len(words)
        text = " ".join(words[shift:] + words[:shift])
        while len(tokenizer(text, add_special_tokens=True)["input_ids"]) <= n_tokens:
            text = f"{text} {text}"
        out.append(text)
    return out


class SentenceEmbeddings(OneCoreTask):
    library: ClassVar[str] = "sentence-transformers"

    def load_pipeline(self, path: Path, *, dtype: Any) -> Any:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(
            str(path), device="cpu", trust_remote_code=False, local_files_only=True, model_kwargs={"dtype": dtype}
        )
        return model.eval()

    def setup(self, run: Run) -> None:
        workload = run.spec.workload
        run.model.max_seq_length = workload.input_tokens
        batch_sizes = workload.batch_sizes or (workload.batch_size,)
        texts = sentences(run.model.tokenizer, count=max(batch_sizes), n_tokens=workload.input_tokens)
        run.state["batches"] = {size: texts[:size] for size in batch_sizes}

    def _encode(self, run: Run, size: int) -> Any:
        texts = run.state["batches"][size]
        return run.model.encode(texts, batch_size=size, convert_to_tensor=True, show_progress_bar=False)

    def call(self, run: Run) -> None:
        for size in run.state["batches"]:  # the first call compiles one graph per batch size
            self._encode(run, size)

    def measure(self, run: Run) -> Measured:
        spec = run.spec
        by_batch: list[dict[str, Any]] = []
        raw: dict[str, list[float]] = {}
        for size in run.state["batches"]:
            times = timed_calls(functools.partial(self._encode, run, size), run)
            raw[str(size)] = times
            by_batch.append({"batch_size": size, **quantiles(times)})
        main = next(item for item in by_batch if item["batch_size"] == spec.workload.batch_size)
        dimension = int(self._encode(run, 1).shape[-1])
        return Measured(
            metrics={
                "latency_s": {"p50": main["p50"], "p90": main["p90"]},
                "latency_by_batch_s": by_batch,
                "sentences_per_s": spec.workload.batch_size / main["p50"] if main["p50"] > 0 else None,
                "embedding_dim": dimension,
            },
            steady_s=sum(item["p50"] for item in by_batch),
            extra={"latencies_by_batch_s": raw},
        )

    def capture(self, run: Run, path: Path, *, perturb: bool = False) -> None:
        """Save the embeddings of the workload's batch (``torch.save``: ``{"output": [batch, dim]}``)."""
        embeddings = self._encode(run, run.spec.workload.batch_size).detach().float().cpu()
        save_output(embeddings, path, perturb=perturb)
