"""The catalog page ``index.html``: a static file (inline CSS, JS, SVG; no CDN, no web font), alone or with its
data files (:mod:`pipeline.page.chunks`).

Views Selected / Trending / Downloads (ordered by the latest rankings snapshot) and All, per task. The default
view's first page is rendered on the server, so the page reads without JavaScript; the script adds tabs, search,
filters, paging and the model details from the inline JSON block (:func:`render_page`: every entry inline) or from
the data files beside the page, fetched as they are needed (:func:`render_site`, for a large catalog; there the
plots are fetched too, when shown and scrolled near, and the first view's task's are also inline in a ``noscript``).

Text from the Hub or from error messages is untrusted everywhere: jinja2 autoescapes the HTML, the inline JSON
escapes ``<``, ``>``, ``&``, U+2028 and U+2029 (so ``</script>`` in data cannot end the script), the rows, headers
and details the script places are the server's HTML (:mod:`pipeline.page.cells`, every text escaped there), the
script writes its own text with ``textContent``, a fetched plot (the server's SVG, every label escaped by
:mod:`pipeline.page.plots`) is parsed as XML by ``DOMParser``, whose scripts never run, and kept only if it is one
well-formed ``<svg>``, and a Content-Security-Policy allows no script but the page's own (by hash), so no handler in
placed markup could run.
"""

from __future__ import annotations

import base64
import functools
import gc
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
from markupsafe import Markup

from pipeline.page import plots
from pipeline.page.catalog import AT, DEVICE_FILTERS, PAGE_SIZE, PAGE_VIEWS, VIEW_LABELS, catalog
from pipeline.page.cells import DEVICE_LABELS, head_count, head_html
from pipeline.page.chunks import CHUNK_ENTRIES, INLINE_ENTRIES, field_name, first_page, page_store, plot_files
from pipeline.page.compare import compare_pairs, demo_pairs
from pipeline.page.families import codes_text, cores_text, family_line, grouped_family_table
from pipeline.page.matrix import MATRIX_HEAD, documented_fails, fails_title, matrix_store
from pipeline.page.releases import release_sections
from pipeline.page.rows import Gathered, History, RowBatches
from pipeline.page.serving import serving_section, slo_cells
from pipeline.page.task_columns import task_view
from pipeline.page.warm import warm_index, warm_summary
from pipeline.taskspec import REGISTRY

logger = logging.getLogger(__name__)

#: The latest columns the page reads (``history`` among them, for the family rule), so a build reads only
#: those (:func:`pipeline.dataset.read_latest_columns`). A test renders a catalog of every task from rows that
#: answer nothing else, and fails on any other column the page reads.
LATEST_READ: tuple[str, ...] = (
    "accelerator", "agreement_bc", "agreement_denoiser_cosine", "agreement_embedding_cosine",
    "agreement_failed_step", "agreement_first_divergence_step", "agreement_grade", "agreement_greedy_match_rate",
    "agreement_logits_cosine", "agreement_sigma_ratio", "agreement_threshold", "agreement_topk",
    "agreement_transcript_wer", "architecture", "base_model", "compile_s", "compiled_cache_bytes",
    "compiled_cache_files", "compiled_cache_path", "compiled_cache_repo_id", "compiled_cache_revision",
    "compiled_cache_sha256", "compiled_cache_skipped", "cores", "cpu_fallback_ops", "device", "diffusers_version",
    "dtype", "emulated", "failure_code", "failure_message", "failure_stage", "finished_at", "hardware",
    "instance_type", "latency_by_batch_s", "model_id", "model_type", "neuronx_cc_version", "nki_version", "params",
    "peak_device_memory_bytes", "plan_advice", "plan_cores", "plan_fits", "plan_tp_degree", "prefill_mode",
    "price_as_of", "price_option", "price_region", "price_source", "price_usd_per_hour", "recompiles_during_timed",
    "revision", "sentence_transformers_version", "source", "status", "steps", "task", "torch_neuronx_version",
    "torch_version", "transformers_version", "wall_s", "warm_start_s", "history",
)  # fmt: skip
# ... and every task's metric columns and cost column (pipeline.taskspec): a task added there is read too.
LATEST_READ += tuple(
    dict.fromkeys(
        c
        for spec in REGISTRY.values()
        for c in (*(m.column for m in (*spec.metrics, *spec.page_extra) if m.column), spec.cost.column)
        if c not in LATEST_READ
    )
)
LATEST_READ += ("speed_low", "speed_high")  # the speed's 95 % interval: Compare's ratio with its own (issue 50)

