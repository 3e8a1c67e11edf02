"""The catalog page: rows, views ordered by rankings, exclusions, details, history, plots, escaping, no CDN."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import page
from pipeline.dataset import build, page_html
from pipeline.page import html as page_module
from pipeline.page.catalog import entry_fields
from pipeline.page.details import HISTORY_COLUMNS, command
from pipeline.page.serving import slo_cells
from pipeline.page.warm import warm_index
from pipeline.records import flatten
from pipeline.types import TASKS
from tests import FIXTURES as TEST_FIXTURES
from tests.page import joined
from tests.support.records import sample_community, sample_failure, sample_record

PAYLOADS = (
    '<img src=x onerror="window.__pwned=1">',
    "</script><script>window.__pwned=1</script>",
    '" onmouseover="window.__pwned=1" x="',
    "'><svg onload=window.__pwned=1>",
    "line\u2028break\u2029&amp;<!--",
)


def row(model_id: str = "acme/llama-1b", **overrides: Any) -> dict[str, Any]:
    return flatten(sample_record(model_id=model_id, **overrides))


def fail_row(model_id: str = "acme/broken", **overrides: Any) -> dict[str, Any]:
    return flatten(sample_failure(model_id=model_id, **overrides))


def at(day: int, hour: int = 10) -> dict[str, str]:
    start = dt.datetime(2026, 11, day, hour, tzinfo=dt.UTC)
    return {"started_at": start.isoformat(), "finished_at": (start + dt.timedelta(minutes=5)).isoformat()}


def ranking(task: str, view: str, date: str, *model_ids: str) -> list[dict[str, Any]]:
    return [
        {"date": date, "task": task, "view": view, "rank": rank, "model_id": m} for rank, m in enumerate(model_ids, 1)
    ]


#: The arguments each page of :func:`render` was made from, by its HTML (:func:`data_of` reads its entries).
_RENDERED: dict[str, dict[str, Any]] = {}


def render(**kwargs: Any) -> str:
    args: dict[str, Any] = {"latest": [], "rankings": [], "exclusions": [], "scripts": {}}
    args.update(kwargs)
    html = page.render_page(**args)
    _RENDERED[html] = args
    return html


class _Page(HTMLParser):
    """The server-rendered table rows (cell texts), the script blocks and every src/href."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.row_classes: list[str] = []
        self.scripts: dict[str, str] = {}
        self.urls: list[tuple[str, str, str]] = []
        self._in_tbody = False
        self._cell: list[str] | None = None
        self._script: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for name in ("src", "href", "action", "xlink:href"):
            if a.get(name):
                self.urls.append((tag, name, a[name] or ""))
        if tag == "tbody" and a.get("id") == "rows":
            self._in_tbody = True
        elif tag == "tr" and self._in_tbody:
            self.rows.append([])
            self.row_classes.append(a.get("class") or "")
        elif tag == "td" and self._in_tbody:
            self._cell = []
        elif tag == "script":
            self._script = a.get("id") or "app"
            self.scripts[self._script] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._in_tbody = False
        elif tag == "td" and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts[self._script] += data
        elif self._cell is not None:
            self._cell.append(data + " ")


def parse(html: str) -> _Page:
    parser = _Page()
    parser.feed(html)
    return parser


def data_of(html: str) -> dict[str, Any]:
    """The inline JSON of a one-file page made by :func:`render`, and the entries its rows and details were made of
    (:func:`pipeline.page.catalog`: ``entries``, ``objects`` as dicts, ``lists`` numbered into them, ``hcols``)."""
    blob = json.loads(parse(html).scripts["trncat-data"])
    assert blob["store"]["inline"] and blob["first"] is None
    args = _RENDERED[html]
    data = page.catalog(
        latest=args["latest"],
        history=args["latest"] if args.get("history") is None else args["history"],
        rankings=args["rankings"],
        exclusions=args["exclusions"],
        slo=slo_cells(args.get("serving") or []),
        warm=warm_index(args.get("warm_checks") or []),
        scripts=args["scripts"],
    )
    assert sum(part["n"] for part in blob["store"]["tasks"].values()) == len(data["entries"])
    blob.update(entries=data["entries"], lists=data["lists"], hcols=HISTORY_COLUMNS)
    blob["objects"] = [entry_fields(e) for e in data["entries"]]
    return blob


def _decoded(column: Any, n: int) -> list[Any]:
    if column is None:
        return [None] * n
    return [None if k < 0 else column["v"][k] for k in column["i"]] if isinstance(column, dict) else column


def inline_of(html: str) -> dict[str, list[dict[str, Any]]]:
    """Per task, the inline entries of a one-file page as its script reads them: the index's columns (full names)
    and each entry's ``row`` and ``detail`` HTML."""
    blob = json.loads(parse(html).scripts["trncat-data"])
    out: dict[str, list[dict[str, Any]]] = {}
    for task, part in blob["store"]["tasks"].items():
        columns = {name: _decoded(c, part["n"]) for name, c in part["cols"].items()}
        out[task] = [
            {**{name: values[no] for name, values in columns.items()}, "row": row, "detail": detail}
            for no, (row, detail) in enumerate(zip(joined(part["rows"]), joined(part["details"]), strict=True))
        ]
    return out


def details(html: str) -> str:
    """Every inline entry's details, one text."""
    return "".join(e["detail"] for entries in inline_of(html).values() for e in entries)


def test_a_row_shows_the_measurements_and_toolchain() -> None:
    html = render(latest=[row()])
    (cells,) = parse(html).rows
    model, status, device, cores, compile_s, ttft, tps, wall, cost, slo, slo_cost, mem, params, date, toolchain = cells[
        1:
    ]
    assert slo == slo_cost == "\u2014"  # no serving sweep of the model: nothing at the service level
    assert (
        model.startswith("acme/llama-1b")
        and status == "runs grade unknown CI"
        and cores == "1"
        and device == "Trainium2"
    )
    assert compile_s == "61.5 s later runs start in 9.8 s"  # a cold compile, and the warm start after it
    assert (ttft, tps, wall, mem, params) == ("31 ms", "77.1", "72.9 s", "2.9 GiB", "1.2B")
    assert cost == "\u2014"  # a row built without a price table has no cost
    assert date == "2026-11-28"
    assert toolchain == "neuronx-cc 2.21.0 torch-neuronx 2.14.0 transformers 5.0.0"
    assert '<a class="hub" href="https://huggingface.co/acme/llama-1b"' in html


