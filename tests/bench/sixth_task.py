"""A sixth task, declared in this one module: text classification (a tiny BERT classifier, built locally).

``TRNCAT_TASK_MODULES=tests.bench.sixth_task`` is its registry line (:mod:`pipeline.taskspec`); nothing else in
trncat names it. :func:`main` runs it through a CPU bench, validation, the Parquet dataset and the page's columns
(in a process of its own, so that every list derived from the registry includes it) and prints what it saw.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

from pipeline.bench.tasks.base import Measured, Run, TaskRunner, percentile, timed_calls
from pipeline.taskspec import Cost, Field, Metric, Speed, TaskSource, TaskSpec
from pipeline.workload import Workload

NAME = "text-classification"

SPEC = TaskSpec(
    NAME,
    "Text classification",
    f"{__name__}:TextClassification",
    Workload(batch_size=2, input_tokens=16, output_tokens=0),
    TaskSource("transformers", (NAME,), cosine_field="label_cosine", answer="class logits", tensor_parallel=False),
    Cost("cost_usd_per_million_texts", "texts_per_s", 1e6, False, "$ / 1M texts", "USD per million texts"),
    fields=(
        Field("texts_per_s", ("metrics", "texts_per_s"), unit="texts classified per second", figure=True),
        Field("num_labels", ("metrics", "num_labels"), "int64", unit="classes"),
        Field("agreement_label_cosine", ("agreement", "label_cosine")),
    ),
    metrics=(
        Metric("tcps", "Texts/s", "texts classified per second", "rate", column="texts_per_s", digits=2),
        Metric("nl", "Classes", "number of classes", "int", column="num_labels"),
    ),
    speed=Speed("texts_per_s", "tcps", "Texts/s", "rate"),
)


class TextClassification(TaskRunner):
    auto_model: ClassVar[str] = "AutoModelForSequenceClassification"

    def load_processor(self, path: Path) -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True)

    def setup(self, run: Run) -> None:
        w = run.spec.workload
        texts = ["a tiny model classifies this text"] * w.batch_size
        inputs = run.processor(texts, padding="max_length", truncation=True, max_length=w.input_tokens,
                               return_tensors="pt")  # fmt: skip
        run.state["inputs"] = {k: v.to(run.backend.device()) for k, v in inputs.items()}

    def _forward(self, run: Run) -> Any:
        import torch

        with torch.no_grad():
            return run.model(**run.state["inputs"]).logits

    def call(self, run: Run) -> None:
        self._forward(run)

    def measure(self, run: Run) -> Measured:
        times = timed_calls(lambda: self._forward(run), run)
        p50, labels = percentile(times, 50), int(self._forward(run).shape[-1])
        return Measured(
            metrics={"latency_s": {"p50": p50, "p90": percentile(times, 90)},
                     "texts_per_s": run.spec.workload.batch_size / p50, "num_labels": labels},
            steady_s=p50,
        )  # fmt: skip

    def capture(self, run: Run, path: Path, *, perturb: bool = False) -> None:
        import torch

        torch.save({"output": self._forward(run).float().cpu()}, path)


def build_tiny_classifier(folder: Path) -> Path:
    """A 2-layer BERT with a 3-class head and the tiny tokenizer, saved into ``folder``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from pipeline.testing.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id,
                        num_labels=3, architectures=["BertForSequenceClassification"])  # fmt: skip
    torch.manual_seed(0)
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def main(root: Path) -> dict[str, Any]:
    """Bench the tiny classifier on the CPU, validate its record, build the dataset and read the page's columns."""
    from pipeline.backends import get_backend
    from pipeline.bench import BenchOptions, bench_model
    from pipeline.dataset import LatestBatches, build, read_latest
    from pipeline.page import LATEST_READ, render_page, table_metrics
    from pipeline.page.cells import rate_text
    from pipeline.records import validate_record

    model = build_tiny_classifier(root / "tiny-classifier")
    record = bench_model(
        str(model), task=NAME, backend=get_backend("cpu"), out=root / "record.json", options=BenchOptions(iterations=2)
    )
    build([record], root / "dataset")
    (row,) = read_latest(root / "dataset")
    page = render_page(
        latest=LatestBatches(root / "dataset", LATEST_READ), history=[], rankings=[], exclusions=[], scripts={}
    )
    return {
        "record": record,
        "problems": [str(p) for p in validate_record(record)],
        "row": {k: v for k, v in row.items() if k in ("task", "status", "texts_per_s", "num_labels",
                                                      "cost_usd_per_million_texts", "agreement_label_cosine")},
        "table": [m.key for m in table_metrics(NAME)],
        "speed_text": rate_text(round(record["metrics"]["texts_per_s"], 2)),
        "page_row": next(r for r in re.findall(r"<tr[^>]*>.*?</tr>", page, re.S) if "tiny-classifier" in r),
        "page_heads": re.findall(r"<th[^>]*>(.*?)</th>", page, re.S),
    }  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), default=str))
