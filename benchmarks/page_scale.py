"""The catalog Space at Hub scale: build it from a dataset of 100,000 models and load it in headless Chromium, beside
pandas.

The dataset is seeded once, in a child process, from :mod:`tests.support.catalog_rows` (drawn in columns with
Arrow: every task, passes, failures and infrastructure errors, a history, rankings per task and view, exclusions, a
run.py and requirements.txt per model), laid out as a build lays it out (latest shards by the build's own writer).
Each build then runs in a child of its own: trncat's is :func:`pipeline.space.write_site`, the Space's whole tree as
``trncat page`` builds it (the page, its data files, the feed and every script), and its CPU time (user and
system) and the process's peak resident memory are measured there. The pair is what a user would write instead:
``pandas.read_parquet(data/latest)`` of the page's columns and ``DataFrame.to_html()``, one static table of every
row (no search, no views, no details).

    .venv/bin/python benchmarks/page_scale.py [--rows 100000] [--runs 3] [--keep DIR] [--no-pandas] [--matrix]

Prints, for each: build CPU seconds and peak memory, the bytes a browser transfers for the first view (gzip, level 6,
as HTTP servers and the Hub's CDN compress text; trncat's data files are counted only when the first view fetched
them; the shown task's index, which the page fetches once that view is painted and the browser is idle, is counted
apart), then in Chromium (Debian's /usr/bin/chromium, driven by Playwright; the median of ``--runs`` loads): first
render (first contentful paint), script ready, and the page's JavaScript heap once ready; for trncat also a search
(input event to the rows drawn): typed at once (a first visit, HTTP cache off, the query set as soon as the load
event has fired, before any click: it waits for whatever of the task's index the page has not fetched while idle,
then for the entry files of its rows), cold (after clicking the All view, which fetches the task's index: the entry
files fetched first) and warm (the worst of several queries), and whether every sampled id (20, across the range) is
found. ``--keep`` writes the dataset and the sites into a folder that stays (each run builds them anew);
``--no-pandas`` skips the pandas pair, whose page of every row takes minutes to load.
``--matrix`` also seeds the stage matrix (``data/matrix.parquet``, issue 49: 33 rows per model, per the row contract
MATRIX_SCHEMA of pipeline/dataset/matrix.py, from :func:`tests.support.matrix_rows.scale_rows`) and, in Chromium, times
the matrix's first draw once it is scrolled to (its index and first chunk fetched) and its bytes; issue 49's goal is
first render <= 300 ms and <= 1 MB at 10,000 discovered models (``--rows 10000 --matrix``).
Goals at 100,000 rows: first render <= 300 ms with <= 1 MB transferred, search <= 200 ms, build <= 10 s CPU and
<= 500 MB.

Each build is timed twice: a new Space's first (every script linked into the tree) and a rebuild, the build
``trncat page`` makes once the Space holds the scripts (the dataset's data only, the scripts named by its listing).

Measured 2026-12-04 (second session) on the 2-core machine, ``--rows 100000 --runs 3 --no-pandas``: a rebuild 8.5 s
CPU (7.8 user, 0.7 system), peak 474 MB; a new Space's first build 12.5 s CPU (8.7 user, 3.8 system: 100,000
script folders and 200,000 links on this ext4 disk), peak 470 MB; first render 188 ms, 0.13 MB transferred (then
0.52 MB of index while idle); search typed at once 116 ms, cold 112 ms, warm worst 77 ms; 20/20 ids found. Before
the rows were read in batches and let go (the same command, earlier that day): the new Space's build 23.4 s CPU,
822 MB; before it read only the page's columns and linked the scripts (``write_site`` at f131a3a, a one-off
script on the same dataset folder): 141 s CPU (42.8 user, 98.2 system: a write and an fsync per script), 1,198 MB.
The pandas pair, the same day (``--rows 100000 --runs 1``): ``read_parquet`` + ``to_html`` 22.7 s CPU, 1,430 MB,
a 174 MB page, 8.66 MB transferred, first render 236 ms and no load event within 120 s (trncat in that run: a new
Space 11.6 s CPU and 464 MB, a rebuild 7.5 s and 472 MB, first render 292 ms in its one run).

Measured 2026-12-06 on the same 2-core machine under a load of about 6 (other builds running), ``--rows 100000
--runs 1 --no-pandas``, side by side with the build before each cell was made once as HTML on the server (issue 51;
that build at ac28bfd in the same hour): a rebuild 24.4 s CPU against 16.4 s, a new Space's first build 33.9 s
against 24.4 s, peak 474 MB against 481 MB, data files 345 MB against 87 MB stored in all; first render 232 ms against
544 ms, 0.14 MB against 0.13 MB transferred; search typed at once 375 ms against 358 ms, cold 494 ms against 843 ms,
warm worst 360 ms against 483 ms; 20/20 ids found by both. Under that load neither met the search goal; the figures
of 2026-12-04 above were on the machine at rest.

Measured 2026-12-06 with ``--rows 10000 --runs 3 --no-pandas --matrix`` (issue 49) on the same 2-core machine under a
load of 6 to 11 (other helpers' builds and tests), the matrix glue of write_site (read data/matrix.parquet, hand its
rows to render_site) patched in by a wrapper as this branch had none, each run beside the same build without the
matrix (``--rows 10000 --runs 3 --no-pandas``, right after it): first render 284 and 316 ms with the matrix against
392 and 468 ms without (the load's noise is larger than any difference), 0.12 MB transferred against 0.11 MB, no
matrix file fetched before it is scrolled to, then its first 100 rows drawn in 236 and 281 ms (0.01 MB of its index
and first chunk, gzip); a rebuild 7.3 and 7.5 s CPU against 4.0 and 3.5 s, peak 652 and 650 MB against 206 and 196 MB
(the 330,000 matrix rows as Python dicts, read whole: the page's own part is about 40 MB); 84 MB stored in all against
38.5 MB (the matrix's data files 45 MB, 0.57 MB gzip).

Measured 2026-12-06 afternoon (issue 51's regression hunt) on the same 2-core machine under a load of 4 to 10, each
figure beside ac28bfd (2026-12-04, the budgets held) in the same session. What costs is making every row's and every
details' HTML in Python (b76ecca, "each cell made once"): the rebuild at ``--rows 20000`` 3.0 s CPU at its parent
(ac28bfd) against 5.0 and 5.3 s at b76ecca; at 100,000 rows (the rebuild alone, alternated, load 4 to 7) 29.3 and 27.6 s
after d491fe4's cheaper cells against 16.0 and 14.9 s at ac28bfd; data files 344 MB against 87 MB. The stage matrix
(not seeded without ``--matrix``) and the serving-interval columns (two more columns read) cost nothing measurable.
In Chromium the two pages are alike within this load's noise (five alternated loads of each kept site: first render
median 264 ms against 300 ms, a search typed at once 225 ms against 239 ms); ``--rows 100000 --runs 1 --no-pandas``
at d491fe4, load 5 to 9: first render 292 ms, 0.14 MB transferred, search typed at once 217 ms, cold 290 ms, warm
worst 139 ms, 20/20 ids found, a rebuild 26.3 s CPU (ac28bfd's run under a load of 7: 416 ms, 178, 296 and 241 ms,
15.8 s). The search and rebuild goals are not met under this load by either build.

Measured 2026-12-06 evening (issue 51) after each row and details became parts written once per file
(``chunks.texts``: a row's cells, the model id once for its three places, the details' blocks, a history line's first
cells), the repeated cells made once per value (lru caches) and the parts' places found in C, the same HTML: the
rebuild alone (``write_site`` with the listing, as :func:`rebuild`) alternated with ac28bfd, 100,000 rows, under a load
of about 7, 22.2 and 20.5 s CPU against 13.3 and 14.7 s (24.7 s before these changes, beside 12.8 s, at a load of 4),
data files 132 MB against 76 MB (334 MB before); at 20,000 rows 4.4 s against 2.7 to 3.5 s, 27 MB against 18 MB (70 MB
before). ``--rows 100000 --runs 1 --no-pandas`` at a load of 6 to 7: a new Space's first build 26.8 s CPU, 454 MB,
142.5 MB stored in all; a rebuild 19.7 s CPU, 468 MB; first render 276 ms, 0.14 MB transferred (then 0.52 MB of index
while idle); search typed at once 240 ms, cold 275 ms, warm worst 213 ms; 20/20 ids found. What still costs is making
some 40 parts of HTML per entry in Python (about 45 us an entry, 4.5 s at 100,000): not back to ac28bfd's yet.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import gzip
import http.server
import multiprocessing
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.dataset.layout import LATEST_DIR, RESULTS_DIR, SCRIPTS_DIR, latest_schema, script_folder  # noqa: E402
from pipeline.dataset.rankings import write_exclusions, write_rankings  # noqa: E402
from pipeline.dataset.read import script_files  # noqa: E402
from pipeline.dataset.shards import write_shard  # noqa: E402
from pipeline.page import DATA_DIR, LATEST_READ  # noqa: E402
from pipeline.records import arrow_schema  # noqa: E402
from pipeline.space import SiteNames, write_site  # noqa: E402
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.catalog_rows import catalog_rows  # noqa: E402
from tests.support.matrix_rows import scale_rows  # noqa: E402

PAINT_JS = "performance.getEntriesByName('first-contentful-paint').map(e => e.startTime)[0] || null"
#: How long the load event of a page is waited for before it is reported as later than that.
LOAD_WAIT_S = 120
QUERIES = ("model-01", "org7/", "llama", "no-such-model", "m", "")
#: Set the search box and wait until the rows it asks for are drawn (data files fetched first, if need be).
SEARCH_JS = """async (q) => {
  const root = document.documentElement, input = document.getElementById("q");
  const t0 = performance.now();
  input.value = q;
  input.dispatchEvent(new Event("input"));
  while (root.dataset.busy) await new Promise((resolve) => setTimeout(resolve, 1));
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  const ids = [...document.querySelectorAll("#rows tr[data-i] td.model .hub")].map((e) => e.textContent);
  return [performance.now() - t0, ids];
}"""


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


#: The stage matrix's Arrow types (its row contract, MATRIX_SCHEMA of pipeline/dataset/matrix.py): text but these.
MATRIX_TYPES = {"documented_but_fails": pa.bool_(), "decided_at": pa.timestamp("us", tz="UTC"), "params": pa.int64(),
                "neuron_cores": pa.int32()}  # fmt: skip


def seed_matrix(root: Path) -> None:
    """``data/matrix.parquet`` of a seeded dataset: every model of its latest rows, 33 rows each."""
    models = pq.read_table(root / LATEST_DIR, columns=["model_id", "task"]).to_pylist()
    rows = scale_rows((r["model_id"], r["task"]) for r in models)
    schema = pa.schema([(name, MATRIX_TYPES.get(name, pa.string())) for name in rows[0]])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / "data" / "matrix.parquet")


def seed_dataset(rows: int, root: Path) -> list[tuple[str, str]]:
    """A dataset folder of ``rows`` latest rows laid out as a build lays it out (latest shards by the build's own
    writer, a results file, rankings, exclusions, a run.py and requirements.txt per model); returns 20 sampled
    (model id, task) across the range."""
    data = catalog_rows(rows)

    def table(records: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
        return pa.table({f.name: pa.array([r.get(f.name) for r in records], f.type) for f in schema}, schema=schema)

    for row in data["latest"]:
        row["history"] = []
    write_shard(root, "all", table(data["latest"], latest_schema()))
    (root / RESULTS_DIR).mkdir(parents=True, exist_ok=True)
    pq.write_table(table(data["history"], arrow_schema()), root / RESULTS_DIR / "20261128T000000Z-seed.parquet")
    snapshots: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in data["rankings"]:
        snapshots.setdefault((r["date"], r["task"], r["view"]), []).append(r)
    for (date, task, view), ranked in snapshots.items():
        write_rankings(ranked, root, date=dt.date.fromisoformat(date), task=task, view=view)
    write_exclusions(data["exclusions"], root)
    for model_id, files in data["scripts"].items():
        folder = root / script_folder(model_id)
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
    return [(r["model_id"], r["task"]) for r in data["latest"][:: max(1, rows // 20)]]


def _seed(rows: int, root: Path, matrix: bool, queue: Any) -> None:
    sampled = seed_dataset(rows, root)
    if matrix:
        seed_matrix(root)
    queue.put(sampled)


def _build(kind: str, dataset: Path, site: Path, queue: Any, scripts: list[str] | None = None) -> None:
    """In a child of its own: build ``kind``'s page of the dataset folder into ``site``; report to ``queue`` the
    CPU time (user and system: at 100,000 models the Space's 200,000 script files are the system's work) and the
    process's peak resident memory, beside what it held before (Python and the libraries)."""
    before = _rss_mb()
    began = resource.getrusage(resource.RUSAGE_SELF)
    if kind.startswith("trncat"):
        names = SiteNames(dataset_repo="trncat/results", space_repo="trncat/catalog")
        write_site(dataset, site, names=names, script_paths=scripts)
    else:
        import pandas as pd

        latest = pd.read_parquet(dataset / LATEST_DIR, columns=[c for c in LATEST_READ if c != "history"])
        site.mkdir(parents=True, exist_ok=True)
        (site / "index.html").write_text(latest.to_html(index=False), encoding="utf-8")
    done = resource.getrusage(resource.RUSAGE_SELF)
    user, system = done.ru_utime - began.ru_utime, done.ru_stime - began.ru_stime
    queue.put({"cpu_s": user + system, "user_s": user, "sys_s": system, "start_mb": before,
               "peak_mb": done.ru_maxrss / 1024})  # fmt: skip


