"""The page's warm starts (issue 32): "warm start verified" only after a real machine verified that row's bundle
(model, revision and sha256), an emulated check labelled and never counted, and the catalog's hit-rate line, all
escaped; the badges drawn in each row's HTML (pipeline/page/cells.py, the first view's and the data's)."""

from __future__ import annotations

import html as html_lib
from pathlib import Path
from typing import Any

from pipeline.dataset import add_warm_checks, build, page_html
from pipeline.page import warm as page_warm
from pipeline.records import flatten
from tests.page.test_page import PAYLOADS, inline_of, parse, render
from tests.support.records import sample_failure, sample_record, sample_warm_check
from tests.warm_rows import with_bundle

TEMPLATES = Path(page_warm.__file__).parent / "templates"


def _row(model_id: str, sha: str | None, **overrides: Any) -> dict[str, Any]:
    record = sample_record(model_id=model_id, **overrides)
    return flatten(with_bundle(record, sha) if sha else record)


def _check(model_id: str, sha: str, **overrides: Any) -> dict[str, Any]:
    return sample_warm_check(model_id=model_id, sha256=sha, **overrides)


def _states(html: str) -> dict[str, Any]:
    """Each row's warm-check state, as its badge in its row's HTML says it (None: no badge)."""
    drawn = {f'<span class="badge {css}" title="{title}">{text}</span>': state
             for state, (css, text, title) in page_warm.WARM_BADGES.items()}  # fmt: skip
    rows = [e for entries in inline_of(html).values() for e in entries]
    return {e["model_id"]: next((s for badge, s in drawn.items() if badge in e["row"].replace("&#39;", "'")), None)
            for e in rows}  # fmt: skip


def test_the_badge_needs_a_real_verified_check_of_that_rows_bundle() -> None:
    latest = [
        _row("acme/verified", "a" * 64),
        _row("acme/other-bundle", "b" * 64),  # verified, but a bundle the row no longer names
        _row("acme/other-revision", "c" * 64),  # verified at another revision of the model
        _row("acme/emulated", "d" * 64),
        _row("acme/missed", "e" * 64),
        _row("acme/unchecked", "f" * 64),
        _row("acme/no-bundle", None),
    ]
    checks = [
        _check("acme/verified", "a" * 64),
        _check("acme/other-bundle", "0" * 64),
        _check("acme/other-revision", "c" * 64, revision="9" * 40),
        _check("acme/emulated", "d" * 64, emulated=True),
        _check("acme/missed", "e" * 64, status="missed", hits=3, misses=1),
        _check("acme/missed", "e" * 64, emulated=True),  # an emulated pass never hides a real machine's miss
    ]
    page = render(latest=latest, warm_checks=checks)
    assert _states(page) == {
        "acme/verified": "verified", "acme/other-bundle": None, "acme/other-revision": None,
        "acme/emulated": "emulated", "acme/missed": "missed", "acme/unchecked": None, "acme/no-bundle": None,
    }  # fmt: skip
    # Server-rendered: the badge's text on the verified row only, "emulated" on the emulated one.
    rows = {r[1].split()[0]: " ".join(r) for r in parse(page).rows}
    verified_rows = [k for k, v in rows.items() if "warm start verified" in v]
    assert verified_rows == ["acme/verified"], rows
    assert "warm start: emulated" in rows["acme/emulated"] and "warm check missed" in rows["acme/missed"]
    # The line: 6 bundles on the page, one verified on a real machine; hits over the two real checks of them.
    text = html_lib.unescape(page)
    assert "Warm starts verified on a second machine: 1 of 6 compiled-cache bundles; graph hit rate 83.3 % " in text
    assert "(5 of 6 graphs over 2 checks)" in text
    assert "1 checked on the Neuron emulator only: not counted." in text


def test_no_bundle_no_line_and_checks_of_rows_off_the_page_count_nothing() -> None:
    page = render(latest=[_row("acme/plain", None)], warm_checks=[_check("acme/gone", "a" * 64)])
    assert 'id="warm-starts"' not in page and "graph hit rate" not in page
    # An emulated row never stands for a model: neither its bundle nor its check counts.
    emulated = {**_row("acme/emu", "a" * 64), "emulated": True}
    page = render(latest=[emulated, _row("acme/real", "b" * 64)], warm_checks=[_check("acme/emu", "a" * 64)])
    assert "0 of 1 compiled-cache bundle." in html_lib.unescape(page)
    # A failing row names no bundle: no badge, whatever a check says.
    failed = flatten(sample_failure(model_id="acme/broken"))
    assert _states(render(latest=[failed], warm_checks=[]))["acme/broken"] is None


def test_hostile_check_text_is_escaped() -> None:
    # A check's free text never reaches the page: only its verdict (one of ours) and its counts do.
    checks = [_check("acme/verified", "a" * 64, message=p, runner=None) for p in PAYLOADS]
    page = render(latest=[_row("acme/verified", "a" * 64)], warm_checks=checks)
    assert "__pwned" not in page and _states(page) == {"acme/verified": "verified"}
    # A hostile model id on a row (and its check) is escaped wherever the row shows.
    hostile = "acme/x" + PAYLOADS[0]
    page = render(latest=[{**_row("acme/verified", "a" * 64), "model_id": hostile}],
                  warm_checks=[{**checks[0], "model_id": hostile}])  # fmt: skip
    assert PAYLOADS[0] not in page and 'onerror="window' not in page
    assert any("warm start verified" in " ".join(r) for r in parse(page).rows)
    index = page_warm.warm_index(checks)
    assert page_warm.warm_state({"model_id": "acme/verified", "revision": checks[0]["revision"],
                                 "compiled_cache_sha256": "a" * 64}, index) == "verified"  # fmt: skip
    # A state that is none of ours (a damaged file) shows no badge.
    odd = {**checks[0], "status": '<b onmouseover="x">'}
    assert page_warm.warm_state({"model_id": "acme/verified", "revision": odd["revision"],
                                 "compiled_cache_sha256": "a" * 64}, page_warm.warm_index([odd])) is None  # fmt: skip


def test_each_state_has_a_styled_badge() -> None:
    css = (TEMPLATES / "index.css").read_text(encoding="utf-8")
    assert all(f".{badge} " in css for badge, _, _ in page_warm.WARM_BADGES.values())


def test_the_dataset_page_reads_data_warm_checks(tmp_path: Path) -> None:
    record = with_bundle(sample_record(model_id="acme/verified"), "a" * 64)
    build([record], tmp_path)
    add_warm_checks(tmp_path, [_check("acme/verified", "a" * 64)])
    page = page_html(tmp_path)
    assert _states(page) == {"acme/verified": "verified"}
    assert "Warm starts verified on a second machine: 1 of 1 compiled-cache bundle; graph hit rate 100.0 %" in page


def test_the_space_page_reads_data_warm_checks(tmp_path: Path) -> None:
    from pipeline.space import SiteNames, write_site

    record = with_bundle(sample_record(model_id="acme/verified"), "a" * 64)
    build([record], tmp_path / "dataset")
    add_warm_checks(tmp_path / "dataset", [_check("acme/verified", "a" * 64, hits=3)])
    names = SiteNames(dataset_repo="trncat/results", space_repo="trncat/catalog", site_url="")
    write_site(tmp_path / "dataset", tmp_path / "space", names=names)
    page = (tmp_path / "space" / "index.html").read_text(encoding="utf-8")
    assert "1 of 1 compiled-cache bundle; graph hit rate 100.0 % (3 of 3 graphs over 1 check)" in page
