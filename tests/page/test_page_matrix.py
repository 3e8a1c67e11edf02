"""The stage matrix on the page and in the feed (issue 49), from rows built per the row contract (``MATRIX_SCHEMA``
of pipeline/dataset/matrix.py)."""

from __future__ import annotations

import gzip
import json
import re
from typing import Any
from xml.etree import ElementTree

from pipeline.page import render_page, render_site
from pipeline.page.matrix import cell_html
from pipeline.records import flatten
from pipeline.space import SiteNames
from pipeline.space.tree import ATOM, feed_xml
from tests.page import joined
from tests.support.catalog_rows import catalog_rows
from tests.support.matrix_rows import matrix_row, model_rows, scale_rows
from tests.support.records import sample_failure, sample_record

NAMES = SiteNames(dataset_repo="trncat/results", space_repo="trncat/catalog")
HOSTILE = '<img src=x onerror="window.__pwned=1">'


def fixture() -> dict[str, Any]:
    """A documented-as-supported model whose Trainium2 compile failed (it has a catalog row), a model run on the CPU
    only, a model nothing has run, and a hostile id and detail."""
    fails = flatten(sample_failure(model_id="acme/documented-fails", code="NCC_EVRF009"))
    cpu = flatten(sample_record(model_id="acme/cpu-only"))
    cpu.update(device="cpu", hardware="cpu")
    matrix = [
        *model_rows("acme/documented-fails", "text-generation", {("trn2", "compile"): "failing"},
                    details={("trn2", "compile"): "NCC_EVRF009"}),
        *model_rows("acme/cpu-only", "text-generation",
                    {("trn2", i): "cpu" for i in ("compile", "answer_check", "serve", "warm_start")}),
        *model_rows("acme/new-model", "text-generation", documented="not_listed"),
        *model_rows(HOSTILE, "text-generation", {("trn3", "compile"): "failing"},
                    details={("trn3", "compile"): HOSTILE}),
    ]  # fmt: skip
    return {"latest": [fails, cpu], "rankings": [], "exclusions": [], "scripts": {}, "matrix_rows": matrix}


def _payload(html: str) -> dict[str, Any]:
    return json.loads(html.split('id="trncat-data">', 1)[1].split("</script>", 1)[0])  # type: ignore[no-any-return]


def test_a_documented_model_whose_run_failed_is_badged_in_its_catalog_row_the_matrix_and_the_feed() -> None:
    data = fixture()
    payload = _payload(render_page(**data))
    group = payload["matrix"]["groups"]["text-generation/trn2"]
    flagged = [row for row, st in zip(group["rows"], group["st"], strict=True) if "!" in st]
    assert len(flagged) == 1 and "acme/documented-fails" in flagged[0] and "documented but fails" in flagged[0]
    assert "NCC_EVRF009" in flagged[0] and 'class="mx mx-failing"' in flagged[0]
    # The docs' page and release, once per model, in its model cell's title; the word beside each cell.
    assert flagged[0].count("https://docs.vllm.ai/") == 1 and flagged[0].count("documented: supported") == 10
    catalog = joined(payload["store"]["tasks"]["text-generation"]["rows"])
    badged = [row for row in catalog if "b-dbf" in row]
    assert len(badged) == 1 and "acme/documented-fails" in badged[0]
    assert "documented as supported on Trainium2" in badged[0] and "Compile (NCC_EVRF009)" in badged[0]
    # The feed: one entry per model, task and device class, escaped, its id naming the failing record.
    feed = ElementTree.fromstring(feed_xml([], names=NAMES, matrix_rows=data["matrix_rows"]))
    entries = feed.findall(f"{{{ATOM}}}entry")
    titles = [e.findtext(f"{{{ATOM}}}title") for e in entries]
    assert titles == [
        f"Documented but fails: {HOSTILE} (text-generation, Trainium3)",
        "Documented but fails: acme/documented-fails (text-generation, Trainium2)",
    ]
    summary = entries[1].findtext(f"{{{ATOM}}}summary") or ""
    assert (
        summary.startswith("documented as supported on Trainium2 (https://docs.vllm.ai/") and "NCC_EVRF009" in summary
    )
    assert (entries[1].findtext(f"{{{ATOM}}}id") or "").endswith(":rec-acme/documented-fails-compile")
    assert feed.findtext(f"{{{ATOM}}}updated") == "2026-12-01T09:30:00Z"
    # No documented-but-fails row: no such entry.
    quiet = [r for r in data["matrix_rows"] if not r["documented_but_fails"]]
    assert "Documented but fails" not in feed_xml([], names=NAMES, matrix_rows=quiet)


