"""Time to publish 100 new rows into a dataset of 1k rows and of 1M rows on the local hub.

Publishing must be O(new rows), not O(dataset): the history (data/results) is never downloaded or rewritten,
only the latest view's shards that the new rows touch, the card and the page. Both datasets have the same
number of models (``--keys``), so the 1M-row one is a long history (many runs per model): what grows with
time. The ratio of the two times must stay <= 1.5.

    python benchmarks/publish_scale.py [--keys 1000] [--new 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import secrets
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.dataset import RESULTS_DIR, build  # noqa: E402
from pipeline.hub import (
    Hub,  # noqa: E402
    point_client_at,
)
from pipeline.localhub import LocalHub  # noqa: E402
from pipeline.publish import publish  # noqa: E402
from pipeline.records import arrow_schema, flatten  # noqa: E402
from pipeline.testing.records import sample_record  # noqa: E402

REPO = "bench/results"
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _record(index: int, when: dt.datetime) -> dict:
    stamp = when.isoformat(timespec="seconds")
    return sample_record(model_id=f"org/model-{index:06d}", run={"started_at": stamp, "finished_at": stamp})


def history_files(rows: int, keys: int, out: Path, *, per_file: int = 50_000) -> None:
    """``rows`` synthetic past results over ``keys`` models, older than anything else, as results files."""
    template = pa.Table.from_pylist([flatten(_record(0, BASE))], schema=arrow_schema())
    written = 0
    while written < rows:
        n = min(per_file, rows - written)
        table = template.take(pa.array([0] * n))
        ids = [secrets.token_hex(32) for _ in range(n)]
        models = [f"org/model-{(written + i) % keys:06d}" for i in range(n)]
        times = [BASE - dt.timedelta(minutes=written + i + 1) for i in range(n)]
        table = table.set_column(table.schema.get_field_index("record_id"), "record_id", pa.array(ids))
        table = table.set_column(table.schema.get_field_index("model_id"), "model_id", pa.array(models))
        finished = pa.array(times, type=pa.timestamp("us", tz="UTC"))
        table = table.set_column(table.schema.get_field_index("finished_at"), "finished_at", finished)
        name = f"{max(times).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(6)}.parquet"
        pq.write_table(table, out / RESULTS_DIR / name, compression="zstd")
        written += n


def measure(rows: int, *, keys: int, new: int, work: Path) -> tuple[float, int]:
    work = Path(tempfile.mkdtemp(dir=work))
    folder = work / f"dataset-{rows}"
    build([_record(i, BASE) for i in range(keys)], folder)
    history_files(rows - keys, keys, folder)
    with LocalHub(work / f"hub-{rows}") as local:
        restore = point_client_at(local.url, cache_dir=work / f"cache-{rows}")
        try:
            local.store.create_repo(REPO, repo_type="dataset")
            files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
            local.store.commit_files(REPO, files, message="seed", repo_type="dataset")
            later = BASE + dt.timedelta(days=1)
            step = max(1, keys // new)
            records = [_record(i * step % keys, later + dt.timedelta(seconds=i)) for i in range(new)]
            hub = Hub(endpoint=local.url, token="bench", cache_dir=work / f"cache-{rows}")
            before = len(local.server.requests)
            start = time.perf_counter()
            result = publish(records, repo=REPO, hub=hub)
            elapsed = time.perf_counter() - start
            assert result.published and result.summary.added == new, result
            return elapsed, len(local.server.requests) - before
        finally:
            restore()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1000, help="models (latest rows) in both datasets")
    parser.add_argument("--new", type=int, default=100, help="new rows to publish")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=2, help="interleaved repeats; the best time counts")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    times = {}
    with tempfile.TemporaryDirectory(prefix="trncat-publish-scale-") as tmp:
        for rows in [size for _ in range(args.repeat) for size in args.sizes]:
            elapsed, requests = measure(rows, keys=args.keys, new=args.new, work=Path(tmp))
            times[rows] = min(elapsed, times.get(rows, elapsed))
            print(
                f"publish {args.new} new rows into {rows:>9,} rows ({args.keys} models): {elapsed:.2f} s, "
                f"{requests} HTTP requests"
            )
    small, large = times[min(times)], times[max(times)]
    print(f"ratio {max(times):,} / {min(times):,} rows: {large / small:.2f} (goal <= 1.5)")


if __name__ == "__main__":
    main()
