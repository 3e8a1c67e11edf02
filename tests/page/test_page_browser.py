"""The catalog page in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright's Python package.

Skipped only where /usr/bin/chromium or the playwright package is missing (CI installs both). The page is served
from a loopback HTTP server; a screenshot of each run lands in test-artifacts/.
"""

from __future__ import annotations

import datetime as dt
import functools
import http.server
import json
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.page import render_page
from pipeline.records import flatten
from pipeline.space import SiteNames, write_site
from tests import FIXTURES, ROOT
from tests.conftest import DemoRun
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.records import sample_failure, sample_record

ARTIFACTS = ROOT / "test-artifacts"


def _playwright() -> Any:
    if not CHROMIUM.is_file():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("needs the playwright Python package (pip install 'playwright>=1.40')")
    return sync_playwright


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class names it so)
        pass


@pytest.fixture
def serve() -> Iterator[Callable[[Path], str]]:
    """Serve a folder on 127.0.0.1; returns its base URL."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(folder: Path) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=folder))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start headless Chromium with a fresh user data dir; returns its (only) browser context."""
    sync_playwright = _playwright()
    with sync_playwright() as playwright:
        contexts: list[Any] = []

        def start(**options: Any) -> Any:
            profile = tmp_path / f"profile-{len(contexts)}"
            context = playwright.chromium.launch_persistent_context(
                str(profile),
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 900},
                **options,
            )
            contexts.append(context)
            return context

        yield start
        for context in contexts:
            context.close()


def _open(context: Any, url: str) -> tuple[Any, dict[str, list[str]]]:
    """A page loaded from ``url`` once its script is ready, with what it logged, requested and alerted."""
    seen: dict[str, list[str]] = {"errors": [], "requests": [], "dialogs": []}
    page = context.new_page()
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)))
    page.on("request", lambda request: seen["requests"].append(request.url))

    def on_dialog(dialog: Any) -> None:
        seen["dialogs"].append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(url)
    page.wait_for_selector("html[data-ready='1']", timeout=10_000)
    return page, seen


def _models(page: Any) -> list[str]:
    return page.locator("#rows tr[data-i] td.model .hub").all_inner_texts()


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """The Space the demo built (the session's one demo run, copied), rebuilt (as ``trncat page`` would) after a
    rankings snapshot and an exclusion were added to the demo's dataset."""
    _playwright()  # skip before the demo's minutes of work when there is no browser
    from pipeline.cli.demo import DEMO_NOTE, SPACE_REPO

    demo: DemoRun = request.getfixturevalue("demo_run")
    assert demo.code == 0 and "(merged)" in demo.printed, demo.printed
    # as one demo made it: no other test wrote into the shared run (test_demo's second demo goes into a copy)
    assert len(list((demo.root / "dataset" / "data" / "results").glob("*.parquet"))) == 1
    root = tmp_path_factory.mktemp("demo") / "out"
    shutil.copytree(demo.root, root)
    out, space = root / "dataset", root / "space"
    assert (space / "index.html").is_file()
    # Replace the demo's own trending snapshot (same file, same date) with one that also ranks an unmeasured model.
    [snapshot] = sorted((out / "data/rankings").glob("*-text-generation-trending.parquet"))
    date = dt.date.fromisoformat(snapshot.name[:10])
    _write(
        snapshot,
        [
            {
                "date": date,
                "task": "text-generation",
                "view": "trending",
                "rank": 1,
                "model_id": "trncat-demo/tiny-llama",
            },
            {"date": date, "task": "text-generation", "view": "trending", "rank": 2, "model_id": "acme/next"},
        ],
    )
    _write(
        out / "data/exclusions.parquet",
        [
            {
                "model_id": "acme/remote",
                "task": "text-generation",
                "reason": "needs trust_remote_code (custom_code tag): trncat never runs remote code, " * 3,
                "kind": "remote_code",
            }
        ],
    )
    names = SiteNames(dataset_repo="trncat-demo/results", space_repo=SPACE_REPO, note=DEMO_NOTE)
    write_site(out, space, names=names)
    return space


