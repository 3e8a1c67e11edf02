"""The local hub at scale: a recursive tree listing of a repo of ``--files`` files, and commit latency with
``--clients`` clients committing at once into a repo of that size.

A commit must cost what it changes, not the repo's size (the store keeps each commit's changes, and trees share
what did not change); a listing must be linear overall (a cursor into the sorted index, not a rebuilt and sorted
tree per page). Each client is huggingface_hub's own ``HfApi.create_commit`` of one small file, over HTTP; the
hub runs in this process.

    python benchmarks/localhub_scale.py [--files 30013] [--clients 50] [--commits 4]
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from huggingface_hub import CommitOperationAdd, HfApi  # noqa: E402

import pipeline.localhub.server as server_module  # noqa: E402
from pipeline.localhub import LocalHub  # noqa: E402

REPO = "bench/big"


def _seed(hub: LocalHub, files: int) -> None:
    hub.store.create_repo(REPO, repo_type="dataset")
    names = [f"data/results/{i % 31:03d}/run-{i:06d}.json" for i in range(files)]
    random.Random(36).shuffle(names)  # the order a history of commits adds them in, not sorted
    batch = {name: f"{name}\n".encode() for name in names}
    hub.store.commit_files(REPO, batch, repo_type="dataset", message="seed")


def _listing(api: HfApi, hub: LocalHub) -> tuple[float, float, int, int]:
    """(seconds in all, the server's seconds answering the pages, requests, entries)."""
    served: list[float] = []
    dispatch = server_module.dispatch

    def timed(store, req):  # noqa: ANN001, ANN202 - the server's own signature
        started = time.perf_counter()
        try:
            return dispatch(store, req)
        finally:
            served.append(time.perf_counter() - started)

    server_module.dispatch = timed
    try:
        before = len(hub.server.requests)
        started = time.perf_counter()
        entries = list(api.list_repo_tree(REPO, repo_type="dataset", recursive=True))
        took = time.perf_counter() - started
    finally:
        server_module.dispatch = dispatch
    return took, sum(served), len(hub.server.requests) - before, len(entries)


def _commits(api: HfApi, clients: int, commits: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def client(n: int) -> None:
        for c in range(commits):
            op = CommitOperationAdd(f"clients/{n:03d}/{c}.txt", f"client {n} commit {c}\n".encode())
            started = time.perf_counter()
            try:
                api.create_commit(REPO, [op], commit_message=f"client {n} commit {c}", repo_type="dataset")
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return
            with lock:
                latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"{len(errors)} commits failed: {errors[0]!r}")
    return latencies, time.perf_counter() - started


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=30013)
    parser.add_argument("--clients", type=int, default=50, help="0: the listing only")
    parser.add_argument("--commits", type=int, default=4, help="commits per client")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalHub(Path(tmp)) as hub:
        _seed(hub, args.files)
        api = HfApi(endpoint=hub.url, token="bench")
        took, served, requests, entries = _listing(api, hub)
        print(
            f"tree listing, {args.files} files: {entries} entries, {requests} requests, {took:.2f} s "
            f"({served:.2f} s of it the server's)"
        )
        if not args.clients:
            return
        latencies, wall = _commits(api, args.clients, args.commits)
        print(
            f"commits, {args.clients} clients x {args.commits} into {args.files} files: p50 "
            f"{statistics.median(latencies):.3f} s, p99 {_pct(latencies, 0.99):.3f} s, "
            f"{len(latencies) / wall:.1f} commits/s"
        )
        store = hub.store.root / "repos"
        size = sum(p.stat().st_size for p in store.rglob("*.json"))
        print(f"store: {size / 2**20:.1f} MiB of commit/ref JSON after {len(latencies) + 2} commits")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
