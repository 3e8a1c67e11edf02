"""Publishing 100 new rows into a dataset of 10k rows and of 1M rows on the local hub: time, HTTP requests
and bytes downloaded per publish, beside the same publish done with ``datasets.Dataset.push_to_hub`` of the
whole results split (every row, old and new).

Publishing must be O(new rows), not O(dataset): the history (data/results) is never downloaded or rewritten;
a publish reads ``data/summary.json`` and the latest shards its rows touch, and writes the results file, those
shards, the scripts and the card. Both datasets have the same number of models (``--keys``), so the 1M-row one
is a long history (many runs per model): what grows with time. Goals: the ratio of the two times <= 1.5;
<= 20 requests and <= 1 MB downloaded per publish at both sizes; faster than push_to_hub at 10k rows.

    python benchmarks/publish_scale.py [--keys 1000] [--new 100] [--sizes 10000 1000000] [--no-push-to-hub]
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
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
PUSH_REPO = "bench/pushed"
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


@dataclass
class Figures:
    seconds: float
    requests: int
    downloaded: int


def _counting(local: LocalHub) -> tuple[int, int]:
    return len(local.server.requests), len(local.server.sent_bytes)


def _since(local: LocalHub, mark: tuple[int, int], seconds: float) -> Figures:
    return Figures(seconds, len(local.server.requests) - mark[0], sum(local.server.sent_bytes[mark[1] :]))


def push_whole_split(records: list[dict], *, local: LocalHub, work: Path) -> tuple[Figures, Figures]:
    """The naive publish: read the whole results split from the Hub, add the new rows, ``push_to_hub`` it all.

    Returns:
        The push alone (the split already in memory), and the whole publish (reading the split first).
    """
    import datasets
    from huggingface_hub import snapshot_download

    # datasets reads the endpoint once, at import: point it at this run's local hub.
    datasets.config.HF_ENDPOINT = local.url

    mark = _counting(local)
    start = time.perf_counter()
    folder = snapshot_download(REPO, repo_type="dataset", allow_patterns=[f"{RESULTS_DIR}/*"], local_dir=work / "pull")
    old = pq.read_table(sorted((Path(folder) / RESULTS_DIR).glob("*.parquet")), schema=arrow_schema())
    table = pa.concat_tables([old, pa.Table.from_pylist([flatten(r) for r in records], schema=arrow_schema())])
    split = datasets.Dataset(table)
    read = _since(local, mark, time.perf_counter() - start)
    local.store.create_repo(PUSH_REPO, repo_type="dataset")
    mark = _counting(local)
    start = time.perf_counter()
    split.push_to_hub(PUSH_REPO, token="bench")
    push = _since(local, mark, time.perf_counter() - start)
    whole = Figures(read.seconds + push.seconds, read.requests + push.requests, read.downloaded + push.downloaded)
    return push, whole


def measure(
    rows: int, *, keys: int, new: int, work: Path, push: bool
) -> tuple[Figures, tuple[Figures, Figures] | None]:
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
            hub.whoami()  # huggingface_hub's once-per-process requests are not the publish's
            mark = _counting(local)
            start = time.perf_counter()
            result = publish(records, repo=REPO, hub=hub)
            ours = _since(local, mark, time.perf_counter() - start)
            assert result.published and result.summary.added == new, result
            return ours, push_whole_split(records, local=local, work=work) if push else None
        finally:
            restore()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1000, help="models (latest rows) in both datasets")
    parser.add_argument("--new", type=int, default=100, help="new rows to publish")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=1, help="interleaved repeats; the best time counts")
    parser.add_argument("--no-push-to-hub", action="store_true", help="skip the datasets.push_to_hub comparison")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    times: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="trncat-publish-scale-") as tmp:
        for rows in [size for _ in range(args.repeat) for size in args.sizes]:
            ours, pushed = measure(rows, keys=args.keys, new=args.new, work=Path(tmp), push=not args.no_push_to_hub)
            times[rows] = min(ours.seconds, times.get(rows, ours.seconds))
            print(
                f"trncat publish of {args.new} new rows into {rows:>9,} rows ({args.keys} models): "
                f"{ours.seconds:.2f} s, {ours.requests} HTTP requests, {ours.downloaded / 1e6:.3f} MB downloaded"
            )
            if pushed is not None:
                for name, figures in zip(("push_to_hub alone", "read split + push_to_hub"), pushed, strict=True):
                    print(
                        f"{name:<26} of the whole split ({rows + args.new:>9,} rows): {figures.seconds:.2f} s, "
                        f"{figures.requests} HTTP requests, {figures.downloaded / 1e6:.3f} MB downloaded"
                    )
            ok = ours.requests <= 20 and ours.downloaded <= 1e6
            print(f"  goal <= 20 requests and <= 1 MB: {'met' if ok else 'NOT met'}")
    small, large = times[min(times)], times[max(times)]
    print(f"ratio {max(times):,} / {min(times):,} rows: {large / small:.2f} (goal <= 1.5)")


if __name__ == "__main__":
    main()
