"""Publishing 100 new rows into a dataset of 10k and of 100k models (1M results rows) on the local hub: time, CPU
time, peak memory, HTTP requests and bytes down and up per publish, beside the same publish done with
``datasets.Dataset.push_to_hub`` of the whole results split (every row, old and new): the tool a user would use.

A publish reads ``data/summary.json`` and the latest shards its rows' models are in (never the history in
data/results, never the family index: each family shard is written from its latest shard) and writes the
results file, those shards and their family shards, the changes file, and the scripts and the card where they
change. The latest view splits a shard in sixteen by the model's hash once it passes 1 MiB
(``pipeline/dataset/shards.py``), so the seeded datasets are laid out as a build lays them out: the 10k-model
one is one shard, the 100k-model one sixteen. Two spreads of the new rows: over ``--new`` models across the
catalog (each shard touched), and over one model (one shard touched). Goals: <= 18 requests and <= 1 MB down
per publish at both sizes; CPU flat in the number of models.

The local hub runs in this process and answers at once, so with no added latency the figures are CPU time (client
and server taking turns): what a publish costs the machine; the peak memory is the process's resident set above
where it stood (client and server), a lower bound: memory an earlier step freed is reused unseen. On the real Hub a
request takes 100-300 ms, and what counts is how many wait one after the other; ``--latency-ms`` holds each answer
that long (concurrent requests overlap, as on a network) and measures again.

    python benchmarks/publish_scale.py [--sizes 10000x100000 100000x1000000] [--new 100] [--spread 100 1]
                                       [--repeat 3] [--latency-ms 0] [--no-push-to-hub]

Measured 2026-12-03 on a shared 2-core machine (load average about 18: read the CPU seconds, not the wall time),
``--sizes 10000x100000 100000x1000000 --repeat 2`` (medians):

- 10k models (one shard, 0.8 MB): 100 rows of 100 models, 16 requests, 0.82 MB down, 0.25 CPU-s; of one model,
  17 requests, 0.81 MB down, 0.20 CPU-s. ``push_to_hub`` of the 100k-row split alone: 13 requests, 7.8 MB up,
  0.49 CPU-s; reading the split first as well: 21 requests, 4.5 MB down, 1.76 CPU-s, +528 MiB RSS.
- 100k models (sixteen shards): 100 rows of one model, 17 requests, 0.53 MB down, 0.19 CPU-s (0.94 times the
  10k figure: flat); of 100 models spread over the catalog, every shard is touched: 91 requests, 8.2 MB down,
  2.2 CPU-s (a shard costs a GET and, with its family shard, two LFS uploads of two requests each).
  ``push_to_hub`` of the 1M-row split alone: 21 requests, 81 MB up, 4.7 CPU-s; reading it first as well:
  65 requests, 45 MB down, 19.8 CPU-s, +5.6 GiB RSS.

With ``--latency-ms 100`` (``--sizes 10000x10000 100000x100000 --repeat 1 --no-push-to-hub``): 3.2 s and 2.5 s at
10k models; 6.5 s for one model and 78 s for 100 models spread at 100k (on that loaded machine). Again on
2026-12-03 at load average 3 (``--sizes 100000x100000 --repeat 1 --no-push-to-hub --latency-ms 100``): 4.1 s for
100 models spread (91 requests, eight at a time), 1.3 s for one model.

The shard size is the layout's one trade-off (``--shard-kib``; ``--sizes 100000x100000 --repeat 1
--no-push-to-hub``, load average 3): a publish rewrites every shard its models are in, so it downloads them
whole, and 100 models spread over the catalog touch nearly all shards, however many there are:

=========  ======  ===========================  ===========================
split at   shards  100 models spread            1 model
=========  ======  ===========================  ===========================
8 MiB      1       16 requests, 7.3 MB, 1.1 s   17 requests, 7.3 MB, 0.90 s
1 MiB      16      91 requests, 8.2 MB, 1.8 s   17 requests, 0.53 MB, 0.18 s
128 KiB    ~100    426 requests, 6.2 MB, 3.4 s  17 requests, 0.08 MB, 0.10 s
=========  ======  ===========================  ===========================

(CPU seconds.) Every shard file carries a footer of about 30 KB (158 columns), so small shards stop saving bytes.
No shard size meets <= 18 requests and <= 1 MB down for a spread publish at 100k models: that needs the touched
rows without the rest of their files, which a Parquet file rewritten whole cannot give. 1 MiB keeps a one-model
publish (a submission, a retry) flat in the catalog's size and a sweep's publish at a few seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import gc
import json
import logging
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pipeline.dataset.shards as shards  # noqa: E402  (LATEST_SHARD_BYTES: --shard-kib; write_shard: the build's split)
from pipeline import constants  # noqa: E402
from pipeline.dataset import FAMILIES_FILE, LATEST_DIR, RESULTS_DIR, SUMMARY_FILE, CardNames, build, refresh_card  # noqa: E402
from pipeline.hub import Hub, point_client_at  # noqa: E402
from pipeline.localhub import LocalHub  # noqa: E402
from pipeline.publish import publish  # noqa: E402
from pipeline.records import arrow_schema, flatten  # noqa: E402
from tests.support.records import sample_record  # noqa: E402

REPO = "bench/results"
PUSH_REPO = "bench/pushed"
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
NAMES = CardNames(repo=REPO, space=constants.TRNCAT_SPACE)


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


def seed(models: int, rows: int, touched: list[int], out: Path) -> None:
    """A dataset of ``models`` latest keys and ``rows`` results rows, laid out as a build lays it out.

    The models a publish will touch are built the ordinary way (their rows, scripts, card, summary); the latest
    view is then widened to every model with copies of their row (Arrow, ids replaced: building 100k records
    one by one would take longer than the benchmark) and written by the build's own shard writer, which splits
    it as a build would; the summary counts every model, and the card is rendered from it.
    """
    build([_record(i, BASE) for i in touched], out, names=NAMES)
    template = pq.read_table(out / LATEST_DIR / "all.parquet").slice(0, 1)
    table = template.take(pa.array([0] * models))
    ids = pa.array([f"org/model-{i:06d}" for i in range(models)])
    table = table.set_column(table.schema.get_field_index("model_id"), "model_id", ids)
    records = pa.array([secrets.token_hex(32) for _ in range(models)])
    table = table.set_column(table.schema.get_field_index("record_id"), "record_id", records)
    (out / LATEST_DIR / "all.parquet").unlink()
    (out / FAMILIES_FILE).unlink()
    written, _ = shards.write_shard(out, "all", table)
    summary = json.loads((out / SUMMARY_FILE).read_text())
    for name in ("counts", "toolchains"):  # every row is a copy of one: one count each
        summary[name] = [[*entry[:-1], models] for entry in summary[name]]
    summary["total"] = models
    summary["shards"] = sorted(Path(p).stem for p in written if p.startswith(f"{LATEST_DIR}/"))
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    refresh_card(out, names=NAMES)
    history_files(rows - len(touched), models, out)


class PeakRss:
    """The process's resident set at its highest, sampled every 2 ms on a thread, above where it stood."""

    def __init__(self) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _rss(self) -> int:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * self.page

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self._rss()) - self.start