def _child(target: Any, *args: Any) -> Any:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=target, args=(*args, queue))
    child.start()
    result = queue.get()
    child.join()
    return result


def build(kind: str, dataset: Path, site: Path) -> dict[str, Any]:
    return dict(_child(_build, kind, dataset, site))


def rebuild(dataset: Path, top: Path) -> dict[str, Any]:
    """The build ``trncat page`` makes once the Space holds the scripts (every build after its first): the dataset's
    data only (a snapshot of ``data/**``), every script named by the dataset's listing, none in the folder."""
    data_only = top / "dataset-data"
    shutil.rmtree(data_only, ignore_errors=True)
    shutil.copytree(dataset, data_only, ignore=shutil.ignore_patterns(SCRIPTS_DIR), copy_function=os.link)
    listing = script_files(dataset)
    return dict(_child(_rebuild, data_only, top / "trncat-rebuild", listing))


def _rebuild(dataset: Path, site: Path, scripts: list[str], queue: Any) -> None:
    _build("trncat-rebuild", dataset, site, queue, scripts)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class _Server(http.server.ThreadingHTTPServer):
    """The sites' server: a browser that gives up on a page (the pandas page of every row, past the load wait) resets
    its connection mid-transfer, which is no error of the measurement."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def _gzip_size(site: Path, url: str) -> int:
    return len(gzip.compress((site / url.split("/", 3)[3].split("#")[0]).read_bytes(), 6))


def _first_paint(page: Any) -> float:
    """The page's first contentful paint, polled from here: wait_for_function evaluates a string in the page, which
    the page's CSP (no 'unsafe-eval') refuses."""
    deadline = time.monotonic() + 600
    while (paint := page.evaluate(PAINT_JS)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("no first contentful paint in 600 s")
        time.sleep(0.01)
    return float(paint)


def _typed_at_once(context: Any, url: str) -> float:
    """A first visit's search typed at once: a fresh page, the HTTP cache off, the query set as soon as the load event
    has fired (before any click), timed until its rows are drawn."""
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    page.goto(url, wait_until="load", timeout=LOAD_WAIT_S * 1000)
    page.wait_for_selector("html[data-ready='1']", state="attached", timeout=60_000)
    took = float(page.evaluate(SEARCH_JS, QUERIES[0])[0])
    page.close()
    return took


def _matrix_shown(context: Any, site: Path, url: str) -> dict[str, Any]:
    """A fresh page's stage matrix scrolled to, once the page is ready: the time to its first draw (its index and first
    chunk fetched: nothing of it is fetched before) and their bytes."""
    page = context.new_page()
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    page.goto(url, wait_until="load", timeout=LOAD_WAIT_S * 1000)
    page.wait_for_selector("html[data-ready='1']", timeout=60_000)
    before = [u for u in fetched if "-mindex-" in u or re.search(r"-m\d+-", u)]
    began = time.monotonic()
    page.locator("#matrix").scroll_into_view_if_needed()
    page.wait_for_selector("#matrix[data-drawn]", state="attached", timeout=60_000)
    took = (time.monotonic() - began) * 1000
    matrix = [u for u in fetched if "-mindex-" in u or re.search(r"-m\d+-", u)]
    shown = {"matrix_ms": took, "matrix_bytes": sum(_gzip_size(site, u) for u in matrix),
             "matrix_rows": page.locator("#mx-rows tr").count(), "matrix_before": len(before)}  # fmt: skip
    page.close()
    return shown


def measure(site: Path, runs: int, sample: list[tuple[str, str]] | None) -> dict[str, Any]:
    """Median first paint, script ready and heap over ``runs`` loads; for trncat, the searches."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    server = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/index.html"
    paints, loads, readies, heaps, transfers, idles, typed, cold, warm = [], [], [], [], [], [], [], [], []
    found: dict[str, Any] = {}
    try:
        with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            for run in range(runs):
                page = context.new_page()
                requested: list[str] = []
                page.on("request", lambda request, into=requested: into.append(request.url))
                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")
                # A page of every row takes minutes to lay out: its load event is waited for up to LOAD_WAIT_S.
                page.goto(url, wait_until="commit")
                paints.append(_first_paint(page))
                try:
                    page.wait_for_load_state("load", timeout=LOAD_WAIT_S * 1000)
                    loads.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"))
                except PlaywrightTimeout:
                    loads.append(float("inf"))
                if sample is not None:
                    page.wait_for_selector("html[data-ready='1']", timeout=60_000)
                    readies.append(float(page.evaluate("document.documentElement.dataset.readyMs")))
                metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
                heaps.append(metrics["JSHeapUsedSize"] / 2**20)
                if sample is not None:  # the task's index, fetched once the first view is painted and idle
                    deadline = time.monotonic() + 30
                    while not any("-index-" in u for u in requested) and time.monotonic() < deadline:
                        page.wait_for_timeout(10)
                ours = [u for u in requested if u.startswith(url.rsplit("/", 1)[0])]
                transfers.append(sum(_gzip_size(site, u) for u in ours if "-index-" not in u))
                idles.append(sum(_gzip_size(site, u) for u in ours if "-index-" in u))
                if sample is not None:
                    found["first_view_data_files"] = sum(f"/{DATA_DIR}/" in u and "-index-" not in u for u in ours)
                    page.click("#view-tabs button[data-view='all']")  # the largest list: every model of the task
                    page.wait_for_selector("html:not([data-busy])", state="attached")
                    took, _ = page.evaluate(SEARCH_JS, QUERIES[0])
                    cold.append(took)
                    warm.extend(page.evaluate(SEARCH_JS, q)[0] for q in QUERIES[1:])
                    if run == 0:
                        page.select_option("#f-device", "all")
                        missed = []
                        for model_id, task in sample:
                            page.click(f"#task-tabs button[data-task='{task}']")
                            if model_id not in page.evaluate(SEARCH_JS, model_id)[1]:
                                missed.append(model_id)
                        found["missed"] = missed
                    if run == 0 and page.locator("#matrix").count():
                        found.update(_matrix_shown(context, site, url))
                page.close()
                if sample is not None:
                    typed.append(_typed_at_once(context, url))
            context.close()
    finally:
        server.shutdown()
    out = {
        "first_render_ms": statistics.median(paints),
        "load_ms": statistics.median(loads),
        "heap_mb": statistics.median(heaps),
        "transfer_bytes": max(transfers),
        "idle_bytes": max(idles),
        **found,
    }
    if readies:
        out.update(
            script_ready_ms=statistics.median(readies),
            search_typed_ms=statistics.median(typed),
            search_cold_ms=statistics.median(cold),
            search_warm_ms=max(warm),
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write both sites into this folder (trncat/, pandas/) and keep them")
    parser.add_argument("--no-pandas", action="store_true", help="skip the pandas pair (slow to load)")
    parser.add_argument("--matrix", action="store_true", help="seed the stage matrix too, and time its first draw")
    args = parser.parse_args(argv)
    if not CHROMIUM.is_file():
        print("no /usr/bin/chromium: install Debian's chromium to measure in a browser")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        top = args.keep or Path(tmp)
        results = {}
        dataset = top / "dataset"
        began = time.monotonic()
        sampled = _child(_seed, args.rows, dataset, args.matrix)
        print(f"dataset of {args.rows} models seeded in {time.monotonic() - began:.0f} s")
        for kind in ("trncat",) if args.no_pandas else ("trncat", "pandas"):
            site = top / kind
            built = build(kind, dataset, site)
            stored = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
            page = (site / "index.html").stat().st_size
            print(f"{kind} build, {args.rows} rows: {built['cpu_s']:.1f} s CPU ({built['user_s']:.1f} user, "
                  f"{built['sys_s']:.1f} system), peak memory {built['peak_mb']:.0f} MB (the process held "
                  f"{built['start_mb']:.0f} MB before); index.html {page / 1e6:.2f} MB, "
                  f"{stored / 1e6:.1f} MB stored in all")  # fmt: skip
            sample = sampled if kind == "trncat" else None
            results[kind] = {**built, **measure(site, args.runs, sample)}
        again = rebuild(dataset, top)
        print(f"trncat rebuild (the Space holds the scripts, as after its first build), {args.rows} rows: "
              f"{again['cpu_s']:.1f} s CPU ({again['user_s']:.1f} user, {again['sys_s']:.1f} system), peak memory "
              f"{again['peak_mb']:.0f} MB")  # fmt: skip
    for kind, r in results.items():
        load = f"over {LOAD_WAIT_S} s" if r["load_ms"] == float("inf") else f"{r['load_ms']:.0f} ms"
        line = (f"{kind} in Chromium: first render {r['first_render_ms']:.0f} ms, load event {load}, "
                f"{r['transfer_bytes'] / 1e6:.2f} MB "
                f"transferred (gzip; then {r['idle_bytes'] / 1e6:.2f} MB of index while idle), "
                f"JS heap {r['heap_mb']:.0f} MB")  # fmt: skip
        if kind == "trncat":
            line += (f"; script ready {r['script_ready_ms']:.0f} ms; search: typed at once "
                     f"{r['search_typed_ms']:.0f} ms, cold {r['search_cold_ms']:.0f} ms, "
                     f"warm worst {r['search_warm_ms']:.0f} ms; data files in the first view: "
                     f"{r['first_view_data_files']}; sampled ids found: {20 - len(r['missed'])}/20")  # fmt: skip
            if "matrix_ms" in r:
                line += (f"; the matrix scrolled to: drawn in {r['matrix_ms']:.0f} ms, {r['matrix_rows']} rows, "
                         f"{r['matrix_bytes'] / 1e6:.2f} MB fetched (gzip), {r['matrix_before']} of its files "
                         "fetched before")  # fmt: skip
            elif args.matrix:
                line += "; NO matrix on the page: this build's write_site does not read data/matrix.parquet"
        else:
            line += "; no search (one static table)"
        print(line)
    t = results["trncat"]
    goals = {
        "first render <= 300 ms": t["first_render_ms"] <= 300,
        "<= 1 MB transferred": t["transfer_bytes"] <= 1_000_000,
        "search <= 200 ms (typed at once, cold and warm)": max(
            t["search_typed_ms"], t["search_cold_ms"], t["search_warm_ms"]
        )
        <= 200,
        "build <= 10 s CPU (a rebuild)": again["cpu_s"] <= 10,
        "build <= 500 MB (a rebuild and a new Space's first)": max(again["peak_mb"], t["peak_mb"]) <= 500,
        "every sampled id found": not t["missed"],
    }
    for goal, met in goals.items():
        print(f"goal {goal}: {'met' if met else 'NOT met'}")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
