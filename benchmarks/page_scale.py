"""Build the catalog page from 10,000 synthetic rows and time it in headless Chromium.

Rows are drawn (seeded) from the sample record: every task (half text-generation, a fifth image-text-to-text,
the rest sentence-embeddings and text-to-image with their own metrics), passes, failures and infrastructure
errors, sizes from 100M to 400B parameters, a history with an older toolchain for a third of them, rankings per
task and view, exclusions, and a ~6 KB run.py per model (the page inlines them up to its budget).

    .venv/bin/python benchmarks/page_scale.py [--rows 10000] [--runs 3] [--keep DIR]

Prints the build time, the page's size as stored and as a browser transfers it (gzip, level 6, as HTTP
servers and the Hub's CDN compress text), then, in Chromium (Debian's /usr/bin/chromium, driven by Playwright):
first render (first contentful paint of the server-rendered table), script ready (tabs, search and filters
live), the time to filter by a search (input event to the next frame, worst of several queries), and whether
every row is still searchable (each entry is in the page's data, and a search for a sample of model ids, one
per 500 rows, finds each).
Goals: transfer <= 2 MB and first render <= 300 ms at 10,000 rows; script ready and filtering <= 1 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import gzip
import http.server
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.page import render_page  # noqa: E402
from pipeline.records import flatten  # noqa: E402
from pipeline.testing.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from pipeline.testing.records import sample_record  # noqa: E402
from pipeline.types import TASKS  # noqa: E402

QUERIES = ("model-01", "org7/", "llama", "no-such-model", "m", "")
FILTER_JS = """async (q) => {
  const input = document.getElementById("q");
  const t0 = performance.now();
  input.value = q;
  input.dispatchEvent(new Event("input"));
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  return performance.now() - t0;
}"""


#: Task of row i by i % 20: 10 text-generation, 4 image-text-to-text, 3 sentence-embeddings, 3 text-to-image.
TASK_MIX = (
    ("text-generation",) * 10 + ("image-text-to-text",) * 4 + ("sentence-embeddings",) * 3 + ("text-to-image",) * 3
)


def _task_metrics(task: str, rng: random.Random) -> dict[str, Any]:
    """The metrics of a sentence-embeddings or text-to-image row (no decode metrics); nothing for the others."""
    if task == "sentence-embeddings":
        p1, p32 = rng.uniform(0.001, 0.05), rng.uniform(0.01, 0.5)
        return dict(
            ttft_s=None, decode_tokens_per_s=None, sentences_per_s=32 / p32, embedding_dim=rng.choice([384, 768, 1024]),
            latency_by_batch_s=[{"batch_size": 1, "p50": p1, "p90": p1 * 1.1},
                                {"batch_size": 32, "p50": p32, "p90": p32 * 1.1}],
            batch_sizes=[1, 32], agreement_logits_cosine=None, agreement_embedding_cosine=rng.uniform(0.99, 1),
            agreement_threshold=0.99, sentence_transformers_version="5.1.0",
        )  # fmt: skip
    if task == "text-to-image":
        steps = rng.choice([4, 28, 50])
        return dict(
            ttft_s=None, decode_tokens_per_s=None, seconds_per_image=rng.uniform(0.5, 20),
            steps_per_s=rng.uniform(1, 30), vae_decode_s=rng.uniform(0.05, 1), steps=steps,
            image_size=rng.choice([512, 768, 1024]),
            guidance_scale=0.0 if steps == 4 else 7.0, agreement_logits_cosine=None,
            agreement_denoiser_cosine=rng.uniform(0.98, 1), diffusers_version="0.35.0",
        )  # fmt: skip
    return {}


def synthetic(n: int, seed: int = 0) -> dict[str, Any]:
    """render_page's arguments for ``n`` latest rows."""
    rng = random.Random(seed)
    base = flatten(sample_record())
    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    latest, history, scripts = [], [], {}
    for i in range(n):
        row = dict(base)
        model_id = f"org{i % 97}/{rng.choice(['llama', 'qwen', 'gemma', 'mistral', 'phi'])}-model-{i:05d}"
        params = int(10 ** rng.uniform(8, 11.6))
        status = rng.choices(["pass", "fail", "error"], weights=[80, 15, 5])[0]
        cores = max(1, min(64, 2 ** round(max(0.0, (params * 2 / 20e9) ** 0.5))))
        finished = start + dt.timedelta(minutes=i)
        row.update(
            model_id=model_id,
            task=TASK_MIX[i % len(TASK_MIX)],
            status=status,
            params=params,
            cores=cores,
            plan_cores=cores,
            plan_tp_degree=cores,
            plan_advice=f"shard over {cores} cores" if cores > 1 else "fits on one NeuronCore",
            compile_s=rng.uniform(20, 3000),
            wall_s=rng.uniform(3000, 4000),
            ttft_s=rng.uniform(0.01, 2),
            decode_tokens_per_s=rng.uniform(2, 300),
            peak_device_memory_bytes=params * 2 + rng.randint(0, 10**9),
            finished_at=finished,
            started_at=finished - dt.timedelta(minutes=30),
        )
        row.update(_task_metrics(row["task"], rng))
        if status != "pass":
            row.update(
                failure_stage=rng.choice(["compile", "run", "oom", "load"]),
                failure_code=rng.choice(["NCC_EOOM001", "NCC_EVRF001", "unsupported_op", "oom"]),
                failure_message=f"error {i}: " + "x" * rng.randint(20, 300),
                ttft_s=None,
                decode_tokens_per_s=None,
                compile_s=None,
                peak_device_memory_bytes=None,
                sentences_per_s=None,
                latency_by_batch_s=None,
                seconds_per_image=None,
                steps_per_s=None,
                vae_decode_s=None,
            )
        latest.append(row)
        history.append(row)
        if i % 3 == 0:
            older = dict(row, status="pass", neuronx_cc_version="2.20.0", finished_at=finished - dt.timedelta(days=20))
            history.append(older)
        scripts[model_id] = {
            "run.py": f"MODEL_ID = {model_id!r}\n" + "# generated script body\n" * 250,
            "requirements.txt": "torch-neuronx==2.14.0\nneuronx-cc==2.21.0\ntransformers==5.0.0\n",
        }
    rankings = []
    for task in TASKS:
        ids = [r["model_id"] for r in latest if r["task"] == task]
        share = TASK_MIX.count(task) / TASK_MIX.count("text-generation")
        for view, size in (("selected", 300), ("trending", 1000), ("downloads", 5000)):
            picked = rng.sample(ids, min(len(ids), int(size * share)))
            rankings += [
                {"date": "2026-11-28", "task": task, "view": view, "rank": rank, "model_id": m}
                for rank, m in enumerate(picked, 1)
            ]
    exclusions = [
        {"model_id": f"gated/model-{i}", "task": None, "reason": "gated on the Hub", "kind": "gated"}
        for i in range(200)
    ]
    return {"latest": latest, "history": history, "rankings": rankings, "exclusions": exclusions, "scripts": scripts}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


