"""The page's serving section in a real browser (Debian's Chromium through Playwright, as test_page_browser.py):
a Trainium2 serving row and a cuda one from fixtures: the curve (one line per device), the table's at-SLO
columns, the Compare serving pair with its ratios; hostile text stays text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.page import render_page
from pipeline.records import flatten
from tests.page.test_page_browser import ARTIFACTS, _open, launch, serve  # noqa: F401  (fixtures)
from tests.support.records import sample_record, sample_serving


def test_the_serving_curve_columns_and_compare_pair(
    tmp_path: Path,
    launch: Callable[..., Any],  # noqa: F811
    serve: Callable[[Path], str],  # noqa: F811
) -> None:
    trn, gpu = sample_serving(device="neuron"), sample_serving(device="cuda")
    hostile = sample_serving(device="cuda", model_id="acme/x")
    hostile["serving"]["stopped"] = "<script>window.pwned = 1</script><img src=x onerror=alert(1)>"
    site = tmp_path / "site"
    site.mkdir()
    row = flatten(sample_record(model_id="trncat-demo/tiny-llama"))
    html = render_page(latest=[row], rankings=[], exclusions=[], scripts={}, serving=[trn, gpu, hostile])
    (site / "index.html").write_text(html, encoding="utf-8")
    page, seen = _open(launch(), f"{serve(site)}/index.html")

    curve = page.locator("#serving svg.serving-curve").nth(1)  # acme/x sorts first
    assert "trncat-demo/tiny-llama" in (curve.get_attribute("aria-label") or "")
    lines = curve.locator("polyline.serving-line")
    assert lines.evaluate_all("els => els.map(e => e.dataset.device)") == ["neuron", "cuda"]
    assert curve.locator("circle title").count() == 8 + 0  # four points per device
    headers = page.locator("#serving-table thead th").all_inner_texts()
    assert "served tok/s per chip at SLO" in headers and "$ / 1M tokens at SLO" in headers
    rows = page.locator("#serving-table tr.serving-row")
    first = rows.filter(has_text="trn2.48xlarge").first.locator("td").all_inner_texts()
    # the Trainium2 fixture's best point at the SLO: 280 tok/s per chip; $85.964/16 / (280 x 3600) x 1e6 = $5.33
    assert first[:3] == ["trncat-demo/tiny-llama", "Trainium2", "trn2.48xlarge"]
    assert first[6:8] == ["280", "$5.33"]
    pair = page.locator("#serving-compare tbody.pair").filter(has_text="trncat-demo/tiny-llama")
    assert pair.count() == 1
    sides = [pair.locator("tr.side").nth(k).locator("td").all_inner_texts() for k in (0, 1)]
    assert sides[0][1:] == ["Trainium2", "trn2.48xlarge", "280", "$5.33"]
    # the GPU side: 420 tok/s per chip at $10/h: $10 / (420 x 3600) x 1e6 = $6.61
    assert sides[1] == ["cuda", "nvidia-l40s", "420", "$6.61"]
    assert pair.locator("tr.ratio td").all_inner_texts() == ["Trainium2 \u00f7 GPU", "\u00d70.67", "\u00d70.81"]
    # issue 28: the main table's at-SLO columns, as the page's script renders them (the device filter redraws)
    page.select_option("#f-device", "all")
    main = page.locator("#catalog thead th").all_inner_texts()
    at, usd = main.index("Served tok/s per chip at SLO"), main.index("$ / 1M tokens at SLO")
    cells = page.locator("#rows tr[data-i]").filter(has_text="trncat-demo/tiny-llama").first.locator("td")
    assert [cells.nth(at).inner_text(), cells.nth(usd).inner_text()] == ["280", "$5.33"]
    assert "guidellm 0.8.1" in (cells.nth(at).get_attribute("title") or "")
    # hostile text is text: shown, never run
    assert "<script>window.pwned = 1</script>" in page.locator("#serving-table").inner_text()
    assert page.evaluate("window.pwned") is None
    assert not seen["dialogs"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-serving.png"), full_page=True)
