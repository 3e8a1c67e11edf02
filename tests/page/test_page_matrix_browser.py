"""The stage matrix in a real browser (issue 49): headless Chromium, as tests/page/test_page_browser.py starts it, on
pages built from rows per the row contract (tests/support/matrix_rows.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.page import render_page, render_site
from tests.page import test_page_browser as browser
from tests.page.test_page_matrix import HOSTILE, fixture
from tests.page.test_page_scale_browser import _write
from tests.support.catalog_rows import catalog_rows
from tests.support.matrix_rows import scale_rows

_open = browser._open
serve, launch = browser.serve, browser.launch


def _matrix(page: Any, task: str = "text-generation", device: str = "trn2", state: str = "all") -> list[str]:
    """Choose a task, device and state; the models the matrix then shows."""
    page.locator("#matrix").scroll_into_view_if_needed()
    page.select_option("#mx-task", task)
    page.select_option("#mx-device", device)
    page.select_option("#mx-state", state)
    page.wait_for_selector(f"#matrix[data-drawn='{task}/{device}/{state}']", state="attached", timeout=30_000)
    return page.locator("#mx-rows td.model .hub").all_inner_texts()


def _cells(page: Any, model_id: str) -> list[str]:
    row = page.locator("#mx-rows tr", has=page.locator("td.model .hub", has_text=model_id))
    return row.locator("td.mx").all_inner_texts()


def test_the_matrix_badges_documented_but_fails_filters_by_state_and_labels_predictions(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(render_page(**fixture()), encoding="utf-8")
    page, seen = _open(launch(), f"{serve(site)}/index.html")
    # The catalog row of the model documented as supported whose run failed carries the badge.
    catalog = page.locator("#rows tr[data-i]", has=page.locator(".hub", has_text="acme/documented-fails"))
    assert catalog.locator(".b-dbf").inner_text() == "documented but fails"
    assert "Compile (NCC_EVRF009)" in (catalog.locator(".b-dbf").get_attribute("title") or "")
    assert sorted(_matrix(page)) == sorted(["acme/cpu-only", "acme/documented-fails", "acme/new-model", HOSTILE])
    # The filter: documented but fails, then failing, on Trainium2 and on Trainium3.
    assert _matrix(page, state="!") == ["acme/documented-fails"]
    assert "documented but fails" in page.locator("#mx-rows td.model").inner_text()
    assert _matrix(page, state="F") == ["acme/documented-fails"]
    assert _matrix(page, device="trn3", state="F") == [HOSTILE]
    assert _cells(page, HOSTILE)[1].startswith("Failing\n" + HOSTILE)  # its detail, as text
    assert _matrix(page, device="gpu", state="F") == []
    assert page.locator("#mx-rows tr.empty").inner_text() == "No model in this state on this device."
    # Not yet measured: the model nothing ran, its plan a prediction, labelled so.
    assert _matrix(page, state="?") == ["acme/new-model"]
    plan = _cells(page, "acme/new-model")[0]
    assert plan.startswith("Predicted\n8 NeuronCores \u00b7 tp=8 \u00b7 trn2.3xlarge")
    assert "not yet measured" in page.locator("#mx-rows td.model").inner_text()
    # CPU cells read CPU, never Passing; the docs' word beside them.
    assert _matrix(page, state="C") == ["acme/cpu-only"]
    cpu = _cells(page, "acme/cpu-only")
    assert [c.split("\n")[0] for c in cpu[1:5]] == ["CPU"] * 4 and not any("Passing" in c for c in cpu)
    assert "documented: supported" in cpu[1]
    assert _matrix(page, state="P") == []
    # The hover names the deciding record, its source and date.
    _matrix(page, state="F")
    title = page.locator("#mx-rows td.mx-failing").get_attribute("title") or ""
    assert "decided by record rec-acme/documented-fails-compile (ci), 2026-12-01" in title
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('#matrix img').length") == 0
    assert seen["errors"] == [] and seen["dialogs"] == []


def test_a_large_matrix_is_fetched_when_shown_and_pages(
    tmp_path: Path, launch: Callable[..., Any], serve: Callable[[Path], str]
) -> None:
    data = catalog_rows(600)
    matrix = scale_rows((r["model_id"], r["task"]) for r in data["latest"])
    _write(render_site(**data, matrix_rows=matrix, inline_entries=100, chunk=50), tmp_path / "site")
    page, seen = _open(launch(), f"{serve(tmp_path / 'site')}/index.html")
    assert not [u for u in seen["requests"] if "-mindex-" in u or "-m0-" in u]  # nothing before it is shown
    generation = sorted(r["model_id"] for r in data["latest"] if r["task"] == "text-generation")
    first = _matrix(page)
    assert first == generation[:100] and len([u for u in seen["requests"] if "-mindex-" in u]) == 1
    page.click("#mx-next")
    page.wait_for_function("() => !document.getElementById('mx-rows').hasAttribute('aria-busy')")
    page.wait_for_selector("#mx-prev:not([disabled])")
    assert page.locator("#mx-rows td.model .hub").first.inner_text() == generation[100]
    flagged = _matrix(page, state="!")
    assert flagged and all("documented but fails" in t for t in page.locator("#mx-rows td.model").all_inner_texts())
    assert seen["errors"] == [] and seen["dialogs"] == []