#: A one-file page inlines scripts (for copy buttons that work offline) up to this many bytes in all; past it a model's
#: files are fetched from beside the page (a Space, a checkout) when the details open, or linked. A page with data
#: files inlines none: the Space serves scripts/ beside it.
MAX_INLINE_SCRIPT_BYTES = 512 << 10

_JSON_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def script_json(value: Any) -> Markup:
    """JSON for a ``<script type="application/json">`` block: no character sequence in it can end the element.

    Args:
        value: plain JSON data (finite numbers only).

    Returns:
        The JSON text, marked safe for the template (it is not HTML-escaped: a script element's text is raw).
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, escaped in _JSON_ESCAPES:
        text = text.replace(raw, escaped)
    return Markup(text)


def _inline_scripts(entries: Sequence[Sequence[Any]], scripts: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    # Texts are deduplicated (requirements repeat per toolchain); past the budget the page fetches or links them.
    texts: list[str] = []
    text_index: dict[str, int] = {}
    models: dict[str, list[int | None]] = {}
    budget = MAX_INLINE_SCRIPT_BYTES
    for model_id in dict.fromkeys(sorted(e[AT["id"]] for e in entries)):
        files = scripts.get(model_id)
        if not files:
            continue
        slots: list[int | None] = []
        for name in ("run.py", "requirements.txt"):
            text = files.get(name)
            if text is not None and text not in text_index and len(text.encode()) <= budget:
                budget -= len(text.encode())
                text_index[text] = len(texts)
                texts.append(text)
            slots.append(text_index.get(text) if text is not None else None)
        models[model_id] = slots
    return {"texts": texts, "models": models}


@functools.cache
def _environment() -> jinja2.Environment:
    # pipeline.render autoescapes names ending in .html only; the page template is .html.j2, so it gets its own.
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pipeline.page", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["family_cores"] = cores_text
    env.filters["family_codes"] = codes_text
    env.filters["csp_hash"] = lambda text: (
        "sha256-" + base64.b64encode(hashlib.sha256(str(text).encode()).digest()).decode()
    )
    return env


def _asset(env: jinja2.Environment, name: str) -> Markup:
    """A file of ``templates/`` inlined into the page as it is (the page's own script and style sheet)."""
    assert env.loader is not None
    text, _, _ = env.loader.get_source(env, name)
    return Markup(text)


@dataclass(frozen=True)
class Site:
    """The page and the data files it fetches (path relative to the page, JSON text); none for a one-file page."""

    html: str
    files: list[tuple[str, str]] = field(default_factory=list)


def render_page(**kwargs: Any) -> str:
    """The catalog page as one self-contained HTML document, every entry inline (the dataset PR's preview, a page
    opened from disk). Takes :func:`render_site`'s arguments but ``inline_entries``."""
    return render_site(**kwargs, inline_entries=None).html


def render_site(
    *,
    latest: Sequence[dict[str, Any]] | RowBatches,
    history: Iterable[dict[str, Any]] | None = None,
    rankings: list[dict[str, Any]],
    exclusions: list[dict[str, Any]],
    scripts: Mapping[str, Mapping[str, str]],
    note: str | None = None,
    feed: str | None = None,
    dataset_repo: str | None = None,
    releases: Sequence[Mapping[str, Any]] | None = None,
    serving: Sequence[Mapping[str, Any]] | None = None,
    warm_checks: Sequence[Mapping[str, Any]] | None = None,
    matrix_rows: Sequence[Mapping[str, Any]] = (),
    inline_entries: int | None = INLINE_ENTRIES,
    chunk: int | None = None,
    emit: Callable[[str, str], None] | None = None,
) -> Site:
    """The catalog page, and its data files when the catalog is too large to inline.

    Args:
        latest: latest rows of the dataset (flat, :data:`pipeline.records.COLUMNS`), or batches of them read once
            (:class:`pipeline.page.rows.RowBatches`, such as :class:`pipeline.dataset.LatestBatches`).
        history: result rows across toolchains for each model's history, read once (a generator will do); None
            uses ``latest`` (rows, not batches).
        rankings: rankings rows (``date, task, view, rank, model_id``); empty when discovery has not run.
        exclusions: exclusion rows (``model_id, task, reason, kind``); untrusted text.
        scripts: model id -> ``{"run.py": text, "requirements.txt": text}`` (at least one), such as
            :class:`pipeline.dataset.ScriptTexts`; a model without is never linked to one.
        note: a sentence shown at the top (the demo says its rows are CPU rows from tiny models).
        feed: the Atom feed's address, linked from the page.
        dataset_repo: the dataset's repo id, linked as where the data lives.
        releases: release diffs (``{"old", "new", "entries"}``, newest first; ``data/releases/``), one section each.
        serving: serving records (validated): their curves, table and Compare pairs.
        warm_checks: the second-machine warm checks (``data/warm_checks.parquet``, validated): each row's badge and
            the catalog's warm-start line.
        matrix_rows: the stage matrix's rows (``data/matrix.parquet``, the keys of ``MATRIX_SCHEMA`` in
            pipeline/dataset/matrix.py): the matrix view, and the "documented but fails" badge on a catalog row.
        inline_entries: past this many entries (model and task) the page inlines only its first view and writes the
            rest as data files (:mod:`pipeline.page.chunks`); None: always one file.
        chunk: entries per data file (default :data:`pipeline.page.chunks.CHUNK_ENTRIES`).
        emit: given each data file as it is made (path, text), to write it at once; the returned site then lists
            none.

    Returns:
        The HTML text and the data files to write beside it (relative paths; none where ``emit`` took them).
    """
    # Python's cyclic garbage collector is off while the page is built: the build makes millions of small containers
    # (an entry, its arrays, their JSON) and no reference cycle of note; each collection the allocations trigger walks
    # all of them again, which at 100,000 rows was half the build's CPU.
    enabled = gc.isenabled()
    gc.disable()
    try:
        # An emulated row (the Neuron emulator's; validation keeps it out of a dataset) never stands for a model: not
        # in the header's Trainium2 counts, an entry, a plot, the table by architecture or Compare.
        if history is None:
            if not isinstance(latest, Sequence):
                raise TypeError("render_site: history=None needs the latest rows as a sequence")
            history = latest
        runs = History(history)  # packed, emulated rows left out
        warm = warm_index(warm_checks or [])
        gathered = Gathered()
        fails: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for found in documented_fails(matrix_rows):
            fails.setdefault((found["model_id"], found["task"]), []).append(found)
        data = catalog(
            latest=latest,
            history=runs,
            rankings=rankings,
            exclusions=exclusions,
            slo=slo_cells(serving or []),
            warm=warm,
            scripts=scripts,  # `in`: a lazy mapping reads no text for this
            gathered=gathered,
            fails={key: fails_title(found) for key, found in fails.items()},
        )
        if data["emulated"]:
            logger.warning("left %d emulated row(s) off the page: they are no Trainium2 results", data["emulated"])
        st, device, date = AT["st"], AT["device"], AT["date"]
        measured = [e for e in data["entries"] if e[st] != "unmeasured"]
        trainium = [e for e in measured if e[device] == "neuron"]
        elsewhere = [e for e in measured if e[device] != "neuron"]
        summary = {
            "models": len(trainium),
            "runs": sum(e[st] == "pass" for e in trainium),
            "fails": sum(e[st] == "fail" for e in trainium),
            "elsewhere": len(elsewhere),
            "devices": " and ".join(sorted({DEVICE_LABELS.get(e[device], str(e[device])) for e in elsewhere})),
            "updated": max((e[date] for e in measured if e[date]), default=None),
            "warm": warm_summary(gathered.bundles, warm),
        }
        del measured, trainium, elsewhere
        families = grouped_family_table(gathered.family_groups())
        # The plots before the data files, and what made them let go: at 100,000 models the build then never holds the
        # packed history and the gathered rows beside the data files' 70 MB of JSON.
        task_plots = {
            task: plots.catalog_plots(task=task, latest=gathered.plot_rows(task), history=runs.of_task(task))
            for task in data["tasks"]
        }
        compare = compare_pairs(gathered.paired) + demo_pairs(gathered.demo)
        del gathered, runs
        inline = inline_entries is None or len(data["entries"]) <= inline_entries
        store = page_store(data, inline=inline, emit=emit, **({} if chunk is None else {"chunk": chunk}))
        rows, first = first_page(data, store.numbers, PAGE_SIZE)
        matrix = matrix_store(matrix_rows, inline=inline, chunk=chunk or CHUNK_ENTRIES, add=store.add)
        labels = {task: task_view(task).label for task in data["tasks"]}
        payload = {
            "tasks": data["tasks"],
            "taskViews": {
                task: {"label": labels[task], "head": head_html(task, field_name), "ncols": head_count(task)}
                for task in data["tasks"]
            },
            "views": PAGE_VIEWS,
            "labels": VIEW_LABELS,
            "devices": DEVICE_LABELS,
            "default": data["default"],
            "pageSize": PAGE_SIZE,
            "store": store.meta,
            "first": None if inline else first,
            # the search box's guesses for a model with no row: each family's model type, architecture and line
            "matrix": matrix,
            "fam": [[f["mt"], f["arch"], family_line(f, labels.get(f["task"], f["task"]))] for f in families],
        }
        # A page with data files fetches its plots when they are shown and scrolled near; only the first view's task's
        # are in the page too, for a reader without JavaScript.
        plot_paths: dict[str, str] = {}
        if not inline:
            plot_paths, plot_data = plot_files(task_plots, data["tasks"])
            for path, text in plot_data:
                store.add(path, text)
        env = _environment()
        template = env.get_template("index.html.j2")
        html = template.render(
            **payload,  # the template reads the script's tasks, views, labels, devices, default view and matrix too
            app_js=Markup(
                "".join(
                    _asset(env, name)
                    for name in ("store.js", "families.js", "files.js", "plots.js", "matrix.js", "index.js")
                )
            ),
            app_css=_asset(env, "index.css"),
            data_json=script_json(payload),
            # A page with data files leaves the scripts beside it too (the details fetch them; scripts/ is in the tree).
            scripts_json=script_json(_inline_scripts(data["entries"] if inline else [], scripts)),
            task_labels=labels,
            head=Markup(head_html(data["default"]["task"], field_name)),
            ncols=head_count(data["default"]["task"]),
            default_list=data["lists"][f"{data['default']['task']}/{data['default']['view']}"],
            rows=[Markup(r) for r in rows],
            shown_total=first["shown"],
            device_filters=DEVICE_FILTERS,
            note=note,
            feed=feed,
            dataset_repo=dataset_repo,
            total=first["total"],
            summary=summary,
            compare=compare,
            releases=release_sections(releases or []),
            serving=serving_section(serving or []),
            families=families,
            plots={
                task: [] if task in plot_paths and task != data["default"]["task"] else svgs
                for task, svgs in task_plots.items()
            },
            plot_paths=plot_paths,
            matrix_head=Markup(MATRIX_HEAD),
        )
        return Site(html=html, files=store.files)
    finally:
        if enabled:
            gc.enable()
