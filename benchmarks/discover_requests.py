"""Count the HTTP requests of discovery against a local hub holding 5,000 models (must-hold 2).

Seeds a local hub with ``--models`` models split across both tasks (with trending scores, downloads and
likes), runs discovery for both tasks x Trending and Downloads at ``--limit`` through the real Hub client
(huggingface_hub, unmodified), and prints the request count from the server's request log: in total and
per endpoint. The bound is at most 10 requests in total and none per model.

    .venv/bin/python benchmarks/discover_requests.py [--models 5000] [--limit 1000] [--cli]

``--cli`` runs ``trncat discover --task T --view V --limit N --json`` once per task and view, as separate
processes (huggingface_hub makes one extra request per process), instead of calling the library in-process.
Exit status 1 when the bound is broken.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.localhub import LocalHub  # noqa: E402

TASKS = ("text-generation", "image-text-to-text")
VIEWS = ("trending", "downloads")
MAX_REQUESTS = 10
_PER_MODEL = re.compile(r"^/api/models/[^/?]+/[^/?]+")


def endpoint(method: str, path: str) -> str:
    """The request's endpoint with ids and queries folded, so per-model requests group together."""
    bare = path.split("?", 1)[0]
    if _PER_MODEL.match(bare):
        return f"{method} /api/models/{{id}}..."
    if re.match(r"^/[^/]+/[^/]+/resolve/", bare):
        return f"{method} /{{id}}/resolve/..."
    return f"{method} {bare}"


def seed(hub: LocalHub, n: int) -> None:
    for i in range(n):
        task = TASKS[i % 2]
        hub.store.create_repo(
            f"org{i % 97}/model-{i:05d}",
            metadata={
                "pipeline_tag": task,
                "library_name": "transformers" if i % 11 else "diffusers",
                "tags": ["transformers", "custom_code"] if i % 13 == 0 else ["transformers"],
                "gated": "manual" if i % 17 == 0 else False,
                "trendingScore": (i * 7919) % 10007,
                "downloads": (i * 104729) % 1_000_003,
                "likes": i % 500,
                "safetensors": {"total": 1_000_000 + i},
            },
        )


def run_in_process(url: str, limit: int, cache: Path) -> list[tuple[str, str, int, int]]:
    from pipeline.discover import discover
    from pipeline.hub import Hub

    hub = Hub(endpoint=url, cache_dir=cache)
    out = []
    for task in TASKS:
        for view in VIEWS:
            found = discover(hub=hub, task=task, view=view, limit=limit)
            out.append((task, view, len(found.candidates), len(found.eligible)))
    return out


def run_cli(url: str, limit: int, cache: Path) -> list[tuple[str, str, int, int]]:
    import json

    env = {**os.environ, "HF_ENDPOINT": url, "HF_HUB_DISABLE_XET": "1", "HF_HUB_CACHE": str(cache)}
    out = []
    for task in TASKS:
        for view in VIEWS:
            argv = [sys.executable, "-m", "pipeline", "discover", "--task", task, "--view", view]
            argv += ["--limit", str(limit), "--json"]
            done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(argv[1:])} failed: {done.stderr.strip()[-500:]}")
            [discovery] = json.loads(done.stdout)  # one task and view: a list of one discovery
            candidates = discovery["candidates"]
            out.append((task, view, len(candidates), sum(1 for c in candidates if c["eligible"])))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=5000, help="models in the local hub (default 5000)")
    parser.add_argument("--limit", type=int, default=1000, help="models per task and view (default 1000)")
    parser.add_argument("--cli", action="store_true", help="run `trncat discover` processes instead")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="trncat-discover-bench-") as tmp, LocalHub(Path(tmp) / "hub") as hub:
        started = time.perf_counter()
        seed(hub, args.models)
        seeded = time.perf_counter() - started
        hub.server.requests.clear()
        started = time.perf_counter()
        runner = run_cli if args.cli else run_in_process
        results = runner(hub.url, args.limit, Path(tmp) / "cache")
        took = time.perf_counter() - started
        requests = list(hub.server.requests)

    print(f"seeded {args.models} models in {seeded:.1f} s; discovery ({'cli' if args.cli else 'in-process'}) "
          f"took {took:.1f} s")  # fmt: skip
    for task, view, count, eligible in results:
        print(f"  {task:<20} {view:<10} {count:>5} candidates, {eligible:>5} eligible")
    per_endpoint = Counter(endpoint(m, p) for m, p in requests)
    per_model = sum(1 for _, p in requests if _PER_MODEL.match(p.split("?", 1)[0]))
    print(f"HTTP requests: {len(requests)} in total (bound: {MAX_REQUESTS}), {per_model} per model")
    for name, count in per_endpoint.most_common():
        print(f"  {count:>5}  {name}")
    ok = len(requests) <= MAX_REQUESTS and per_model == 0
    print("OK" if ok else "BOUND BROKEN")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
