"""Publishing 100 new rows into a dataset of 10k rows and of 1M rows on the local hub: time, HTTP requests
and bytes downloaded per publish, beside the same publish done with ``datasets.Dataset.push_to_hub`` of the
whole results split (every row, old and new).

Publishing must be O(new rows), not O(dataset): the history (data/results) is never downloaded or rewritten;
a publish reads ``data/summary.json`` and the latest shards its rows touch, and writes the results file, those
shards, and the scripts and the card where they change. Both datasets have the same number of models
(``--keys``), so the 1M-row one is a long history (many runs per model): what grows with time. Goals: the ratio
of the two times <= 1.5; <= 20 requests and <= 1 MB downloaded per publish at both sizes; faster than
push_to_hub at 10k rows.

The local hub runs in this process and answers at once, so with no added latency the figures are CPU time
(client and server taking turns): what a publish costs the machine. On the real Hub a request takes 100-300 ms,
and what counts is how many wait one after the other; ``--latency-ms`` holds each answer that long (concurrent
requests overlap, as on a network) and measures again. By default both: 0 and 100 ms.

    python benchmarks/publish_scale.py [--keys 1000] [--new 100] [--sizes 10000 1000000] [--repeat 5]
                                       [--latency-ms 0 100] [--no-push-to-hub]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import logging
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline import constants  # noqa: E402
from pipeline.dataset import RESULTS_DIR, CardNames, build  # noqa: E402
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
    #: CPU seconds of the whole process (client, local hub, their threads): steadier than wall time on a busy
    #: machine, since the local hub serves from this process.
    cpu: float = 0.0

    def __add__(self, other: Figures) -> Figures:
        return Figures(
            self.seconds + other.seconds,
            self.requests + other.requests,
            self.downloaded + other.downloaded,
            self.cpu + other.cpu,
        )


@dataclass
class Runs:
    """One way of publishing, measured ``repeat`` times on the same starting state."""

    runs: list[Figures] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(f.seconds for f in self.runs)

    @property
    def median(self) -> float:
        return statistics.median(f.seconds for f in self.runs)

    @property
    def cpu(self) -> float:
        return statistics.median(f.cpu for f in self.runs)

    def line(self, name: str) -> str:
        # The requests and bytes of a run do not vary between runs; the worst one is shown all the same.
        requests, downloaded = max(f.requests for f in self.runs), max(f.downloaded for f in self.runs)
        return (
            f"{name}: median {self.median:.3f} s, best {self.best:.3f} s of {len(self.runs)} "
            f"({' '.join(f'{f.seconds:.3f}' for f in self.runs)}), median CPU {self.cpu:.3f} s, "
            f"{requests} HTTP requests, {downloaded / 1e6:.3f} MB downloaded"
        )


@dataclass(frozen=True)
class Mark:
    requests: int
    answers: int
    wall: float
    cpu: float


def _counting(local: LocalHub) -> Mark:
    """Where the request log stands, right before a timed publish; first, the garbage collector is settled.

    The local hub runs in this process and holds every repo's commits (trees of thousands of entries) in
    memory: a full collection then takes ~70 ms, and it falls at random into one publish's time or the
    other's. The objects alive now (the seeded hub, the split read) are moved out of the collector's sight
    (``gc.freeze``): a publish pays for collecting its own garbage only, as it would beside a remote Hub.
    """
    gc.collect()
    gc.freeze()
    return Mark(len(local.server.requests), len(local.server.sent_bytes), time.perf_counter(), time.process_time())


def _since(local: LocalHub, mark: Mark) -> Figures:
    wall, cpu = time.perf_counter() - mark.wall, time.process_time() - mark.cpu
    requests, downloaded = len(local.server.requests) - mark.requests, sum(local.server.sent_bytes[mark.answers :])
    return Figures(wall, requests, downloaded, cpu)


def push_whole_split(
    records: list[dict], *, repo: str, target: str, local: LocalHub, work: Path
) -> tuple[Figures, Figures]:
    """The naive publish: read the whole results split of ``repo`` from the Hub, add the new rows,
    ``push_to_hub`` it all to ``target``.

    Returns:
        The push alone (the split already in memory), and the whole publish (reading the split first).
    """
    import datasets
    from huggingface_hub import snapshot_download

    mark = _counting(local)
    folder = snapshot_download(repo, repo_type="dataset", allow_patterns=[f"{RESULTS_DIR}/*"], local_dir=work)
    old = pq.read_table(sorted((Path(folder) / RESULTS_DIR).glob("*.parquet")), schema=arrow_schema())
    table = pa.concat_tables([old, pa.Table.from_pylist([flatten(r) for r in records], schema=arrow_schema())])
    split = datasets.Dataset(table)
    read = _since(local, mark)
    mark = _counting(local)
    split.push_to_hub(target, token="bench")
    push = _since(local, mark)
    return push, read + push


def measure(
    rows: int, *, keys: int, new: int, work: Path, push: bool, repeat: int, latencies: tuple[float, ...] = (0.0,)
) -> dict[float, tuple[Runs, Runs, Runs]]:
    """trncat's publish and (``push``) the naive one, ``repeat`` times each, alternating which goes first, for
    each latency (seconds the local hub holds each answer) on the same dataset.

    Each run starts a fresh local hub holding two copies of the same dataset repo, as publishes to the Hub
    leave it (its card names the repo), and each publish goes into its own copy: trncat's as a PR,
    ``push_to_hub``'s onto main (it lists the repo's files and updates the card there, as it would publishing
    into the catalog's dataset). A fresh hub per run: no run finds a file an earlier run uploaded (an empty
    changes file is the same bytes every time). Both run in the same process after the same warm-up (the
    first runs), so neither pays imports or first-use costs the other does not.
    """
    work = Path(tempfile.mkdtemp(dir=work))
    folder = work / f"dataset-{rows}"
    build([_record(i, BASE) for i in range(keys)], folder, names=CardNames(repo=REPO, space=constants.TRNCAT_SPACE))
    history_files(rows - keys, keys, folder)
    files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    return {
        latency: _measure_at(latency, files, keys=keys, new=new, work=work, push=push, repeat=repeat)
        for latency in latencies
    }


def _measure_at(
    latency: float, files: dict[str, Path], *, keys: int, new: int, work: Path, push: bool, repeat: int
) -> tuple[Runs, Runs, Runs]:
    ours, alone, whole = Runs(), Runs(), Runs()
    for run in range(repeat):
        root = work / f"hub-{latency}-{run}"
        with LocalHub(root, latency_s=latency) as local:
            cache = work / f"cache-{latency}-{run}"
            restore = point_client_at(local.url, cache_dir=cache)
            try:
                for repo in (REPO, PUSH_REPO) if push else (REPO,):
                    local.store.create_repo(repo, repo_type="dataset")
                    local.store.commit_files(repo, files, message="seed", repo_type="dataset")
                if push:
                    import datasets

                    # datasets reads the endpoint once, at import: point it at this run's local hub.
                    datasets.config.HF_ENDPOINT = local.url
                hub = Hub(endpoint=local.url, token="bench", cache_dir=cache)
                hub.whoami()  # huggingface_hub's once-per-process requests are not the publish's
                later = BASE + dt.timedelta(days=1 + run)
                step = max(1, keys // new)
                records = [_record(i * step % keys, later + dt.timedelta(seconds=i)) for i in range(new)]

                def ours_once(local: LocalHub = local, hub: Hub = hub, records: list[dict] = records) -> None:
                    mark = _counting(local)
                    result = publish(records, repo=REPO, hub=hub)
                    ours.runs.append(_since(local, mark))
                    assert result.published and result.summary.added == new, result

                def theirs_once(local: LocalHub = local, records: list[dict] = records, run: int = run) -> None:
                    a, w = push_whole_split(
                        records, repo=REPO, target=PUSH_REPO, local=local, work=work / f"pull-{latency}-{run}"
                    )
                    alone.runs.append(a)
                    whole.runs.append(w)

                order = [ours_once, theirs_once] if run % 2 == 0 else [theirs_once, ours_once]
                for step_once in order if push else [ours_once]:
                    step_once()
            finally:
                restore()
                gc.unfreeze()
        shutil.rmtree(root, ignore_errors=True)
    return ours, alone, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1000, help="models (latest rows) in both datasets")
    parser.add_argument("--new", type=int, default=100, help="new rows to publish")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each publish per size; medians are compared")
    parser.add_argument("--no-push-to-hub", action="store_true", help="skip the datasets.push_to_hub comparison")
    parser.add_argument(
        "--latency-ms", type=float, nargs="+", default=[0.0, 100.0],
        help="milliseconds the local hub holds each answer (a round trip to the real Hub); one pass per value",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("datasets").setLevel(logging.ERROR)  # its notes on num_proc, once per push
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    if not args.no_push_to_hub:
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()  # its note on num_proc, once per push
    latencies = tuple(ms / 1000 for ms in args.latency_ms)
    push = not args.no_push_to_hub
    medians: dict[float, dict[int, float]] = {latency: {} for latency in latencies}
    with tempfile.TemporaryDirectory(prefix="trncat-publish-scale-") as tmp:
        for rows in args.sizes:
            measured = measure(
                rows, keys=args.keys, new=args.new, work=Path(tmp), push=push, repeat=args.repeat, latencies=latencies
            )
            for latency, (ours, alone, whole) in measured.items():
                medians[latency][rows] = ours.median
                print(f"-- {rows:,} rows, {latency * 1000:g} ms per request")
                print(ours.line(f"trncat publish of {args.new} new rows into {rows:>9,} rows ({args.keys} models)"))
                if push:
                    print(alone.line(f"push_to_hub alone of the whole split ({rows + args.new:>9,} rows)"))
                    print(whole.line(f"read split + push_to_hub ({rows + args.new:>9,} rows)"))
                worst = max(ours.runs, key=lambda f: (f.requests, f.downloaded))
                ok = worst.requests <= 20 and worst.downloaded <= 1e6
                print(f"  goal <= 20 requests and <= 1 MB: {'met' if ok else 'NOT met'}")
                if push and rows == min(args.sizes):
                    faster = ours.median < alone.median
                    print(
                        f"  goal faster than push_to_hub at {rows:,} rows (medians {ours.median:.3f} s vs "
                        f"{alone.median:.3f} s): {'met' if faster else 'NOT met'}"
                    )
    for latency, by_size in medians.items():
        small, large = by_size[min(by_size)], by_size[max(by_size)]
        print(
            f"ratio {max(by_size):,} / {min(by_size):,} rows (medians, {latency * 1000:g} ms per request): "
            f"{large / small:.2f} (goal <= 1.5)"
        )


if __name__ == "__main__":
    main()
