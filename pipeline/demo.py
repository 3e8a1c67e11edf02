"""``trncat demo``: the whole flow offline on this machine, on tiny models it builds."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.bench.run import bench_model
from pipeline.dataset import build
from pipeline.records import validate_paths
from pipeline.testing.tiny import build_tiny_llama, build_tiny_llava

DEMO_MODELS: tuple[tuple[str, str, Callable[[Path], Path]], ...] = (
    ("trncat-demo/tiny-llama", "text-generation", build_tiny_llama),
    ("trncat-demo/tiny-llava", "image-text-to-text", build_tiny_llava),
)


@dataclass
class DemoSummary:
    out: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    invalid: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.invalid == 0 and all(r["status"] == "pass" for r in self.records)

    def table(self) -> str:
        header = f"{'model':<28} {'task':<20} {'status':<8} {'load s':>7} {'ttft ms':>8} {'tok/s':>8} {'wall s':>7}"
        lines = [header, "-" * len(header)]
        for record in self.records:
            m = record["metrics"]

            def fmt(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
                return "-" if value is None else f"{value * scale:.{digits}f}"

            lines.append(
                f"{record['model_id']:<28} {record['task']:<20} {record['status']:<8} {fmt(m['load_s']):>7} "
                f"{fmt(m['ttft_s'], 1000, 1):>8} {fmt(m['decode_tokens_per_s'], digits=0):>8} {fmt(m['wall_s']):>7}"
            )
        lines.append(
            f"\ndataset written to {self.out}/ in {self.seconds:.0f} s (data/results, data/latest, scripts/, README.md)"
        )
        return "\n".join(lines)


def run_demo(*, out: Path, work: Path | None = None, echo: Callable[[str], None] = lambda _: None) -> DemoSummary:
    """Build tiny models, bench them on cpu, validate the records, build the dataset folder ``out``."""
    start = time.perf_counter()
    temporary = work is None
    work = Path(tempfile.mkdtemp(prefix="trncat-demo-")) if work is None else work
    summary = DemoSummary(out=out)
    try:
        results = work / "results"
        results.mkdir(parents=True, exist_ok=True)
        total = len(DEMO_MODELS)
        for index, (model_id, task, builder) in enumerate(DEMO_MODELS, 1):
            echo(f"[{index}/{total}] building {model_id} ({task})")
            folder = builder(work / "models" / model_id.split("/")[1])
            echo(f"[{index}/{total}] benchmarking {model_id} on cpu")
            record = bench_model(
                str(folder),
                task=task,
                device="cpu",
                model_id=model_id,
                out=results / f"{model_id.replace('/', '__')}.json",
                iterations=5,
            )
            echo(f"[{index}/{total}] {model_id}: {record['status']}")
        echo("validating records")
        report = validate_paths([results])
        summary.invalid = len(report.bad_files)
        for problem in report.problems:
            echo(f"invalid: {problem}")
        summary.records = [record for _, record in report.records]
        echo(f"building the dataset in {out}")
        build(summary.records, out)
    finally:
        if temporary:
            shutil.rmtree(work, ignore_errors=True)
    summary.seconds = time.perf_counter() - start
    return summary
