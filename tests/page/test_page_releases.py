"""The page's release sections rendered on the server: titles, regressions first, escaping, the CPU badge."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pipeline.page import render_page
from pipeline.page.releases import delta_text, release_sections

DAY = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def _entry(model: str, kind: str, **fields: Any) -> dict[str, Any]:
    base = {"model_id": model, "task": "text-generation", "kind": kind, "old_finished_at": DAY - dt.timedelta(days=9),
            "new_finished_at": DAY, "new_device": "neuron", "old_device": "neuron", "compile_s": None,
            "first_call_s": None, "speed_pct": None, "peak_memory_bytes": None, "note": None,
            "old_failure_code": None, "new_failure_code": None}  # fmt: skip
    return {**base, **fields}


def test_a_section_lists_regressions_first_and_escapes_every_text() -> None:
    diff = {
        "old": "2.33.0",
        "new": "2.34.0",
        "entries": [
            _entry("a/passes", "still_passing", speed_pct=-3.5, compile_s=12.0, peak_memory_bytes=-(2**20)),
            _entry("a/<script>alert(1)</script>", "code_changed", old_failure_code="x", new_failure_code="<i>y</i>"),
            _entry("a/broke", "newly_failing", new_failure_code="ncc_evrf007"),
            _entry("a/moved", "not_comparable", note="compares nothing: measured with another instance_type"),
        ],
    }
    [section] = release_sections([diff])
    assert section["title"] == "Neuron 2.33.0 → 2.34.0" and section["regressions"] == 2 and not section["cpu"]
    assert [r["id"] for r in section["rows"]] == ["a/broke", "a/<script>alert(1)</script>", "a/passes", "a/moved"]
    # a diff written before verdicts (or of rows without intervals) tells no change: no median, each delta so marked
    assert section["medians"]["speed_pct"] == "— (1 no interval: cannot tell)"
    assert section["rows"][2]["deltas"]["speed_pct"] == "−3.5% (no interval: cannot tell)"
    html = render_page(latest=[], rankings=[], exclusions=[], scripts={}, releases=[diff])
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;i&gt;y&lt;/i&gt;" in html and 'id="release-2.33.0--2.34.0"' in html
    assert "compares nothing: measured with another instance_type" in html
    assert html.index("a/broke") < html.index("a/passes")


def test_a_diff_of_cpu_rows_is_badged_cpu_and_not_titled_neuron() -> None:
    diff = {
        "old": "cpu-run-1",
        "new": "cpu-run-2",
        "entries": [_entry("demo/tiny", "still_passing", new_device="cpu", old_device="cpu", speed_pct=1.0)],
    }
    [section] = release_sections([diff])
    assert section["title"] == "cpu-run-1 → cpu-run-2" and section["cpu"] and section["rows"][0]["cpu"]
    html = render_page(latest=[], rankings=[], exclusions=[], scripts={}, releases=[diff])
    assert 'title="measured on a CPU: not a Trainium2 result">CPU</span>' in html


def test_deltas_read_as_signed_figures() -> None:
    assert delta_text("speed_pct", 4.25) == "+4.2%" and delta_text("speed_pct", -20.0) == "−20.0%"
    assert delta_text("compile_s", None) == "—"
    assert delta_text("peak_memory_bytes", 0.0).startswith("+")


def test_a_section_and_the_feed_say_within_noise_and_changed() -> None:
    from pipeline.space.tree import release_entry

    entries = [
        _entry("a/same", "still_passing", speed_pct=12.0, speed_pct_verdict="within_noise"),
        _entry("a/slow", "still_passing", speed_pct=-50.0, speed_pct_verdict="changed"),
    ]
    [section] = release_sections([{"old": "2.33.0", "new": "2.34.0", "entries": entries}])
    assert [r["deltas"]["speed_pct"] for r in section["rows"]] == ["unchanged (within noise)", "−50.0%"]
    assert section["medians"]["speed_pct"] == "−50.0% (1 changed, 1 unchanged (within noise))"
    feed = release_entry({"old": "2.33.0", "new": "2.34.0", "entries": entries})
    assert "speed: 1 changed, 1 unchanged (within noise)" in feed["summary"]