@dataclass
class Figures:
    seconds: float
    requests: int
    downloaded: int
    uploaded: int = 0
    #: CPU seconds of the whole process (client, local hub, their threads): steadier than wall time on a busy
    #: machine, since the local hub serves from this process.
    cpu: float = 0.0
    #: Resident memory above the start, at its highest (bytes).
    peak: int = 0

    def __add__(self, other: Figures) -> Figures:
        return Figures(
            self.seconds + other.seconds,
            self.requests + other.requests,
            self.downloaded + other.downloaded,
            self.uploaded + other.uploaded,
            self.cpu + other.cpu,
            max(self.peak, other.peak),
        )


@dataclass
class Runs:
    """One way of publishing, measured ``repeat`` times on the same starting state."""

    runs: list[Figures] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(f.seconds for f in self.runs)

    @property
    def cpu(self) -> float:
        return statistics.median(f.cpu for f in self.runs)

    def worst(self) -> Figures:
        return max(self.runs, key=lambda f: (f.requests, f.downloaded))

    def line(self, name: str) -> str:
        # The requests and bytes of a run do not vary between runs; the worst one is shown all the same.
        worst = self.worst()
        return (
            f"{name}: median {self.median:.3f} s ({' '.join(f'{f.seconds:.3f}' for f in self.runs)}), "
            f"median CPU {self.cpu:.3f} s, peak +{max(f.peak for f in self.runs) / 2**20:.0f} MiB RSS, "
            f"{worst.requests} HTTP requests, {worst.downloaded / 1e6:.3f} MB down, {worst.uploaded / 1e6:.3f} MB up"
        )