@pytest.mark.slow
@pytest.mark.e2e  # its fixture runs the whole demo when it is the first test of the session to ask for it
def test_the_demo_space_switches_views_searches_and_copies_the_command(
    demo_site: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    base = serve(demo_site)
    context = launch()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    page, seen = _open(context, f"{base}/index.html")

    # The demo says plainly what its rows are; no count calls them Trainium results.
    assert "measured on this machine's CPU with tiny models" in page.locator("#note").inner_text()
    assert page.locator("#counts").inner_text().startswith("No Trainium2 results yet. 5 rows were measured on CPU")
    # Default: the first view with a snapshot, in ranking order, the unmeasured one marked; every device (no
    # Trainium row exists), the CPU row badged.
    assert page.locator("#caption").inner_text().startswith("Text generation · Trending")
    assert _models(page) == ["trncat-demo/tiny-llama", "acme/next"]
    first = page.locator("#rows tr[data-i]").nth(0)
    assert first.locator("td.status .b-dev").inner_text() == "CPU" and first.locator("td.device").inner_text() == "CPU"
    assert page.locator("#rows tr[data-i]").nth(1).locator("td.status").inner_text() == "not yet measured"
    page.select_option("#f-device", "neuron")  # Trainium rows only: the CPU row goes, with a word why
    assert _models(page) == ["acme/next"]
    page.select_option("#f-device", "all")

    page.click("#task-tabs button[data-task='image-text-to-text']")
    page.click("#view-tabs button[data-view='all']")
    assert _models(page) == ["trncat-demo/tiny-llava"]
    assert "runs" in page.locator("#rows td.status").first.inner_text()
    assert page.locator(".plot-grid[data-task='image-text-to-text']").is_visible()  # plots follow the task
    assert not page.locator(".plot-grid[data-task='text-generation']").is_visible()
    assert "no measurements" not in page.locator(".plot-grid[data-task='image-text-to-text']").inner_text()
    # The demo's text-to-image row: the task's own columns (seconds per image, resolution and steps).
    page.click("#task-tabs button[data-task='text-to-image']")
    assert _models(page) == ["trncat-demo/tiny-sd"] and not page.locator("#task-empty").is_visible()
    assert "s / image" in page.locator("#catalog thead").inner_text()
    assert "32² · 20 steps" in page.locator("#rows tr[data-i]").first.inner_text()

    page.click("#task-tabs button[data-task='text-generation']")
    assert _models(page) == ["acme/remote", "trncat-demo/tiny-llama"]
    reason = page.locator("#rows tr[data-i]").first.locator(".excluded-reason")
    assert reason.inner_text().endswith("trncat never runs remote code,")  # whole, not cut
    assert reason.inner_text().startswith("remote_code: needs") and reason.inner_text().count("remote_code:") == 1
    page.locator("#rows tr[data-i]").first.locator("a.more").click()  # an excluded model's details
    detail = page.locator("tr.detail")
    assert "Excluded from the benchmark: remote_code: needs trust_remote_code" in detail.inner_text()
    assert "not yet measured" not in detail.inner_text().lower() and detail.locator(".file").count() == 0
    assert "m=acme%2Fremote" in page.url
    page.go_back()  # back: the details close; back again: the previous task
    page.wait_for_function("() => !document.querySelector('tr.detail')")
    page.go_back()
    page.wait_for_function("() => document.querySelector('#caption').textContent.startsWith('Text-to-image')")
    assert _models(page) == ["trncat-demo/tiny-sd"]
    page.go_forward()
    page.go_forward()
    page.wait_for_selector("tr.detail")
    assert "Excluded from the benchmark" in page.locator("tr.detail").inner_text()
    page.locator("#rows tr[data-i]").first.locator("a.more").click()  # close it again

    page.select_option("#f-status", "excluded")
    assert _models(page) == ["acme/remote"]
    page.select_option("#f-status", "all")
    page.fill("#q", "LLAMA")
    assert _models(page) == ["trncat-demo/tiny-llama"]
    assert "q=LLAMA" in page.url  # the state lives in the URL: a search can be shared

    page.click("#rows a.more")
    detail = page.locator("tr.detail")
    run_py = detail.locator(".file pre.code").first.inner_text()
    assert "MODEL_ID = 'trncat-demo/tiny-llama'" in run_py
    requirements = detail.locator(".file pre.code").nth(1)
    assert requirements.inner_text().startswith("# Requirements to run trncat-demo/tiny-llama")
    box = requirements.bounding_box()
    assert box is not None and requirements.evaluate("e => e.scrollWidth <= e.clientWidth")  # the first line shows
    assert "transformers==" in requirements.inner_text()
    assert detail.locator("a.download").first.get_attribute("href").startswith("data:text/plain")
    assert "History across toolchains" in detail.inner_text()
    venv = "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt"
    command = f"{venv} && python run.py --device cpu"  # the demo measured on the CPU
    assert detail.locator("code.cmd").inner_text() == command
    detail.get_by_role("button", name="Copy command").click()
    page.wait_for_function("() => document.querySelector('tr.detail .command button').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == command
    detail.locator(".file").first.get_by_role("button", name="Copy").click()
    page.wait_for_function("() => document.querySelector('tr.detail .file button').textContent === 'Copied'")
    script = (demo_site / "scripts/trncat-demo/tiny-llama/run.py").read_text(encoding="utf-8")
    assert page.evaluate("navigator.clipboard.readText()") == script
    # The relative link to the script works: the Space holds the scripts beside the page.
    assert page.request.get(f"{base}/scripts/trncat-demo/tiny-llama/run.py").ok
    assert page.request.get(f"{base}/feed.xml").ok

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-demo.png"), full_page=True)
    assert seen["errors"] == [] and seen["dialogs"] == []
    assert all(url.startswith((base, "data:")) for url in seen["requests"]), seen["requests"]


def _inside_the_window(page: Any) -> None:
    """Nothing of the page passes the 1400 px window: no sideways scroll, no cell or details pane past its edge."""
    width = page.evaluate("window.innerWidth")
    assert width == 1400 and page.evaluate("document.documentElement.scrollWidth") <= width
    rights = page.evaluate(
        "() => [...document.querySelectorAll('td.toolchain, tr.detail .detail-box, #table-wrap')]"
        ".map(e => e.getBoundingClientRect().right)"
    )
    assert rights and max(rights) <= width, rights
    wrap = "() => { const w = document.querySelector('#table-wrap'); return w.scrollWidth <= w.clientWidth; }"
    assert page.evaluate(wrap)  # the table itself fits: no sideways scroll inside its frame


@pytest.mark.slow
@pytest.mark.e2e  # its fixture runs the whole demo when it is the first test of the session to ask for it
def test_the_demo_page_shows_compare_and_a_cost_labelled_demo(
    demo_site: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    """Issue 37: a newcomer sees every part of the page in the demo, and nothing of it reads as a Trainium2 or a GPU
    result: Compare shows a demo CPU run in both places, each side badged demo and CPU; a cost cell shows a cost
    at the demo's labelled price; a CPU row's compile says nothing was compiled; nothing passes a 1400 px window."""
    base = serve(demo_site)
    page, seen = _open(launch(), f"{base}/index.html")
    ARTIFACTS.mkdir(exist_ok=True)

    compare = page.locator("#compare")
    assert compare.is_visible() and "Neither side is a Trainium2 or a GPU result" in compare.inner_text()
    pairs = compare.locator("tbody.pair")
    assert pairs.count() == 5  # one per demo task, each passing
    for k in range(pairs.count()):
        sides = pairs.nth(k).locator("tr.side td.device")
        texts = sides.all_inner_texts()
        assert len(texts) == 2 and all(t.startswith("demo\nCPU") or t.startswith("demoCPU") for t in texts), texts
        assert "Trainium2 place" in texts[0] and "cuda-labelled twin" in texts[1]
        assert pairs.nth(k).locator(".b-trn").count() == 0
        assert pairs.nth(k).locator("tr.ratio").inner_text().startswith("demo: the CPU run ÷ itself")
    cost = pairs.first.locator("td.cost").first
    assert cost.inner_text().startswith(("$", "< $")) and "trncat demo: an invented" in cost.get_attribute("title")
    compare.screenshot(path=str(ARTIFACTS / "page-demo-compare.png"))

    page.click("#task-tabs button[data-task='text-generation']")
    page.click("#view-tabs button[data-view='all']")
    row = page.locator("#rows tr[data-i]").filter(has_text="trncat-demo/tiny-llama")
    headers = [t.strip() for t in page.locator("#catalog thead th").all_inner_texts()]
    cell = row.locator("td").nth(headers.index("$ / 1M tokens"))
    assert cell.inner_text().startswith(("$", "< $")) and "trncat demo: an invented" in cell.get_attribute("title")
    assert "demo" in row.locator("td.status .b-demo").inner_text()
    assert row.locator("td").nth(headers.index("Compile")).inner_text() == "—, not compiled on CPU"
    row.screenshot(path=str(ARTIFACTS / "page-demo-cost.png"))
    row.locator("a.more").click()
    detail = page.locator("tr.detail")
    assert "History across toolchains" in detail.inner_text()
    assert detail.locator("table.history td").nth(5).inner_text() == "—, not compiled on CPU"
    _inside_the_window(page)
    page.screenshot(path=str(ARTIFACTS / "page-demo-details.png"), full_page=True)
    assert seen["errors"] == [] and seen["dialogs"] == []


@pytest.mark.slow
@pytest.mark.e2e  # its fixture runs the whole demo when it is the first test of the session to ask for it
def test_the_first_view_reads_without_javascript(
    demo_site: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    page = launch(java_script_enabled=False).new_page()
    base = serve(demo_site)
    page.goto(f"{base}/index.html")
    assert page.locator("html").get_attribute("class") == "no-js"
    assert page.locator("#rows tr[data-i] td.model .hub").all_inner_texts() == ["trncat-demo/tiny-llama", "acme/next"]
    assert not page.locator("#q").is_visible()  # controls that need the script are hidden, not dead
    # the default task's plots (speed, memory, compile, pass rate), and the tiny Llama's serving curve
    assert page.locator("svg.plot:not(.serving-curve):visible").count() == 4
    assert page.locator("svg.plot.serving-curve:visible").count() == 1
    assert page.locator("#rows tr[data-i] td.status .b-dev").first.inner_text() == "CPU"
    # Every visible link to a script leads to a file that exists; the unmeasured model has none.
    hrefs = page.eval_on_selector_all(
        "#rows a.more", "els => els.filter(e => e.offsetParent).map(e => e.getAttribute('href'))"
    )
    assert hrefs == ["scripts/trncat-demo/tiny-llama/run.py"]
    assert all(page.request.get(f"{base}/{h}").ok for h in hrefs)


PWN = "window.__pwned=1;alert(1)"
PAYLOADS = [
    f'<img src=x onerror="{PWN}">',
    f"</script><script>{PWN}</script>",
    f'" autofocus onfocus="{PWN}" x="',
    f"'><svg onload={PWN}>",
    f"javascript:{PWN}",
    "<!--<script>",
]


def _hostile_page() -> str:
    return render_page(**hostile_rows())


def hostile_rows() -> dict[str, Any]:
    """render_page's arguments with a payload in every text field a record, a price table or the Hub can fill."""
    text = " ".join(PAYLOADS)
    fail = flatten(sample_failure(model_id="acme/broken", message=text))
    fail["hardware"] = PAYLOADS[2]
    fail["plan_advice"] = PAYLOADS[3]
    fail["neuronx_cc_version"] = PAYLOADS[0]
    odd = flatten(sample_record(model_id="acme/fine"))
    odd["model_id"] = PAYLOADS[4]  # a model id no validator let through: still only text
    # A price table is a file anyone can pass (--prices): its text reaches the cost cells' titles and the Compare view.
    fail.update(price_usd_per_hour=1.0, price_option=PAYLOADS[0], price_source=PAYLOADS[1], price_as_of=PAYLOADS[5])
    odd.update(price_usd_per_hour=2.0, price_region=PAYLOADS[2], price_source=PAYLOADS[3])
    odd["cost_usd_per_million_tokens"] = 1.0
    gpu = {**odd, "device": "cuda", "hardware": PAYLOADS[1], "instance_type": PAYLOADS[0], "price_source": PAYLOADS[4]}
    rankings = [
        {"date": "2026-11-28", "task": "text-generation", "view": "selected", "rank": rank, "model_id": model_id}
        for rank, model_id in enumerate(["acme/broken", PAYLOADS[1], PAYLOADS[0], PAYLOADS[4], "acme/excluded"], 1)
    ]
    exclusions = [
        {"model_id": "acme/excluded", "task": None, "reason": text, "kind": PAYLOADS[3]},
        {"model_id": PAYLOADS[2], "task": "text-generation", "reason": PAYLOADS[1], "kind": "gated"},
    ]
    scripts = {"acme/broken": {"run.py": text, "requirements.txt": PAYLOADS[1]}}
    return {"latest": [fail, odd, gpu], "rankings": rankings, "exclusions": exclusions, "scripts": scripts}


@pytest.mark.parametrize("csp", [True, False], ids=["with-csp", "escaping-alone"])
def test_hostile_text_renders_as_text_and_no_script_runs(
    csp: bool, tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    html = _hostile_page()
    if not csp:
        # Without the policy, escaping alone must hold: a payload that escaped would run here.
        html, count = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
        assert count == 1
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(html, encoding="utf-8")
    page, seen = _open(launch(), f"{serve(site)}/index.html")

    for view in ("selected", "all"):
        page.click(f"#view-tabs button[data-view='{view}']")
        for index in range(page.locator("#rows a.more").count()):
            page.locator("#rows a.more").nth(index).click()
        page.locator("#rows td.status").first.hover()
    page.fill("#q", "<img")
    page.fill("#q", "")
    page.click("#view-tabs button[data-view='selected']")
    page.locator("#rows a.more").first.click()

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert seen["dialogs"] == [] and seen["errors"] == []
    assert page.evaluate("document.querySelectorAll('img, svg:not(.plot):not(.plot *), iframe').length") == 0
    assert page.evaluate("document.scripts.length") == 3
    shown = page.locator("#rows").inner_text()
    for payload in PAYLOADS:
        assert payload in shown or payload.strip() in shown, payload
    assert page.locator("tr.detail pre.message").first.inner_text() == " ".join(PAYLOADS)
    compare = page.locator("#compare-table").inner_text()
    assert PAYLOADS[4] in compare and PAYLOADS[1] in compare  # the model id and the GPU's hardware, as text
    titles = page.eval_on_selector_all("td.cost, #rows td[title]", "els => els.map(e => e.title)")
    assert any(PAYLOADS[3] in t for t in titles) and any(PAYLOADS[4] in t for t in titles)
    hrefs = page.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    downloads = [h for h in hrefs if h.startswith("data:")]
    assert downloads and all(h.startswith("data:text/plain;charset=utf-8,") for h in downloads)  # inert text
    assert not [h for h in hrefs if not h.startswith("data:") and ("javascript:" in h.lower() or "__pwned" in h)]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"page-xss-{'csp' if csp else 'no-csp'}.png"), full_page=True)


def test_each_task_tab_shows_its_own_columns(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    fixtures = FIXTURES / "valid"

    def fixture(name: str, model_id: str) -> dict[str, Any]:
        record = json.loads((fixtures / name).read_text(encoding="utf-8"))
        record["model_id"] = model_id
        return flatten(record)

    latest = [
        flatten(sample_record(model_id="acme/gen")),
        fixture("sentence_embeddings_cpu_pass.json", "acme/embed"),
        fixture("text_to_image_cpu_pass.json", "acme/paint"),
    ]
    site = tmp_path / "site"
    site.mkdir()
    html = render_page(latest=latest, rankings=[], exclusions=[], scripts={})
    (site / "index.html").write_text(html, encoding="utf-8")
    page, seen = _open(launch(), f"{serve(site)}/index.html#device=all")

    def headers() -> list[str]:
        return [t.strip() for t in page.locator("#catalog thead th").all_inner_texts()]

    assert "TTFT" in headers() and "s / image" not in headers()
    page.click("#task-tabs button[data-task='text-to-image']")
    assert page.locator("#task-tabs button[aria-selected='true']").inner_text() == "Text-to-image"
    assert _models(page) == ["acme/paint"]
    assert headers()[6:10] == ["s / image", "Steps/s", "VAE decode", "Resolution · steps"]
    assert "TTFT" not in headers() and "Decode tok/s" not in headers()
    cells = page.locator("#rows tr[data-i] td").all_inner_texts()
    assert cells[6:10] == ["520 ms", "41.0", "30 ms", "64² · 20 steps"]
    assert "diffusers 0.35.0" in cells[-1]
    assert page.locator(".plot-grid[data-task='text-to-image']").is_visible()
    assert "Seconds per image vs parameters" in page.locator(".plot-grid[data-task='text-to-image']").inner_text()
    page.click("#catalog thead th[data-sort='seconds_per_image']")  # its own columns sort
    page.locator("#rows a.more").first.click()
    detail = page.locator("tr.detail").inner_text()
    assert "s / image" in detail and "520 ms" in detail and "Decode" not in detail

    page.click("#task-tabs button[data-task='sentence-embeddings']")
    assert headers()[6:10] == ["Sentences/s", "p50 batch 1", "p50 batch 32", "Dim"]
    assert page.locator("#rows tr[data-i] td").all_inner_texts()[6:10] == ["1032", "2 ms", "31 ms", "32"]
    page.locator("#rows a.more").first.click()
    detail = page.locator("tr.detail").inner_text()
    assert "Answer check: cosine 1 between the sentence embeddings" in detail and "at least 0.99" in detail

    page.click("#task-tabs button[data-task='image-text-to-text']")  # no row of it in this page
    assert page.locator("#task-empty").is_visible() and not page.locator("#catalog").is_visible()
    page.click("#task-tabs button[data-task='text-generation']")
    assert headers()[6:9] == ["TTFT", "Decode tok/s", "Wall"] and _models(page) == ["acme/gen"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-tasks.png"), full_page=True)
    assert seen["errors"] == [] and seen["dialogs"] == []


def test_the_compare_view_sets_a_trainium2_row_beside_a_cuda_row(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    """One model measured on both devices: the Compare view shows each row as measured, with its badge, its
    price's provenance on hover, and the ratios; the catalog table keeps showing the Trainium2 row."""
    from pipeline.dataset import build, read_latest
    from pipeline.prices import load_pricing

    neuron = sample_record(model_id="acme/both")
    cuda = sample_record(
        model_id="acme/both",
        device="cuda",
        hardware={"name": "nvidia-l40s", "instance_type": "g6e.xlarge", "accelerator": "NVIDIA L40S",
                  "core_config": None, "memory_per_core_bytes": 48 * 1024**3, "cores_available": 1},
        versions={"torch_neuronx": None, "neuronx_cc": None, "runtime": None, "driver": None, "sdk": None,
                  "cuda": "12.8"},
        metrics={"decode_tokens_per_s": 100.0, "peak_device_memory_bytes": 2_500_000_000, "compile_s": 0.0,
                 "warm_start_s": None, "compile_cache_hit": None},
    )  # fmt: skip
    only_trainium = sample_record(model_id="acme/alone")
    dataset = tmp_path / "ds"
    build([neuron, cuda, only_trainium], dataset, pricing=load_pricing())
    site = tmp_path / "site"
    site.mkdir()
    html = render_page(latest=read_latest(dataset), rankings=[], exclusions=[], scripts={})
    (site / "index.html").write_text(html, encoding="utf-8")
    page, seen = _open(launch(), f"{serve(site)}/index.html")

    pairs = page.locator("#compare-table tbody.pair")
    assert pairs.count() == 1  # acme/alone has no GPU row: no pair
    sides = pairs.first.locator("tr.side")
    assert sides.count() == 2
    trn, gpu = (sides.nth(k).locator("td").all_inner_texts() for k in (0, 1))
    # The Trainium2 side: its badge, its hardware, 1 core, 77.1 tok/s, 2.9 GiB, $85.964 x 1/64 / (77.1 x 3600) x 1e6.
    assert trn[:3] == ["acme/both", "Text generation\nspeed: Decode tok/s", "Trainium2"]
    assert trn[3:] == ["trn2.48xlarge", "1", "77.1", "2.9 GiB", "$4.84"]
    # The GPU side, as measured on its own device: $1.861 / (100 x 3600) x 1e6 = $5.17 per million tokens.
    assert gpu == ["cuda", "nvidia-l40s\ng6e.xlarge", "1", "100", "2.3 GiB", "$5.17"]
    badges = pairs.first.locator(".badge").evaluate_all("els => els.map(e => e.className)")
    assert badges == ["badge b-trn", "badge b-dev"]
    ratio = pairs.first.locator("tr.ratio td").all_inner_texts()
    assert ratio == ["Trainium2 \u00f7 GPU", "\u00d70.77", "\u00d71.24", "\u00d70.94"]
    titles = pairs.first.locator("td.cost").evaluate_all("els => els.map(e => e.title)")
    assert "$85.964 per instance-hour (on_demand, us-east-2; SkyPilot catalog" in titles[0]
    assert titles[0].endswith("(third party); undated), for the run's share of the instance")
    assert "$1.861 per instance-hour (on_demand, us-east-1;" in titles[1]
    # The catalog table: the Trainium2 row stands for the model, its cost in its own column with the same title.
    headers = [t.strip() for t in page.locator("#catalog thead th").all_inner_texts()]
    assert headers[6:10] == ["TTFT", "Decode tok/s", "Wall", "$ / 1M tokens"]
    row = page.locator("#rows tr[data-i]").filter(has_text="acme/both")
    cell = row.locator("td").nth(9)
    assert cell.inner_text() == "$4.84" and "SkyPilot catalog" in (cell.get_attribute("title") or "")
    row.locator("a.more").click()
    assert "Price: At $85.964 per instance-hour (on_demand" in page.locator("tr.detail").inner_text()
    # Issue 37: the Trainium2 row's history lists its own runs, never the cuda row; nothing passes the window.
    history = page.locator("tr.detail table.history tbody tr").all_inner_texts()
    assert len(history) == 1 and "(neuron)" in history[0] and "cuda" not in history[0]
    _inside_the_window(page)
    assert "Cost: the row's share of its instance" in page.locator("#cost-legend").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-compare.png"), full_page=True)


def test_the_search_box_answers_a_model_with_no_row_from_its_family(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    llama = {"architecture": "LlamaForCausalLM", "model_type": "llama"}
    latest = [
        flatten(sample_record(model_id="acme/llama-a", cores=2, **llama)),
        flatten(sample_record(model_id="acme/llama-b", cores=8, **llama)),
        flatten(sample_failure(model_id="acme/llama-c", code="ncc_eoom001", **llama)),
    ]
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(render_page(latest=latest, rankings=[], exclusions=[], scripts={}), "utf-8")
    base = serve(site)
    context = launch()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    page, seen = _open(context, f"{base}/index.html")
    card = page.locator("#family-card")
    assert not card.is_visible()
    # The table by architecture is there without any search.
    assert "LlamaForCausalLM" in page.locator("#families").inner_text()

    page.fill("#q", "someone/My-Llama-3-finetune")
    assert card.is_visible() and _models(page) == []
    text = card.inner_text()
    assert "someone/My-Llama-3-finetune has no row in this catalog" in text
    assert (
        "LlamaForCausalLM (llama) · Text generation: 2 of 3 run on Trainium2 (fails: ncc_eoom001 ×1); cores 1–8" in text
    )
    assert "a guess from the name alone" in text
    command = "trncat check someone/My-Llama-3-finetune"
    assert card.locator("code.cmd").inner_text() == command
    card.get_by_role("button", name="Copy command").click()
    page.wait_for_function("() => document.querySelector('#family-card .command button').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == command

    page.fill("#q", "acme/llama-a")  # it has a row: no card, its row
    assert not card.is_visible() and _models(page) == ["acme/llama-a"]
    page.fill("#q", "other/qwen-thing")  # no family matches its name: the command alone
    assert "No measured family matches its name" in card.inner_text() and card.locator("code.cmd").count() == 1

    # A link can carry any search: text that is no model id is shown as text, and never offered as a command.
    hostile = '<img src=x onerror="window.__pwned=1">/x; rm -rf ~'
    page.goto(f"{base}/index.html#q={quote(hostile)}")
    page.wait_for_selector("html[data-ready='1']")
    assert card.is_visible() and hostile in card.inner_text() and card.locator("code.cmd").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-family-search.png"), full_page=True)
    assert seen["errors"] == [] and seen["dialogs"] == []


def test_the_release_section_lists_counts_regressions_first_and_a_delta_plot(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    """Issue 30: a release diff in the dataset becomes a "Neuron OLD → NEW" section of the Space's page (its
    counts, the regressions first with their codes and both rows' dates, the medians, the speed plot) and an
    entry of its feed."""
    from pipeline.dataset import build, write_release_diff
    from pipeline.release import diff_dataset
    from tests.support.records import fake_revision

    old, new = {"neuronx_cc": "1.0.0"}, {"neuronx_cc": "2.0.0"}

    def run(day: int) -> dict[str, str]:
        return {"started_at": f"2026-11-{day}T10:00:00+00:00", "finished_at": f"2026-11-{day}T10:05:00+00:00"}

    def rec(model: str, pins: dict[str, str], day: int, **metrics: Any) -> dict[str, Any]:
        return sample_record(model_id=model, revision=fake_revision(model), versions=pins, run=run(day),
                             metrics=metrics)  # fmt: skip

    def bad(model: str, pins: dict[str, str], day: int, code: str) -> dict[str, Any]:
        return sample_failure(model_id=model, revision=fake_revision(model), versions=pins, run=run(day), code=code)

    records = [
        rec("acme/steady", old, 20), rec("acme/steady", new, 29, decode_tokens_per_s=92.52),
        rec("acme/broke", old, 20), bad("acme/broke", new, 29, "ncc_evrf007"),
        bad("acme/fixed", old, 20, "ncc_evrf001"), rec("acme/fixed", new, 29),
        rec("acme/slower", old, 20), rec("acme/slower", new, 29, decode_tokens_per_s=61.68),
    ]  # fmt: skip
    dataset = tmp_path / "ds"
    assert not build(records, dataset, page=False).set_aside
    diff = diff_dataset(dataset, old="2.33.0", new="2.34.0", old_pins=old, new_pins=new)
    write_release_diff(dataset, old="2.33.0", new="2.34.0", entries=diff.entries)
    site = tmp_path / "site"
    write_site(dataset, site, names=SiteNames(dataset_repo="acme/results", space_repo="acme/catalog"))
    page, seen = _open(launch(), f"{serve(site)}/index.html")

    section = page.locator("section.release")
    assert section.count() == 1 and section.is_visible()
    assert section.locator("h2").inner_text() == "Neuron 2.33.0 → 2.34.0"
    counts = section.locator(".release-counts li").all_inner_texts()
    assert counts == ["1 newly failing", "1 newly passing", "2 still passing"]
    rows = section.locator(".release-table tbody tr")
    first = rows.nth(0).locator("td").all_inner_texts()
    assert first[:4] == ["acme/broke", "Text generation", "newly failing", "— → ncc_evrf007"]
    assert first[-1] == "2026-11-20 → 2026-11-29"
    assert "regression" in (rows.nth(0).get_attribute("class") or "")
    speeds = {r.locator("td").nth(0).inner_text(): r.locator("td").nth(6).inner_text() for r in rows.all()}
    # 77.1 -> 92.52, -> 61.68; these rows were each measured once, so the page says it cannot tell (issue 50)
    assert speeds["acme/steady"] == "+20.0% (no interval: cannot tell)"
    assert speeds["acme/slower"] == "−20.0% (no interval: cannot tell)"
    # the medians are of the changes only: neither speed change is one, and the page says why
    assert "speed — (2 no interval: cannot tell)" in section.locator(".release-medians").inner_text()
    plot = section.locator("svg.release-plot")
    assert plot.is_visible() and plot.locator("rect").count() == 2
    assert seen["errors"] == []
    feed = (site / "feed.xml").read_text(encoding="utf-8")
    assert "<title>Release diff: Neuron 2.33.0 → 2.34.0</title>" in feed
    assert "1 newly failing, 0 failing with another code, 1 newly passing, 2 still passing, speed: " in feed
    assert "2 no interval: cannot tell." in feed
    assert 'href="https://huggingface.co/spaces/acme/catalog#release-2.33.0--2.34.0"' in feed
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-release.png"), full_page=True)