def test_a_failure_shows_its_classified_reason_and_message() -> None:
    html = render(latest=[fail_row(stage="compile", code="NCC_EOOM001", message="compiler ran out of memory")])
    status = parse(html).rows[0][2]
    assert status == "fails CI compile · NCC_EOOM001"
    assert 'title="compiler ran out of memory"' in html
    (entry,) = data_of(html)["objects"]
    assert entry["msg"] == "compiler ran out of memory" and entry["st"] == "fail"


def test_untrusted_text_is_escaped_in_html_attributes_and_json() -> None:
    latest = [fail_row(message=PAYLOADS[0] + PAYLOADS[1] + PAYLOADS[2] + PAYLOADS[3] + PAYLOADS[4])]
    latest[0]["neuronx_cc_version"] = PAYLOADS[1]
    rankings = ranking("text-generation", "selected", "2026-11-28", "acme/broken", PAYLOADS[1], PAYLOADS[0])
    exclusions = [{"model_id": PAYLOADS[3], "task": None, "reason": PAYLOADS[2], "kind": "gated"}]
    html = render(latest=latest, rankings=rankings, exclusions=exclusions)
    for raw in ("<img src=x", "<script>window", "<svg onload", "</script><", '" onmouseover="', "<!--"):
        assert raw not in html
    # U+2028/2029 are plain text in HTML but line ends in older JavaScript: the JSON blocks escape them.
    blocks = re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', html, flags=re.S)
    assert len(blocks) == 2 and not any("\u2028" in b or "\u2029" in b for b in blocks)
    # Exactly three script elements end: the two data blocks and the app; no data ended one early.
    assert html.count("</script>") == 3
    doc = parse(html)
    data = data_of(html)
    ids = {e[0] for e in data["entries"]}
    assert {PAYLOADS[0], PAYLOADS[1], PAYLOADS[3], "acme/broken"} <= ids
    messages = [e["msg"] for e in data["objects"]]
    assert "".join(PAYLOADS) in messages
    # An id that is not a Hub id is shown as text, never as a link.
    assert not [u for u in doc.urls if "__pwned" in u[2] or "<" in u[2] or ">" in u[2]]
    assert "&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;" in html


def test_views_follow_the_latest_snapshot_per_task_and_view() -> None:
    latest = [row("acme/a"), row("acme/b"), row("acme/c"), row("acme/v", task="image-text-to-text")]
    rankings = [
        *ranking("text-generation", "trending", "2026-11-01", "acme/a", "acme/b", "acme/c"),
        *ranking("text-generation", "trending", "2026-11-20", "acme/c", "acme/new", "acme/a"),
        *ranking("text-generation", "downloads", "2026-11-05", "acme/b", "acme/a"),
        *ranking("image-text-to-text", "selected", "2026-11-05", "acme/v"),
        *ranking("no-such-task", "trending", "2026-11-05", "acme/x"),
        *ranking("text-generation", "bogus", "2026-11-05", "acme/x"),
    ]
    html = render(latest=latest, rankings=rankings)
    data = data_of(html)

    def ids(key: str) -> list[tuple[str, int | None]]:
        return [(data["objects"][i]["id"], rank) for i, rank in data["lists"][key]["items"]]

    assert ids("text-generation/trending") == [("acme/c", 1), ("acme/new", 2), ("acme/a", 3)]
    assert data["lists"]["text-generation/trending"]["date"] == "2026-11-20"
    assert ids("text-generation/downloads") == [("acme/b", 1), ("acme/a", 2)]
    assert data["lists"]["text-generation/selected"] is None  # no snapshot: the page says so
    assert [m for m, _ in ids("text-generation/all")] == ["acme/a", "acme/b", "acme/c"]
    assert ids("image-text-to-text/selected") == [("acme/v", 1)]
    assert data["tasks"] == [
        "text-generation", "image-text-to-text", "sentence-embeddings", "text-to-image", "automatic-speech-recognition"
    ]  # fmt: skip
    assert "acme/x" not in {e["id"] for e in data["objects"]}
    # Default view: the first task's first view with a snapshot, server-rendered in its order.
    assert data["default"] == {"task": "text-generation", "view": "trending", "device": "neuron"}
    rows = parse(html).rows
    assert [(r[0], r[1].split()[0]) for r in rows] == [("1", "acme/c"), ("2", "acme/new"), ("3", "acme/a")]
    assert rows[1][2] == "not yet measured"


def test_excluded_models_appear_marked_with_their_reason() -> None:
    exclusions = [
        {
            "model_id": "acme/remote",
            "task": "text-generation",
            "reason": "needs trust_remote_code",
            "kind": "remote_code",
        },
        {"model_id": "acme/everywhere", "task": None, "reason": "not a transformers model", "kind": "not_transformers"},
        {"model_id": "acme/a", "task": "text-generation", "reason": "low priority for now", "kind": "low_priority"},
    ]
    html = render(latest=[row("acme/a")], exclusions=exclusions)
    data = data_of(html)
    by_id = {e["id"]: e for e in data["objects"] if e["task"] == "text-generation"}
    assert (by_id["acme/remote"]["ek"], by_id["acme/remote"]["er"]) == (
        "remote_code",
        "remote_code: needs trust_remote_code",
    )
    assert by_id["acme/a"]["st"] == "pass" and by_id["acme/a"]["ek"] == "low_priority"
    everywhere = [e for e in data["objects"] if e["id"] == "acme/everywhere"]
    assert {e["task"] for e in everywhere} == set(TASKS)  # an exclusion without a task applies to every task
    statuses = {r[1].split()[0]: r[2] for r in parse(html).rows}
    assert statuses["acme/remote"] == "excluded remote_code: needs trust_remote_code"
    assert statuses["acme/a"] == "runs grade unknown CI excluded low_priority: low priority for now"