@dataclass
class Mark:
    requests: int
    answers: int
    bodies: int
    wall: float
    cpu: float
    rss: PeakRss


def _counting(local: LocalHub) -> Mark:
    """Where the request log stands, right before a timed publish; first, the garbage collector is settled.

    The local hub runs in this process and holds every repo's commits in memory: a full collection then takes
    long, and it falls at random into one publish's time or the other's. The objects alive now are moved out
    of the collector's sight (``gc.freeze``): a publish pays for collecting its own garbage only.
    """
    gc.collect()
    gc.freeze()
    server = local.server
    return Mark(len(server.requests), len(server.sent_bytes), len(server.received_bytes), time.perf_counter(),
                time.process_time(), PeakRss())  # fmt: skip


def _since(local: LocalHub, mark: Mark) -> Figures:
    wall, cpu = time.perf_counter() - mark.wall, time.process_time() - mark.cpu
    peak = mark.rss.stop()
    server = local.server
    requests = len(server.requests) - mark.requests
    down, up = sum(server.sent_bytes[mark.answers :]), sum(server.received_bytes[mark.bodies :])
    return Figures(wall, requests, down, up, cpu, peak)


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


def _new_records(models: int, new: int, spread: int, run: int) -> list[dict]:
    """``new`` rows over ``spread`` models spread evenly across the catalog, each run later than the last."""
    later = BASE + dt.timedelta(days=1 + run)
    step = max(1, models // spread)
    return [_record((i % spread) * step, later + dt.timedelta(seconds=i)) for i in range(new)]


def _ours(local: LocalHub, hub: Hub, records: list[dict], runs: Runs) -> None:
    mark = _counting(local)
    result = publish(records, repo=REPO, hub=hub)
    runs.runs.append(_since(local, mark))
    assert result.published and result.summary.added == len(records), result


def _theirs(local: LocalHub, records: list[dict], alone: Runs, whole: Runs, *, work: Path) -> None:
    a, w = push_whole_split(records, repo=REPO, target=PUSH_REPO, local=local, work=work)
    alone.runs.append(a)
    whole.runs.append(w)


def measure(
    models: int,
    rows: int,
    *,
    new: int,
    spreads: tuple[int, ...],
    work: Path,
    push: bool,
    repeat: int,
    latency: float,
) -> dict[int, tuple[Runs, Runs, Runs]]:
    """trncat's publish (per spread) and (``push``) the naive one, ``repeat`` times each, alternating which goes
    first, on a fresh local hub per run holding two copies of the same dataset, as publishes to the Hub leave it.
    trncat's goes in as a PR, ``push_to_hub``'s onto main of the other copy. Both run in the same process after
    the same warm-up, so neither pays imports or first-use costs the other does not."""  # fmt: skip
    work = Path(tempfile.mkdtemp(dir=work))
    folder = work / "dataset"
    touched = sorted({(i % spread) * max(1, models // spread) for spread in spreads for i in range(new)})
    seed(models, rows, touched, folder)
    files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    out: dict[int, tuple[Runs, Runs, Runs]] = {spread: (Runs(), Runs(), Runs()) for spread in spreads}
    for run in range(repeat):
        root = work / f"hub-{run}"
        with LocalHub(root, latency_s=latency) as local:
            cache = work / f"cache-{run}"
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
                steps = []
                for index, spread in enumerate(spreads):
                    records = _new_records(models, new, spread, run * len(spreads) + index)
                    steps.append(functools.partial(_ours, local, hub, records, out[spread][0]))
                if push:
                    records = _new_records(models, new, spreads[0], run)
                    theirs = functools.partial(_theirs, local, records, *out[spreads[0]][1:], work=work / f"pull-{run}")
                    steps = [theirs, *steps] if run % 2 else [*steps, theirs]
                for step in steps:
                    step()
            finally:
                restore()
                gc.unfreeze()
        shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return out


def _size(text: str) -> tuple[int, int]:
    models, _, rows = text.partition("x")
    return int(models), int(rows or models)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=_size, nargs="+", default=[_size("10000x100000"), _size("100000x1000000")],
                        metavar="MODELSxROWS", help="latest keys and results rows of each seeded dataset")  # fmt: skip
    parser.add_argument("--new", type=int, default=100, help="new rows per publish")
    parser.add_argument("--spread", type=int, nargs="+", default=[100, 1], help="models the new rows are of")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each publish per size; medians are compared")
    parser.add_argument("--no-push-to-hub", action="store_true", help="skip the datasets.push_to_hub comparison")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="milliseconds the local hub holds each answer (a round trip to the real Hub)")  # fmt: skip
    parser.add_argument("--shard-kib", type=int, default=shards.LATEST_SHARD_BYTES >> 10,
                        help="the size past which a latest shard splits (the layout's constant), in KiB")  # fmt: skip
    args = parser.parse_args()
    shards.LATEST_SHARD_BYTES = args.shard_kib << 10  # read by the shard writer at each write: seed and publish
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("datasets").setLevel(logging.ERROR)
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    push = not args.no_push_to_hub
    if push:
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
    cpu: dict[int, dict[int, float]] = {spread: {} for spread in args.spread}
    with tempfile.TemporaryDirectory(prefix="trncat-publish-scale-") as tmp:
        for models, rows in args.sizes:
            measured = measure(models, rows, new=args.new, spreads=tuple(args.spread), work=Path(tmp), push=push,
                               repeat=args.repeat, latency=args.latency_ms / 1000)  # fmt: skip
            print(f"-- {models:,} models, {rows:,} results rows, {args.latency_ms:g} ms per request, "
                  f"shards split past {args.shard_kib:,} KiB")  # fmt: skip
            for spread, (ours, alone, whole) in measured.items():
                cpu[spread][models] = ours.cpu
                print(ours.line(f"trncat publish of {args.new} rows of {spread} model(s)"))
                worst = ours.worst()
                ok = worst.requests <= 18 and worst.downloaded <= 1e6
                print(f"  goal <= 18 requests and <= 1 MB down: {'met' if ok else 'NOT met'}")
                if alone.runs:
                    print(alone.line(f"push_to_hub alone of the whole results split ({rows + args.new:,} rows)"))
                    print(whole.line(f"read the split + push_to_hub ({rows + args.new:,} rows)"))
    for spread, by_size in cpu.items():
        if len(by_size) > 1:
            small, large = by_size[min(by_size)], by_size[max(by_size)]
            print(f"CPU {max(by_size):,} / {min(by_size):,} models, {spread} model(s) touched: {large / small:.2f}")


if __name__ == "__main__":
    main()
