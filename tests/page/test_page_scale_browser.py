"""A catalog too large to inline (issue 36): the first view comes from the page alone, the rest from its data files.

In headless Chromium (Debian's, as tests/page/test_page_browser.py starts it). The small catalog here is split into
many files on purpose (50 entries each) so that a page of rows, a search and a sort each need several; the 100,000-row
test builds its catalog with Arrow (:mod:`tests.support.catalog_rows`).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from pipeline.page import DATA_DIR, PAGE_SIZE, index_columns, render_site
from pipeline.page.chunks import SEARCH_FIELDS
from tests.page import joined
from tests.page import test_page_browser as browser
from tests.support.catalog_rows import catalog_rows

_models, _open = browser._models, browser._open
#: The browser tests' fixtures: a loopback server for a folder, headless Chromium.
serve, launch = browser.serve, browser.launch

SEARCH_JS = """(q) => {
  const input = document.getElementById("q");
  input.value = q;
  input.dispatchEvent(new Event("input"));
}"""


def _write(site: Any, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.html").write_text(site.html, encoding="utf-8")
    for relative, text in site.files:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text, encoding="utf-8")


def _settled(page: Any) -> None:
    """Wait until the table shows what the state asks (no data file still loading)."""
    page.wait_for_selector("html[data-drawn]:not([data-busy])", state="attached", timeout=30_000)


def _search(page: Any, query: str) -> list[str]:
    page.evaluate(SEARCH_JS, query)
    _settled(page)
    return _models(page)


def _data_requests(seen: dict[str, list[str]]) -> list[str]:
    return [u for u in seen["requests"] if f"/{DATA_DIR}/" in u]


def test_the_index_lists_what_the_filters_and_every_table_column_need() -> None:
    for task in ("text-generation", "sentence-embeddings", "text-to-image", "an-unknown-task"):
        columns = index_columns(task)
        assert {"model_id", "status", "device", "cores_needed", "params", "excluded", "regression"} <= set(columns)
        assert len(columns) == len(set(columns))
    assert {"sentences_per_s", "latency_batch_1_p50_s", "latency_batch_32_p50_s", "embedding_dim", "cost_usd"} <= set(
        index_columns("sentence-embeddings")
    )


def test_a_small_catalog_stays_one_file_and_a_large_one_writes_data_files() -> None:
    data = catalog_rows(300)
    one_file = render_site(**data)
    assert one_file.files == []  # under INLINE_ENTRIES: one file, as opened from disk
    assert one_file.html.count('<svg class="plot"') == 5 * 4 and "data-src=" not in one_file.html  # every task's plots
    site = render_site(**data, inline_entries=100, chunk=50)
    # Each task's plots are a JSON list of well-formed <svg>s; only the first view's task's are in the page too, in a
    # noscript (for a reader without JavaScript; a browser running the script parses none of them).
    assert site.html.count('<svg class="plot"') == 4 and site.html.count("data-src=") == 5
    assert re.search(r'<noscript>\s*<svg class="plot"', site.html)
    plot_files = [text for path, text in site.files if "-plots-" in path]
    assert len(plot_files) == 5  # five tasks, four plots each
    assert all(ElementTree.fromstring(svg).tag.endswith("svg") for text in plot_files for svg in json.loads(text))
    names = [path for path, _ in site.files]
    assert all(path.startswith(f"{DATA_DIR}/t") and path.endswith(".json") for path in names)
    assert len(names) == len(set(names))
    # Named by their content: the same data gives the same names, other data other names.
    assert [p for p, _ in render_site(**data, inline_entries=100, chunk=50).files] == names
    changed = dict(data, latest=[dict(data["latest"][0], status="fail"), *data["latest"][1:]])
    assert [p for p, _ in render_site(**changed, inline_entries=100, chunk=50).files] != names
    inline = json.loads(site.html.split('id="trncat-data">', 1)[1].split("</script>", 1)[0])
    assert not inline["store"]["inline"] and len(inline["first"]["items"]) <= PAGE_SIZE
    assert "entries" not in inline["first"]  # its rows are the table's, read back by the script
    # Every entry of a task is in exactly one of its files (its row's and its details' HTML), in model-id order.
    first_task = inline["store"]["tasks"]["text-generation"]
    files = dict(site.files)
    rows_and_details = (first_task["chunks"], first_task["details"])
    entries = [pair for files_of in zip(*rows_and_details, strict=True)
               for pair in zip(*(joined(json.loads(files[path])) for path in files_of), strict=True)]  # fmt: skip
    assert [int(re.search(r'^<tr data-i="(\d+)"', row)[1]) for row, _ in entries] == list(range(first_task["n"]))
    ids = [re.search(r'class="hub"[^>]*>([^<]*)<', row)[1] for row, _ in entries]  # type: ignore[index]
    assert len(ids) == first_task["n"] and ids == sorted(ids)
    boxes = (detail for _, detail in entries)
    assert all(box.startswith(f'<div class="detail-box"><h3>{i} ') for i, box in zip(ids, boxes, strict=True))
    # The index is columnar, one array per field in entry order; a text field of few values is codes into them. It
    # holds what a search and the filters need; the sort columns are a file of their own, fetched on a first sort.
    index = json.loads(dict(site.files)[first_task["index"]])
    sort = json.loads(dict(site.files)[first_task["sort"]])
    assert list(index["cols"]) == index_columns("text-generation")[: len(SEARCH_FIELDS)] and index["n"] == len(ids)
    assert [*index["cols"], *sort["cols"]] == index_columns("text-generation")
    # The All view, numbered in its own order, is runs of consecutive entry numbers: every entry but the ranked ones
    # that nobody measured or excluded.
    runs = index["lists"]["all"]["runs"]
    numbers = [first + k for first, count in runs for k in range(count)]
    assert numbers == sorted(set(numbers)) and len(numbers) == first_task["lists"]["all"]["n"] <= len(ids)
    assert len(runs) < len(numbers) / 10
    assert index["cols"]["model_id"] == ids
    status = index["cols"]["status"]
    statuses = [status["v"][k] for k in status["i"]]
    assert len(status["v"]) < 5 and "fail" in statuses
    rows = (row for row, _ in entries)
    assert all(('class="badge b-fail"' in row) == (st == "fail") for st, row in zip(statuses, rows, strict=True))


@pytest.fixture(scope="module")
def chunked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    data = catalog_rows(600)
    folder = tmp_path_factory.mktemp("chunked")
    _write(render_site(**data, inline_entries=100, chunk=50), folder)
    return folder, data


def test_the_first_view_needs_no_data_file_and_the_rest_loads_on_demand(
    chunked: tuple[Path, dict[str, Any]], launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    folder, data = chunked
    base = serve(folder)
    page, seen = _open(launch(), f"{base}/index.html")
    _settled(page)
    first = _models(page)
    # The first view came with the page; once it is painted, the shown task's index comes while the browser is idle.
    assert len(first) == PAGE_SIZE and all(re.search(r"/t0-index-", u) for u in _data_requests(seen))
    assert "<svg" not in page.locator("main").inner_text()  # the noscript's plots, text to a running script, unshown
    # Another page of the same view: the task's index and the files its rows are in.
    page.click("#next")
    _settled(page)
    second = _models(page)
    assert len(second) == PAGE_SIZE and not set(second) & set(first)
    assert any("-index-" in u for u in _data_requests(seen))
    assert any(re.search(r"/t\d+-e\d+-[0-9a-f]{16}\.json$", u) for u in _data_requests(seen))
    # All, every device, sorted by params: the largest model of the task comes first.
    page.click("#view-tabs button[data-view='all']")
    page.select_option("#f-device", "all")
    _settled(page)
    page.click("#catalog th[data-sort='params']")
    page.click("#catalog th[data-sort='params']")
    _settled(page)
    generation = [r for r in data["latest"] if r["task"] == "text-generation"]
    assert _models(page)[0] == max(generation, key=lambda r: r["params"])["model_id"]
    # Params is a filter field, in the index; peak memory is a sort column only: its file comes on the first such sort.
    assert not [u for u in _data_requests(seen) if "-sort-" in u]
    page.click("#catalog th[data-sort='peak_device_memory_bytes']")
    _settled(page)
    assert len([u for u in _data_requests(seen) if "-sort-" in u]) == 1
    smallest = min((r for r in generation if r["peak_device_memory_bytes"] is not None),
                   key=lambda r: (r["peak_device_memory_bytes"], r["model_id"]))  # fmt: skip
    assert _models(page)[0] == smallest["model_id"]
    # A task's plots come when shown and scrolled near: a file of their own.
    assert not [u for u in _data_requests(seen) if "-plots-" in u]
    for task in ("text-generation", "sentence-embeddings"):
        page.click(f"#task-tabs button[data-task='{task}']")
        page.locator(f".plot-grid[data-task='{task}']").scroll_into_view_if_needed()
        page.wait_for_selector(f".plot-grid[data-task='{task}'] svg.plot")
        assert page.locator(f".plot-grid[data-task='{task}'] svg.plot:visible").count() == 4
    assert len([u for u in _data_requests(seen) if "-plots-" in u]) == 2
    page.click("#task-tabs button[data-task='text-generation']")
    _settled(page)
    # A search covers every row of the task; a model's details open from a fetched file.
    last = max(r["model_id"] for r in generation)
    assert _search(page, last) == [last]
    page.click("#rows tr[data-i] a.more")
    detail = page.locator("#rows tr.detail").inner_text()
    assert last in detail and "Run it" in detail
    # An id with no row anywhere gets the family card once every task's index is in.
    _search(page, "someone/llama-finetune")
    page.wait_for_selector("#family-card:not([hidden])")
    assert "has no row in this catalog" in page.locator("#family-card").inner_text()
    assert seen["errors"] == [] and seen["dialogs"] == []


def test_without_javascript_the_first_view_and_its_plots_show_from_the_page_alone(
    chunked: tuple[Path, dict[str, Any]], launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    folder, _ = chunked
    page = launch(java_script_enabled=False).new_page()
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    page.goto(f"{serve(folder)}/index.html")
    assert len(_models(page)) == PAGE_SIZE
    assert page.locator(".plot-grid[data-task='text-generation'] svg.plot:visible").count() == 4
    assert _data_requests({"requests": seen}) == []


def test_a_data_file_that_does_not_load_is_said_in_place_of_the_rows(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    _write(render_site(**catalog_rows(300), inline_entries=100, chunk=50), tmp_path / "site")
    for path in (tmp_path / "site" / DATA_DIR).glob("*-index-*"):
        path.unlink()
    page, seen = _open(launch(), f"{serve(tmp_path / 'site')}/index.html")
    page.click("#next")
    page.wait_for_selector("#rows td:has-text('did not load')")
    assert "HTTP 404" in page.locator("#rows").inner_text()


def test_hostile_text_in_the_data_files_renders_as_text_and_no_script_runs(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    """The payloads of the one-file page's test, fetched from data files two entries each, without the CSP: the rows
    and details the script places from a fetched file show them as text (the server escaped every one)."""
    rows = browser.hostile_rows()
    # The same rows under a second task too: its plots (model ids and toolchains in their labels) are a fetched file.
    rows["latest"] += [dict(r, task="sentence-embeddings") for r in rows["latest"]]
    site = render_site(**rows, inline_entries=0, chunk=2)
    assert site.files and any("-plots-" in path for path, _ in site.files)
    html, count = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", site.html)
    assert count == 1
    _write(type(site)(html=html, files=site.files), tmp_path / "site")
    page, seen = _open(launch(), f"{serve(tmp_path / 'site')}/index.html")
    page.click("#view-tabs button[data-view='all']")
    page.select_option("#f-device", "all")
    _settled(page)
    for index in range(page.locator("#rows a.more").count()):
        page.locator("#rows a.more").nth(index).click()
        _settled(page)
    _search(page, "<img")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert seen["dialogs"] == [] and seen["errors"] == [] and _data_requests(seen)
    assert page.evaluate("document.querySelectorAll('img, svg:not(.plot):not(.plot *), iframe').length") == 0
    _search(page, "")
    shown = page.locator("#rows").inner_text()
    for payload in browser.PAYLOADS:
        assert payload in shown or payload.strip() in shown, payload
    page.click("#task-tabs button[data-task='sentence-embeddings']")
    grid = ".plot-grid[data-task='sentence-embeddings']"
    page.locator(grid).scroll_into_view_if_needed()
    page.wait_for_selector(f"{grid} svg.plot")
    labels = page.eval_on_selector_all(f"{grid} svg.plot title", "els => els.map(e => e.textContent).join(' ')")
    assert browser.PAYLOADS[4] in labels and browser.PAYLOADS[0] in labels  # a model id, a toolchain: text
    assert page.evaluate("typeof window.__pwned") == "undefined" and seen["dialogs"] == [] and seen["errors"] == []
    assert page.evaluate("document.querySelectorAll('img, svg:not(.plot):not(.plot *), iframe').length") == 0


def test_a_tampered_plot_file_with_handlers_or_links_is_never_inserted(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    """A plots file changed after the build (its SVG is the one markup the script inserts), without the CSP: an SVG
    carrying an event handler or a link anywhere is dropped, and the untouched plots still show."""
    rows = browser.hostile_rows()
    rows["latest"] += [dict(r, task="sentence-embeddings") for r in rows["latest"]]
    site = render_site(**rows, inline_entries=0, chunk=2)
    svg = 'xmlns="http://www.w3.org/2000/svg" class="plot"'
    tampered = [
        f'<svg {svg} onload="window.__pwned=1"><rect width="9" height="9"/></svg>',
        f'<svg {svg}><g><rect width="9" height="9" onmouseover="window.__pwned=2"/></g></svg>',
        f'<svg {svg}><animate attributeName="x" xlink:href="#x" xmlns:xlink="http://www.w3.org/1999/xlink"/></svg>',
    ]
    files = [(p, json.dumps([*tampered, *json.loads(text)]) if "-plots-" in p else text) for p, text in site.files]
    assert sum("-plots-" in path for path, _ in files) == 5  # every task's plots file
    html, count = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", site.html)
    assert count == 1
    _write(type(site)(html=html, files=files), tmp_path / "site")
    page, seen = _open(launch(), f"{serve(tmp_path / 'site')}/index.html")
    page.click("#task-tabs button[data-task='sentence-embeddings']")
    grid = ".plot-grid[data-task='sentence-embeddings']"
    page.locator(grid).scroll_into_view_if_needed()
    page.wait_for_selector(f"{grid} svg.plot")
    page.hover(f"{grid}")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.eval_on_selector_all(f"{grid} svg.plot", "els => els.length") == 4  # the task's own four
    assert page.evaluate("document.querySelectorAll('[onload], [onmouseover], animate, rect[width=\"9\"]').length") == 0
    assert seen["errors"] == [] and seen["dialogs"] == []


@pytest.mark.e2e
def test_a_100k_row_catalog_renders_its_first_view_and_finds_every_sampled_id(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    data = catalog_rows(100_000)
    site = render_site(**data)
    assert len(gzip.compress(site.html.encode(), 6)) <= 1_000_000  # the first view's transfer
    _write(site, tmp_path / "site")
    sample = [(r["model_id"], r["task"]) for r in data["latest"][:: 100_000 // 20]]
    del data, site
    page, seen = _open(launch(), f"{serve(tmp_path / 'site')}/index.html")
    _settled(page)
    assert len(_models(page)) == PAGE_SIZE and all("/t0-index-" in u for u in _data_requests(seen))
    # A search typed as soon as the page has loaded covers every row of the view, not only the first page's.
    page.click("#next")
    _settled(page)
    later = _models(page)[-1]
    fresh, fresh_seen = _open(launch(), f"{serve(tmp_path / 'site')}/index.html")
    assert _search(fresh, later) == [later] and fresh_seen["errors"] == []
    page.click("#view-tabs button[data-view='all']")
    page.select_option("#f-device", "all")
    missed = []
    for model_id, task in sample:
        page.click(f"#task-tabs button[data-task='{task}']")
        if model_id not in _search(page, model_id):
            missed.append(model_id)
    assert missed == [] and len(sample) == 20
    assert seen["errors"] == [] and seen["dialogs"] == []