def test_detail_data_carries_scripts_command_and_plan() -> None:
    multi = row("acme/big", cores=4, plan={"cores": 4, "tp_degree": 4, "advice": "shard over 4 cores", "fits": True})
    latest = [row("acme/small"), multi]
    scripts = {
        "acme/small": {"run.py": "MODEL_ID = 'acme/small'\n", "requirements.txt": "torch==2.9.0\n"},
        "acme/big": {"run.py": "MODEL_ID = 'acme/big'\n", "requirements.txt": "torch==2.9.0\n"},
    }
    html = render(latest=latest, scripts=scripts)
    blob = json.loads(parse(html).scripts["trncat-scripts"])
    assert blob["texts"].count("torch==2.9.0\n") == 1  # deduplicated
    assert blob["texts"][blob["models"]["acme/big"][0]] == "MODEL_ID = 'acme/big'\n"
    big = next(e for e in data_of(html)["objects"] if e["id"] == "acme/big")
    assert (big["pc"], big["tp"], big["advice"]) == (4, 4, "shard over 4 cores")
    venv = "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt"
    assert command(big) == f"{venv} && torchrun --nproc-per-node 4 run.py"
    assert command({"cores": 1}) == f"{venv} && python run.py"
    assert command({"cores": 1, "device": "cpu"}).endswith("python run.py --device cpu")
    [detail] = [e["detail"] for e in inline_of(html)["text-generation"] if e["model_id"] == "acme/big"]
    shown = f"{venv} && torchrun --nproc-per-node 4 run.py".replace("&", "&amp;")
    assert f'<code class="cmd">{shown}</code>' in detail
    assert "Planner: needs 4 NeuronCores, tensor parallel degree 4 (torchrun, tp_plan=&#34;auto&#34;)" in detail
    app = parse(html).scripts["app"]
    assert "navigator.clipboard" in app and 'execCommand("copy")' in app and "data:text/plain" in app
    assert '<a class="more" href="scripts/acme/big/run.py">' in html


def test_scripts_past_the_inline_budget_are_linked_not_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_module, "MAX_INLINE_SCRIPT_BYTES", 30)
    scripts = {"acme/a": {"run.py": "x" * 20, "requirements.txt": "y" * 20}}
    blob = json.loads(parse(render(latest=[row("acme/a")], scripts=scripts)).scripts["trncat-scripts"])
    assert blob["texts"] == ["x" * 20] and blob["models"]["acme/a"] == [0, None]


def test_history_across_toolchains_highlights_a_regression() -> None:
    old_pass = row("acme/r", run=at(1))
    new_fail = fail_row("acme/r", run=at(20), versions={"neuronx_cc": "2.22.0", "torch_neuronx": "2.15.0"})
    steady = row("acme/s", run=at(2))
    steady_new = row("acme/s", run=at(21), versions={"neuronx_cc": "2.22.0"})
    html = render(latest=[new_fail, steady_new], history=[old_pass, new_fail, steady, steady_new])
    by_id = {e["id"]: e for e in data_of(html)["objects"]}
    regressed, stable = by_id["acme/r"], by_id["acme/s"]
    assert regressed["reg"] is True and stable["reg"] is False
    hcols = data_of(html)["hcols"]
    lines = [dict(zip(hcols, line, strict=True)) for line in regressed["hist"]]
    assert [(h["date"], h["st"], h["cc"], h["reg"]) for h in lines] == [
        ("2026-11-20", "fail", "2.22.0", False),
        ("2026-11-01", "pass", "2.21.0", True),
    ]
    doc = parse(html)
    index = [r[1].split()[0] for r in doc.rows].index("acme/r")
    assert doc.row_classes[index] == "regressed" and "regression" in doc.rows[index][2]


def test_a_fail_on_other_hardware_or_the_same_toolchain_is_not_a_regression() -> None:
    other_hw = row("acme/r", run=at(1), hardware={"name": "trn2.3xlarge"})
    same_toolchain = row("acme/q", run=at(1))
    fails = [fail_row("acme/r", run=at(20), versions={"neuronx_cc": "2.22.0"}), fail_row("acme/q", run=at(20))]
    data = data_of(render(latest=fails, history=[other_hw, same_toolchain, *fails]))
    assert [e["reg"] for e in data["objects"]] == [False, False]


def test_plots_are_inline_svg_with_escaped_labels() -> None:
    latest = [row("acme/a"), row("acme/b", metrics={"params": 7_000_000_000, "compile_s": 300.0, "wall_s": 400.0})]
    latest[1]["transformers_version"] = PAYLOADS[0]
    html = render(latest=latest)
    grid = re.search(r'<div class="plot-grid" data-task="text-generation">.*?</div>', html, flags=re.S)
    assert grid is not None
    svgs = re.findall(r"<svg class=\"plot\".*?</svg>", grid.group(0), flags=re.S)
    assert len(svgs) == 4
    speed, memory, compile_plot, rates = svgs
    assert "Decode tok/s vs parameters" in speed and speed.count("<circle") == 2 + 1
    assert "Peak device memory vs parameters" in memory and memory.count("<circle") == 2 + 1  # points + legend
    assert "Compile time vs parameters" in compile_plot and "acme/b: 7B, 300 s" in compile_plot
    assert "100% (1/1)" in rates and "&lt;img src=x" in rates and "<img" not in rates


def test_the_first_view_is_server_rendered_one_page_at_a_time() -> None:
    latest = [row(f"acme/m{i:03d}") for i in range(page.PAGE_SIZE + 30)]
    html = render(latest=latest)
    rows = parse(html).rows
    assert len(rows) == page.PAGE_SIZE and rows[0][1].startswith("acme/m000")
    assert f"Showing 1–{page.PAGE_SIZE} of {page.PAGE_SIZE + 30}" in html
    assert len(data_of(html)["entries"]) == page.PAGE_SIZE + 30
    empty = parse(render()).rows
    assert empty == [["No results yet."]]


def test_nothing_external_is_loaded() -> None:
    html = render(latest=[row(), fail_row()], rankings=ranking("text-generation", "selected", "2026-11-28", "a/b"))
    doc = parse(html)
    assert "<link" not in html and "@import" not in html and "url(" not in html and "@font-face" not in html
    for tag, attr, url in doc.urls:
        if url.startswith(("http://", "https://", "//")):
            assert (tag, attr) == ("a", "href") and url.startswith("https://huggingface.co/"), url
    assert re.findall(r"\bsrc=", html) == []