SEARCH_JS = """(id) => {
  const input = document.getElementById("q");
  input.value = id;
  input.dispatchEvent(new Event("input"));
  return [...document.querySelectorAll("#rows tr[data-i] td.model .hub")].map((e) => e.textContent);
}"""


def measure(site: Path, runs: int, sample: list[str] | None = None) -> dict[str, Any]:
    """Median first paint and script-ready times over ``runs`` loads, and the worst filter time."""
    from playwright.sync_api import sync_playwright

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/index.html"
    paints, readies, filters = [], [], []
    found: dict[str, Any] = {}
    try:
        with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            for _ in range(runs):
                page = context.new_page()
                page.goto(url)
                page.wait_for_selector("html[data-ready='1']", timeout=30_000)
                paint = page.evaluate(
                    "performance.getEntriesByName('first-contentful-paint').map(e => e.startTime)[0] || null"
                )
                paints.append(paint)
                readies.append(float(page.evaluate("document.documentElement.dataset.readyMs")))
                page.click("#view-tabs button[data-view='all']")  # the largest list: every model of the task
                filters.extend(page.evaluate(FILTER_JS, q) for q in QUERIES)
                if sample is not None and "entries" not in found:
                    found["entries"] = page.evaluate(
                        "JSON.parse(document.getElementById('trncat-data').textContent).entries.length"
                    )
                    page.select_option("#f-device", "all")
                    missed = []
                    for model_id, task in sample:
                        page.click(f"#task-tabs button[data-task='{task}']")
                        if model_id not in page.evaluate(SEARCH_JS, model_id):
                            missed.append(model_id)
                    found["missed"] = missed
                page.close()
            context.close()
    finally:
        server.shutdown()
    return {
        "first_render_ms": statistics.median(paints),
        "script_ready_ms": statistics.median(readies),
        "filter_ms_worst": max(filters),
        "filter_ms_median": statistics.median(filters),
        **found,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write index.html into this folder and keep it")
    args = parser.parse_args(argv)
    data = synthetic(args.rows)
    began = time.perf_counter()
    html = render_page(**data)
    build_s = time.perf_counter() - began
    with tempfile.TemporaryDirectory() as tmp:
        site = args.keep or Path(tmp)
        site.mkdir(parents=True, exist_ok=True)
        (site / "index.html").write_text(html, encoding="utf-8")
        raw = html.encode()
        transfer = len(gzip.compress(raw, 6))
        print(f"rows: {args.rows}  build: {build_s:.2f} s  page: {len(raw) / 1e6:.2f} MB stored, "
              f"{transfer / 1e6:.2f} MB transferred (gzip)")  # fmt: skip
        if not Path(CHROMIUM).is_file():
            print("no /usr/bin/chromium: install Debian's chromium to measure in a browser")
            return 1
        sample = [(r["model_id"], r["task"]) for r in data["latest"][:: max(1, args.rows // 20)]]
        result = measure(site, args.runs, sample)
    print(f"first render (first contentful paint): {result['first_render_ms']:.0f} ms")
    print(f"script ready (tabs, search, filters):   {result['script_ready_ms']:.0f} ms")
    print(f"filter by search: worst {result['filter_ms_worst']:.0f} ms, median {result['filter_ms_median']:.0f} ms")
    # An exclusion without a task keeps the model out of every task: one entry per task.
    expected = len({(r["model_id"], r["task"]) for r in data["latest"]}) + len(data["exclusions"]) * len(TASKS)
    searchable = result["entries"] == expected and not result["missed"]
    print(f"searchable: {result['entries']} entries in the page's data (expected {expected}), "
          f"{len(sample) - len(result['missed'])}/{len(sample)} sampled ids found by search")  # fmt: skip
    ok = (
        transfer <= 2_000_000
        and result["first_render_ms"] <= 300
        and max(result["script_ready_ms"], result["filter_ms_worst"]) <= 1000
        and searchable
    )
    print("goals (<= 2 MB transferred, first render <= 300 ms, ready and filter <= 1 s, every row searchable):",
          "met" if ok else "NOT met")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