def test_a_cpu_or_emulated_cell_never_reads_passing_and_a_plan_is_labelled_predicted() -> None:
    cpu = cell_html(matrix_row("a/b", "text-generation", "trn2", "compile", "cpu", documented="supported"))
    said = "Ran on a CPU only: not a Trainium or GPU result; decided by record rec-a/b-compile (ci), 2026-12-01"
    assert cpu.startswith(f'<td class="mx mx-cpu" title="{said}">CPU<')
    assert ">CPU<" in cpu and "Passing" not in cpu and "documented: supported" in cpu
    emulated = cell_html(matrix_row("a/b", "text-generation", "trn2", "serve", "emulated"))
    assert ">Emulated<" in emulated and "Passing" not in emulated
    plan = model_rows("a/b", "text-generation")[0]
    shown = cell_html(plan)
    assert ">Predicted<" in shown and "8 NeuronCores \u00b7 tp=8 \u00b7 trn2.3xlarge" in shown
    assert "Predicted from the model&#39;s config files: not a result" in shown
    passing = cell_html(matrix_row("a/b", "text-generation", "trn2", "serve", "passing"))
    assert "decided by record rec-a/b-serve (ci), 2026-12-01" in passing


def test_the_not_yet_measured_models_and_the_state_strings() -> None:
    group = _payload(render_page(**fixture()))["matrix"]["groups"]["text-generation/trn2"]
    states = dict(zip((re.search(r'class="hub">([^<]*)<', r)[1] for r in group["rows"]), group["st"], strict=True))  # type: ignore[index]
    # One letter per item (plan, 4 stages, 6 features), then ! (documented but fails) and ? (not yet measured).
    assert states["acme/new-model"] == "R" + "U" * 10 + "?"
    assert states["acme/documented-fails"] == "RF" + "U" * 9 + "!"
    assert states["acme/cpu-only"] == "RCCCC" + "U" * 6
    # Its Trainium3 compile failed: a model measured on one device class is measured, so no ? on Trainium2 either.
    assert states["&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;"] == "R" + "U" * 10


def test_hostile_ids_and_details_are_text_in_the_matrix() -> None:
    html = render_page(**fixture())
    assert HOSTILE not in html.replace("\\u003c", "<").replace("\\u003e", ">").split('id="trncat-data">')[0]
    rows = [r for g in _payload(html)["matrix"]["groups"].values() for r in g["rows"]]
    assert rows and not any("<img" in r for r in rows)
    assert any("&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;" in r for r in rows)


def test_a_large_catalogs_matrix_is_data_files_and_its_first_view_keeps_the_budget() -> None:
    """10,000 discovered models, 330,000 matrix rows: the page carries one path per task and device class, the rows
    are chunks fetched when the matrix is shown."""
    data = catalog_rows(10_000)
    matrix = scale_rows((r["model_id"], r["task"]) for r in data["latest"])
    site = render_site(**data, matrix_rows=matrix)
    assert len(gzip.compress(site.html.encode(), 6)) <= 1_000_000
    groups = _payload(site.html)["matrix"]["groups"]
    assert all(isinstance(path, str) for path in groups.values())
    assert len(groups) == 3 * len({r["task"] for r in data["latest"]})
    files = dict(site.files)
    index = json.loads(files[groups["text-generation/trn2"]])
    rows = [row for path in index["chunks"] for row in json.loads(files[path])]
    assert len(rows) == len(index["st"]) == sum(r["task"] == "text-generation" for r in data["latest"])
    assert max(len(files[path]) for path in index["chunks"]) < 400_000
    assert sum("!" in st for st in index["st"]) == sum("b-dbf" in row for row in rows) > 0