def test_only_the_page_script_may_run() -> None:
    html = render(latest=[row()])
    app = parse(html).scripts["app"]
    digest = base64.b64encode(hashlib.sha256(app.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in html
    assert "unsafe-inline'; img-src" in html and "script-src 'unsafe" not in html


def test_script_json_cannot_end_its_element() -> None:
    text = page.script_json({"a": "</script><!--\u2028\u2029&"})
    assert str(text) == '{"a":"\\u003c/script\\u003e\\u003c!--\\u2028\\u2029\\u0026"}'
    assert json.loads(str(text)) == {"a": "</script><!--\u2028\u2029&"}


def _write(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


RANKING_SCHEMA = pa.schema(
    [
        ("date", pa.string()),
        ("task", pa.string()),
        ("view", pa.string()),
        ("rank", pa.int64()),
        ("model_id", pa.string()),
    ]
)
EXCLUSION_SCHEMA = pa.schema(
    [("model_id", pa.string()), ("task", pa.string()), ("reason", pa.string()), ("kind", pa.string())]
)


def test_build_page_reads_the_dataset_folder(tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    build([sample_record(model_id="acme/a", run=at(1))], out)
    build([sample_failure(model_id="acme/a", run=at(20), versions={"neuronx_cc": "2.22.0"})], out)
    without = build_page_html(out)
    assert "acme/a" in without and json.loads(parse(without).scripts["trncat-data"])["default"]["view"] == "all"
    trending = "data/rankings/{}-text-generation-trending.parquet"
    _write(
        out / trending.format("2026-11-01"),
        ranking("text-generation", "trending", "2026-11-01", "acme/old"),
        RANKING_SCHEMA,
    )
    _write(
        out / trending.format("2026-11-20"),
        ranking("text-generation", "trending", "2026-11-20", "acme/a", "acme/fresh"),
        RANKING_SCHEMA,
    )
    _write(
        out / "data/exclusions.parquet",
        [{"model_id": "acme/gated", "task": None, "reason": "gated", "kind": "gated"}],
        EXCLUSION_SCHEMA,
    )
    html = build_page_html(out)
    entries = inline_of(html)
    generation = entries["text-generation"]
    store = json.loads(parse(html).scripts["trncat-data"])["store"]
    items = store["tasks"]["text-generation"]["lists"]["trending"]["items"]
    assert [generation[no]["model_id"] for no, _ in items] == ["acme/a", "acme/fresh"]
    a = next(e for e in generation if e["model_id"] == "acme/a")
    assert a["status"] == "fail" and a["regression"] == 1
    history = a["detail"].split('<table class="history">', 1)[1]
    assert history.count("<tr") == 3  # the head and two lines
    assert any(e["model_id"] == "acme/gated" and e["excluded"] == "gated" for e in generation)
    blob = json.loads(parse(html).scripts["trncat-scripts"])
    run_py = blob["texts"][blob["models"]["acme/a"][0]]
    assert "MODEL_ID = 'acme/a'" in run_py


def build_page_html(root: Path) -> str:
    return page_html(root)


def test_an_exclusion_reason_is_shown_whole_and_names_its_kind_once() -> None:
    reason = "gated: the authors ask for contact details before download; " + "long explanation " * 20
    exclusions = [{"model_id": "acme/gated", "task": "text-generation", "reason": reason, "kind": "gated"}]
    html = render(
        latest=[row("acme/a")],
        exclusions=exclusions,
        rankings=ranking("text-generation", "trending", "2026-11-28", "acme/gated"),
    )
    [cells] = parse(html).rows
    assert cells[2] == "excluded " + " ".join(reason.split())  # whole, and "gated" said once
    assert "gated: gated" not in html
    css = page_module._asset(page_module._environment(), "index.css")
    assert "max-height: 3.2em" not in css  # no clipping of a reason
    # No link to a script that does not exist, even without JavaScript: the details link needs the script.
    assert 'href="scripts/acme/gated' not in html
    assert '<a class="more js-only" href="#">details</a>' in html


def test_cpu_rows_are_badged_and_never_counted_as_trainium_results() -> None:
    cpu = flatten(sample_record(model_id="acme/cpu", device="cpu", hardware={"name": "cpu", "accelerator": None}))
    html = render(latest=[cpu], note="Demo: CPU rows from tiny models.")
    assert "No Trainium2 results yet." in html and "1 row was measured on CPU instead" in html
    assert "Demo: CPU rows from tiny models." in html
    [cells] = parse(html).rows  # no Trainium row at all: the default shows every device
    assert cells[2].startswith("runs CPU") and cells[3] == "CPU"
    both = render(latest=[cpu, row("acme/trn")])
    assert data_of(both)["default"]["device"] == "neuron"
    assert [r[1].split()[0] for r in parse(both).rows] == ["acme/trn"]  # the default view: Trainium rows
    assert "1 models measured on Trainium2: 1 run, 0 fail." in both


def test_cpu_fallback_warm_start_and_the_answer_check_show_beside_the_verdict() -> None:
    from pipeline.records import flatten

    fell = sample_record(model_id="acme/fell", metrics={"cpu_fallback_ops": [{"op": "aten::topk", "count": 3}],
                                                        "warm_start_s": 41.0, "compile_s": 360.0,
                                                        "recompiles_during_timed": 2})  # fmt: skip
    clean = sample_record(model_id="acme/clean")
    html = render(latest=[flatten(fell), flatten(clean)], scripts={})
    rows = {e["id"]: e for e in data_of(html)["objects"]}
    assert rows["acme/fell"]["fb"] == [["aten::topk", 3]] and rows["acme/clean"]["fb"] == []
    assert rows["acme/fell"]["warm"] == 41.0 and rows["acme/fell"]["cos"] == 0.9993
    # Server-rendered first page: the badge with the ops, and "later runs start in" under the compile time.
    assert html.count(">CPU fallback</span>") == 1 and "aten::topk \u00d73" in html
    assert "later runs start in 41" in html
    assert rows["acme/fell"]["rc"] == 2 and html.count(">recompiled</span>") == 1
    text = details(html)  # the details say the ops and the DLAMI's own command
    assert "These ops ran on the CPU instead of the device" in text and "aten::topk \u00d73." in text
    assert "source /opt/aws_neuronx_venv_torch_neuronx_2_14_0/bin/activate" in text
    assert "2 graph(s) compiled again during the timed calls" in text


def test_every_row_says_its_source() -> None:
    """Issue 11.11: a community result must never read as one of the project's own runs."""
    community = sample_community(model_id="acme/community")
    rows = [flatten(sample_record(model_id="acme/ci")), flatten(community)]
    data = page.catalog(latest=rows, history=rows, rankings=[], exclusions=[])
    sources = {e["id"]: e["src"] for e in map(entry_fields, data["entries"])}
    assert sources == {"acme/ci": "ci", "acme/community": "community"}
    html = render(latest=rows)
    assert '<span class="source src-ci">CI</span>' in html  # the status cell shows it
    rows_html = [e["row"] for e in inline_of(html)["text-generation"]]
    assert any('<span class="source src-other">community</span>' in r for r in rows_html)


FIXTURES = TEST_FIXTURES / "valid"


def fixture_row(name: str, model_id: str, **changes: Any) -> dict[str, Any]:
    record = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    record["model_id"] = model_id
    flat = flatten(record)
    flat.update(changes)
    return flat


def four_tasks() -> list[dict[str, Any]]:
    return [
        row("acme/gen"),
        row("acme/vlm", task="image-text-to-text"),
        fixture_row("sentence_embeddings_cpu_pass.json", "acme/embed"),
        fixture_row("text_to_image_cpu_pass.json", "acme/paint", steps=4, image_size=1024, guidance_scale=0.0),
    ]


def _headers(html: str) -> list[str]:
    head = re.search(r'<table id="catalog">\s*<thead>(.*?)</thead>', html, flags=re.S)
    assert head is not None
    return [re.sub(r"<[^>]+>", "", th) for th in re.findall(r"<th [^>]*>.*?</th>", head.group(1))]


def test_each_task_has_its_own_columns_and_never_another_tasks() -> None:
    rows = four_tasks()
    data = data_of(render(latest=rows))
    views = data["taskViews"]
    assert list(views) == list(TASKS)
    assert [views[t]["label"] for t in TASKS] == [
        "Text generation", "Image-text-to-text", "Sentence embeddings", "Text-to-image", "Speech recognition",
    ]  # fmt: skip
    labels = {t: re.findall(r'class="num" title="[^"]*">([^<]*)</th>', views[t]["head"])[1:] for t in TASKS}
    assert (
        labels["text-generation"]
        == labels["image-text-to-text"]
        == ["TTFT", "Decode tok/s", "Wall", "$ / 1M tokens", "Served tok/s per chip at SLO", "$ / 1M tokens at SLO"]
    )
    assert labels["sentence-embeddings"] == ["Sentences/s", "p50 batch 1", "p50 batch 32", "Dim", "$ / 1M sentences"]
    assert labels["text-to-image"] == ["s / image", "Steps/s", "VAE decode", "Resolution · steps", "$ / 1k images"]
    assert labels["automatic-speech-recognition"] == ["RTF", "s / clip", "Tokens/s", "WER", "$ / audio hour"]
    entries = {e["id"]: e for e in data["objects"]}
    embed, paint, gen = entries["acme/embed"], entries["acme/paint"], entries["acme/gen"]
    assert (embed["sps"], embed["l1"], embed["l32"], embed["dim"]) == (1032.0, 0.002, 0.031, 32)
    assert (paint["spi"], paint["stps"], paint["vae"], paint["isz"], paint["steps"]) == (0.52, 41.0, 0.03, 1024, 4)
    # Each answer check in its own field, with the threshold the row was held to; each task's own library.
    assert (embed["cos"], embed["thr"], embed["lib"]) == (1.0, 0.99, "5.1.0")
    assert (paint["cos"], paint["lib"]) == (None, "0.35.0")  # the CPU run is its own reference: no cosine
    assert (gen["cos"], gen["thr"], gen["lib"]) == (0.9993, 0.98, None)
    for key in ("sps", "l1", "l32", "dim", "spi", "stps", "vae", "isz"):
        assert gen[key] is None, key
    for key in ("ttft", "tps"):
        assert embed[key] is None and paint[key] is None
    # The history lines carry the task's own speed metric.
    speeds = {e["id"]: e["hist"][0][data["hcols"].index("speed")] for e in data["objects"]}
    assert speeds == {"acme/gen": 77.1, "acme/vlm": 77.1, "acme/embed": 1032.0, "acme/paint": 0.52}


@pytest.mark.parametrize(
    ("model_id", "headers", "cells", "absent"),
    [
        ("acme/gen", ["TTFT", "Decode tok/s", "Wall", "$ / 1M tokens", "Served tok/s per chip at SLO",
                      "$ / 1M tokens at SLO"], ["31 ms", "77.1", "72.9 s", "\u2014", "\u2014", "\u2014"],
         ["Sentences/s", "s / image", "$ / 1k images"]),
        ("acme/embed", ["Sentences/s", "p50 batch 1", "p50 batch 32", "Dim", "$ / 1M sentences"],
         ["1032", "2 ms", "31 ms", "32", "\u2014"], ["TTFT", "Decode tok/s", "s / image", "$ / 1M tokens"]),
        ("acme/paint", ["s / image", "Steps/s", "VAE decode", "Resolution · steps", "$ / 1k images"],
         ["520 ms", "41.0", "30 ms", "1024² · 4 steps", "\u2014"], ["TTFT", "Decode tok/s", "Sentences/s"]),
    ],
)  # fmt: skip
def test_the_server_renders_the_first_tasks_own_headers_and_cells(
    model_id: str, headers: list[str], cells: list[str], absent: list[str]
) -> None:
    (only,) = [r for r in four_tasks() if r["model_id"] == model_id]
    html = render(latest=[only])
    shown = _headers(html)
    assert shown == ["#", "Model", "Status", "Device", "Cores", "Compile", *headers, "Peak device mem", "Params",
                     "Date", "Toolchain"]  # fmt: skip
    assert not set(absent) & set(shown)
    (got,) = parse(html).rows
    assert got[6 : 6 + len(cells)] == cells
    if model_id == "acme/paint":
        assert got[-1] == "cpu transformers 5.0.0 diffusers 0.35.0"


def test_plots_follow_the_task_speed_metric() -> None:
    html = render(latest=four_tasks())
    grids = dict(re.findall(r'<div class="plot-grid" data-task="([^"]+)"[^>]*>(.*?)</div>', html, flags=re.S))
    assert set(grids) == set(TASKS)
    assert "Decode tok/s vs parameters" in grids["text-generation"]
    assert "Sentences/s (batch 32) vs parameters" in grids["sentence-embeddings"]
    assert "Seconds per image vs parameters" in grids["text-to-image"] and "acme/paint: 1.5M, 520 ms" in html
    for task, grid in grids.items():
        others = {"Decode tok/s", "Sentences/s", "Seconds per image"} - {
            {"sentence-embeddings": "Sentences/s", "text-to-image": "Seconds per image"}.get(task, "Decode tok/s")
        }
        assert not [o for o in others if o in grid], task


def test_a_task_without_rows_says_so_instead_of_an_empty_table() -> None:
    html = render(latest=[row()])
    assert re.search(r'<p id="task-empty" class="task-empty" hidden>', html)
    assert '<div class="table-wrap" id="table-wrap">' in html
    empty = render()
    assert re.search(r'<p id="task-empty" class="task-empty">No text generation model measured', empty)
    assert '<div class="table-wrap" id="table-wrap" hidden>' in empty
    script = parse(html).scripts["app"]
    assert "empty(state.task)" in script and '$("table-wrap").hidden = $("pager").hidden = none' in script


def test_new_tasks_text_is_escaped() -> None:
    paint = fixture_row("text_to_image_cpu_pass.json", "acme/paint", diffusers_version=PAYLOADS[0])
    embed = fixture_row("sentence_embeddings_cpu_pass.json", "acme/embed", sentence_transformers_version=PAYLOADS[1])
    for latest in ([paint], [embed], [paint, embed]):
        html = render(latest=latest)
        assert "<img src=x" not in html and "</script><script>" not in html and html.count("</script>") == 3
    assert "&lt;img src=x onerror=" in render(latest=[paint])
    entries = data_of(render(latest=[paint, embed]))["objects"]
    assert {e["lib"] for e in entries} == {PAYLOADS[0], PAYLOADS[1]}


def test_a_toolchain_label_names_the_tasks_own_library() -> None:
    """A new diffusers release is a new toolchain for the text-to-image rows (pass rate, feed, changes)."""
    from pipeline.page.plots import toolchain_label

    generation = {"device": "cpu", "transformers_version": "5.24.0"}
    assert toolchain_label(generation) == "cpu · transformers 5.24.0"
    image = {**generation, "device": "neuron", "neuronx_cc_version": "2.28", "diffusers_version": "0.42.1"}
    assert toolchain_label(image) == "neuronx-cc 2.28 · transformers 5.24.0 · diffusers 0.42.1"
    embed = {**generation, "sentence_transformers_version": "6.2.0"}
    assert toolchain_label(embed).endswith("· sentence-transformers 6.2.0")


def _gpu_row(model_id: str, hardware: str = "nvidia-h100-80gb-hbm3", **overrides: Any) -> dict[str, Any]:
    gpu = row(model_id, device="cuda", hardware={"name": hardware, "instance_type": "p5.48xlarge",
                                                 "core_config": None, "cores_available": 8}, **overrides)  # fmt: skip
    return gpu


def test_compare_pairs_each_trainium2_row_with_each_gpu_row_never_mixing_them() -> None:
    from pipeline.page.compare import compare_pairs
    from pipeline.prices import load_pricing, row_costs

    pricing = load_pricing()
    latest = [
        row("acme/both"),
        _gpu_row("acme/both", metrics={"decode_tokens_per_s": 154.2}),
        _gpu_row("acme/both", hardware="nvidia-l40s", metrics={"decode_tokens_per_s": 38.55}),
        row("acme/trn-only"),
        _gpu_row("acme/gpu-only"),
        row("acme/broken-gpu"),
        flatten(sample_failure(model_id="acme/broken-gpu", device="cuda",
                               hardware={"name": "nvidia-l40s", "instance_type": "g6e.xlarge", "core_config": None})),
    ]  # fmt: skip
    for r in latest:
        r.update(row_costs(r, pricing))
    pairs = compare_pairs(latest)
    assert [(p["id"], p["sides"][1]["hw"]) for p in pairs] == [
        ("acme/both", "nvidia-h100-80gb-hbm3"),
        ("acme/both", "nvidia-l40s"),
        ("acme/broken-gpu", "nvidia-l40s"),
    ]  # one pair per GPU row; no pair for a model measured on one device only
    by = {(p["id"], p["sides"][1]["hw"]): p for p in pairs}
    h100 = by[("acme/both", "nvidia-h100-80gb-hbm3")]
    assert [s["badge"] for s in h100["sides"]] == ["Trainium2", "cuda"]
    assert [s["speed"] for s in h100["sides"]] == ["77.1", "154"]  # each side its own row's figure
    assert h100["ratios"]["speed"] == "\u00d70.50" and h100["ratios"]["mem"] == "\u00d71.00"
    # cost: $85.964/64 over 77.1 tok/s against $98.32/8 over 154.2 tok/s
    trn_cost, gpu_cost = 85.964 / 64 / (77.1 * 3600) * 1e6, 98.32 / 8 / (154.2 * 3600) * 1e6
    assert h100["ratios"]["cost"] == f"\u00d7{trn_cost / gpu_cost:.2f}"
    assert by[("acme/both", "nvidia-l40s")]["ratios"]["speed"] == "\u00d72.00"
    broken = by[("acme/broken-gpu", "nvidia-l40s")]
    assert broken["sides"][1]["st"] == "fail" and set(broken["ratios"].values()) == {"\u2014"}
    assert broken["sides"][1]["cost"] == "\u2014" and "did not pass" in broken["sides"][1]["price"]


def test_the_cost_column_carries_its_price_in_the_cell_title_and_the_legend() -> None:
    from pipeline.prices import load_pricing, row_costs

    priced, unpriced = row("acme/priced"), row("acme/cpu", device="cpu", hardware={"name": "cpu-x86_64",
                                                                                 "instance_type": None})  # fmt: skip
    for r in (priced, unpriced):
        r.update(row_costs(r, load_pricing()))
    html = page.render_page(latest=[priced, unpriced], rankings=[], exclusions=[], scripts={})
    assert ">$ / 1M tokens</th>" in html and 'id="cost-legend"' in html
    assert 'title="At $85.964 per instance-hour (on_demand, us-east-2; SkyPilot catalog' in html
    assert ">$4.84</td>" in html
    from pipeline.page.cells import price_text  # the CPU row is off the first (Trainium2) view: its title

    assert price_text({"usd": None, "device": "cpu"}) == "No cost: a CPU row names no instance, so it has no price"
    assert 'id="compare"' not in html  # no model has both a Trainium2 and a GPU row


# -- the table by architecture (schema 1.3's family) --------------------------------------------------------------

LLAMA = {"architecture": "LlamaForCausalLM", "model_type": "llama"}


def test_the_table_by_architecture_counts_trainium_rows_and_sets_cpu_rows_apart() -> None:
    cpu = json.loads((TEST_FIXTURES / "valid" / "cpu_pass.json").read_text())
    cpu.update(model_id="acme/on-cpu", architecture="LlamaForCausalLM", model_type="llama")
    latest = [
        row("acme/a", cores=2, **LLAMA),
        row("acme/b", cores=8, **LLAMA),
        fail_row("acme/c", code="ncc_eoom001", **LLAMA),
        flatten(cpu),
        row("acme/unknown-family"),
    ]
    html = render(latest=latest)
    [family] = data_of(html)["fam"]
    assert family == [
        "llama", "LlamaForCausalLM",
        "LlamaForCausalLM (llama) \u00b7 Text generation: 2 of 3 run on Trainium2 (fails: ncc_eoom001 \u00d71); "
        "cores 1\u20138 \u00b7 neuronx-cc 2.21.0, torch-neuronx 2.14.0, transformers 5.0.0",
    ]  # fmt: skip
    table = html.split('<table id="families">', 1)[1].split("</table>", 1)[0]
    assert "<td>LlamaForCausalLM</td><td>llama</td><td>Text generation</td>" in table
    assert '<td class="num">1–8</td><td>ncc_eoom001 ×1</td>' in table


def test_an_untrusted_architecture_never_reaches_the_page_as_markup() -> None:
    # The schema refuses such a name; a row read from a hand-made file could still carry one: it is escaped.
    odd = row("acme/odd", **LLAMA)
    odd["architecture"] = PAYLOADS[0]
    html = render(latest=[odd])
    assert PAYLOADS[0] not in html and "&lt;img src=x" in html
    assert "\\u003cimg" in parse(html).scripts["trncat-data"]


def test_a_prompt_that_ran_eagerly_is_said_on_the_page() -> None:
    """Issue 21: where the prompt could not run through the compiled forward, the record and the page say so."""
    vlm = flatten(sample_record(model_id="acme/vlm", task="image-text-to-text",
                                metrics={"prefill_mode": "eager"}))  # fmt: skip
    html = render(latest=[vlm, row("acme/llm", metrics={"prefill_mode": "compiled"})])
    entries = {e["id"]: e for e in data_of(html)["objects"]}
    assert entries["acme/vlm"]["pf"] == "eager" and entries["acme/llm"]["pf"] == "compiled"
    assert details(html).count("The prompt ran eagerly") == 1


def test_the_compiled_cache_shows_beside_the_cold_compile_and_the_warm_start() -> None:
    """Issue 25: what the bundle saves: the cold compile, the warm start and the bundle's size; or why none."""
    from pipeline.records import bundle_path, flatten

    shipped = sample_record(model_id="acme/shipped", metrics={"warm_start_s": 9.5, "compile_s": 300.0})
    shipped["compiled_cache"] = {"repo_id": "trncat/trncat-compiled", "revision": "e" * 40, "sha256": "f" * 64,
                                 "path": bundle_path(shipped, "f" * 64), "bytes": 3 * 1024**2, "files": 2}  # fmt: skip
    hostile = "<img src=x onerror=alert(1)> over the cap"
    skipped = sample_record(model_id="acme/skipped", compiled_cache_skipped=hostile)
    html = render(latest=[flatten(shipped), flatten(skipped)], scripts={})
    rows = {e["id"]: e for e in data_of(html)["objects"]}
    assert rows["acme/shipped"]["ccb"] == 3 * 1024**2 and rows["acme/skipped"]["ccs"] == hostile
    assert "compiled cache 3.0 MiB" in html and "later runs start in 9.5 s" in html
    assert "<img src=x" not in html  # the reason is text, escaped in the inline data
    assert "Its run.py starts warm: it downloads the 3.0 MiB NEFF cache" in details(html)
    assert "No compiled cache ships with this row: &lt;img src=x" in details(html)


# -- issue 37: the page's details ------------------------------------------------------------------------


def _cuda_row(model_id: str, **overrides: Any) -> dict[str, Any]:
    return flatten(
        sample_record(
            model_id=model_id,
            device="cuda",
            hardware={"name": "nvidia-l40s", "instance_type": "g6e.xlarge", "accelerator": "NVIDIA L40S",
                      "core_config": None, "memory_per_core_bytes": 48 * 1024**3, "cores_available": 1},
            versions={"torch_neuronx": None, "neuronx_cc": None, "runtime": None, "driver": None, "sdk": None,
                      "cuda": "12.8"},
            metrics={"compile_s": 0.0, "warm_start_s": None, "compile_cache_hit": None},
            **overrides,
        )
    )  # fmt: skip


def test_a_cpu_row_says_nothing_was_compiled_instead_of_0_ms() -> None:
    cpu = flatten(
        sample_record(
            model_id="acme/cpu", device="cpu", hardware={"name": "cpu", "accelerator": None},
            metrics={"compile_s": 0.0, "warm_start_s": None, "compile_cache_hit": None},
        )
    )  # fmt: skip
    html = render(latest=[cpu])
    [cells] = parse(html).rows
    assert cells[5] == "—, not compiled on CPU" and "0 ms" not in cells[5]
    # each history line says the same (the one renderer: pipeline/page/cells.py)
    history = details(html).split('<table class="history">', 1)[1]
    assert '<td class="num">—, not compiled on CPU</td>' in history


def test_a_trainium2_rows_history_lists_no_cuda_or_cpu_row() -> None:
    trn = row("acme/both", run=at(2))
    older = row("acme/both", run=at(1), versions={"neuronx_cc": "2.20.0"})
    gpu = _cuda_row("acme/both", run=at(3))
    cpu = flatten(sample_record(model_id="acme/both", device="cpu", hardware={"name": "cpu", "accelerator": None},
                                run=at(4)))  # fmt: skip
    html = render(latest=[trn, gpu, cpu], history=[older, trn, gpu, cpu])
    data = data_of(html)
    [entry] = [e for e in data["objects"] if e["id"] == "acme/both"]
    lines = [dict(zip(data["hcols"], line, strict=True)) for line in entry["hist"]]
    assert entry["device"] == "neuron" and {h["device"] for h in lines} == {"neuron"} and len(lines) == 2


def _demo_row(model_id: str = "trncat-demo/tiny-llama") -> dict[str, Any]:
    from pipeline.prices import DEMO_INSTANCE

    cpu = flatten(
        sample_record(
            model_id=model_id, device="cpu",
            hardware={"name": "cpu-x86_64", "instance_type": DEMO_INSTANCE, "accelerator": None},
        )
    )  # fmt: skip
    cpu.update(price_usd_per_hour=1.0, price_option="on_demand", price_source="trncat demo: an invented price",
               cost_usd_per_million_tokens=3.6)  # fmt: skip
    return cpu


def test_the_demo_shows_compare_and_costs_with_a_demo_badge_on_both_sides_never_as_a_gpu_result() -> None:
    html = render(latest=[_demo_row()])
    # Both sides are the one CPU run, each badged demo and CPU with the place it fills; no side says cuda or GPU.
    section = html.split('<section id="compare">', 1)[1].split("</section>", 1)[0]
    assert 'id="compare-demo"' in section and "Neither side is a Trainium2 or a GPU result" in section
    sides = re.findall(r'<tr class="side side-(\w+)">(.*?)</tr>', section, flags=re.S)
    assert [device for device, _ in sides] == ["cpu", "cpu"]
    for _, cells in sides:
        device = re.search(r'<td class="device">(.*?)</td>', cells, flags=re.S)[1]  # type: ignore[index]
        assert re.findall(r'class="badge ([\w-]+)"[^>]*>([^<]*)<', device) == [("b-demo", "demo"), ("b-dev", "CPU")]
        assert "b-trn" not in device and ">cuda<" not in device
        assert '<td class="num cost" title="At $1 per instance-hour' in cells and ">$3.60<" in cells
    assert "in the Trainium2 place" in sides[0][1] and "cuda-labelled twin" in sides[1][1]
    assert "not a GPU result" in sides[1][1] and "demo: the CPU run ÷ itself" in section and "×1.00" in section
    # The table: the row is badged demo and its cost shows, with the demo price's source on hover.
    [cells] = parse(html).rows
    assert cells[2].startswith("runs CPU") and " demo " in cells[2] and "$3.60" in cells
    assert data_of(html)["objects"][0]["demo"] is True


def test_a_real_cpu_or_gpu_row_is_never_a_demo_row() -> None:
    cpu = flatten(sample_record(model_id="acme/cpu", device="cpu", hardware={"name": "cpu", "accelerator": None}))
    html = render(latest=[cpu, row("acme/both"), _cuda_row("acme/both")])
    body = html.split("<main>", 1)[1].split("</main>", 1)[0]
    assert 'id="compare-demo"' not in body and "b-demo" not in body
    assert all(e["demo"] is False for e in data_of(html)["objects"])
    assert "Trainium2 ÷ GPU" in html


def test_a_tiny_finite_speed_never_stops_the_page_and_costs_stay_finite() -> None:
    """Issue 29.8: a valid record with ``decode_tokens_per_s: 5e-324`` made ``math.log10(0.0)`` stop every page
    build (a decade's tick underflowed to 0.0) and stored an infinite cost; any finite positive figure is drawn."""
    import math

    from pipeline.page.plots import Point, fmt_params, scatter
    from pipeline.prices import load_pricing, row_costs
    from pipeline.records import plausibility_problems

    rows = []
    for index, speed in enumerate((5e-324, 1e-300, 1e300)):
        record = sample_record(model_id=f"acme/tiny-{index}", metrics={"decode_tokens_per_s": speed})
        r = flatten(record)
        r.update(row_costs(r, load_pricing()))
        assert r["cost_usd_per_million_tokens"] is None or math.isfinite(r["cost_usd_per_million_tokens"])
        rows.append(r)
    assert rows[0]["cost_usd_per_million_tokens"] is None  # no finite cost exists: null, never inf
    html = render(latest=rows)
    assert "acme/tiny-0" in html
    svg = scatter(title="t", points=[Point(x=5e-324, y=5e-324, label="a", task="text-generation"),
                                     Point(x=1.0, y=math.inf, label="b", task="text-generation")],
                  x_label="x", y_label="y", x_fmt=fmt_params, y_fmt=fmt_params)  # fmt: skip
    assert "<circle" in svg and "nan" not in svg and "inf" not in svg.lower().replace("info", "")
    # The submission check flags such a speed: below one output a day no run measures it.
    problems = plausibility_problems(sample_record(metrics={"decode_tokens_per_s": 5e-324}))
    assert [f for f, _ in problems] == ["metrics.decode_tokens_per_s"]
    assert plausibility_problems(sample_record()) == []


def test_an_emulated_row_never_stands_for_a_model_in_the_header_or_compare() -> None:
    """Issue 29.9: should an emulated row reach a dataset, the representative row, the page's Trainium2 counts and
    Compare counted it as Trainium2 (check already left it out)."""
    from pipeline.page.compare import compare_pairs
    from pipeline.records import representative

    emulated = row("acme/emu", **at(20))
    emulated["emulated"] = True
    cpu = row("acme/emu", device="cpu", hardware={"name": "cpu-x86_64", "instance_type": None}, **at(1))
    assert representative([emulated, cpu])["device"] == "cpu"  # the newer emulated pass is no Trainium2 row
    gpu = _gpu_row("acme/emu")
    assert compare_pairs([emulated, gpu]) == []
    html = render(latest=[emulated, gpu])
    assert "models measured on Trainium2" not in html and "No Trainium2 results yet." in html


GRADED = {
    "grade": "within tolerance", "steps": 64, "teacher_forced": True, "greedy_match_rate": 0.984375,
    "first_divergence_step": 40, "sigma_ratio": 0.93, "bc": 0.995, "noise_reference": "cpu-bfloat16",
    "topk": [{"k": k, "atol": 1e-5, "rtol": r, "max_abs_error": 0.1, "max_rel_error": r / 2, "step": 3}
             for k, r in (("5", 0.011), ("50", 0.02), ("1000", 0.03), ("all", 0.05))],
}  # fmt: skip


def test_the_grade_shows_in_each_row_and_a_diverging_run_never_as_runs() -> None:
    """Issue 31: a graded row carries its grade and figures; an older record (schema 1.3, cosine only) reads with
    its grade unknown; a run that diverges is a fail at stage accuracy, with its step."""
    graded = sample_record(model_id="acme/graded", agreement=GRADED)
    old = sample_record(model_id="acme/old")
    diverged = sample_failure(model_id="acme/diverged", stage="accuracy", code="wrong_answer",
                              message="teacher-forced logits: diverges from the CPU float32 reference at step 5",
                              agreement={**sample_record()["agreement"], **GRADED, "grade": "diverges",
                                         "failed_step": 5})  # fmt: skip
    html = render(latest=[flatten(graded), flatten(old), flatten(diverged)], scripts={})
    rows = {e["id"]: e for e in data_of(html)["objects"]}
    assert (rows["acme/graded"]["gr"], rows["acme/graded"]["sig"], rows["acme/graded"]["gm"]) == (
        "within tolerance", 0.93, 0.9844,
    )  # fmt: skip
    assert rows["acme/graded"]["tk"][0] == ["5", 0.0055, 0.011] and rows["acme/graded"]["gd"] == 40
    assert rows["acme/old"]["gr"] is None and rows["acme/old"]["cos"] == 0.9993  # its grade: unknown
    assert (rows["acme/diverged"]["st"], rows["acme/diverged"]["gr"], rows["acme/diverged"]["gst"]) == (
        "fail", "diverges", 5,
    )  # fmt: skip
    # The page's script says so: the grade badge of a pass, "grade unknown" for an older one, a diverging fail's step.
    assert "grade unknown" in html and "diverges at step 5" in html
    assert (
        "Answer check: within tolerance, the teacher-forced logits against a CPU float32 reference of the same "
        "input: largest relative error top-5 0.0055 (tolerance 0.011)"
    ) in details(html)
