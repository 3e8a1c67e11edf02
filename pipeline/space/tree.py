"""The Space's tree, built from a dataset folder: the catalog page, its scripts, the Space card and the feed.

The Hub does not render HTML inside a dataset repo, so the page lives in a static Space (``sdk: static``). The
tree holds ``index.html``, ``README.md`` (the Space metadata), ``feed.xml`` (Atom, from ``data/changes/``), a
copy of ``scripts/`` so that the page's links to them resolve beside it, and for a large catalog the page's data
files (``catalog-data/*.json``, :mod:`pipeline.page.chunks`: per task an index and the entries in chunks, named by
their content's hash), which the page fetches from beside it. Callers build it from a snapshot of the
dataset's merged main, never from a pull request (:mod:`pipeline.space.commit`).
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from pipeline import fsatomic, render
from pipeline.dataset import (
    CHANGE_KINDS,
    LatestBatches,
    ScriptTexts,
    iter_results,
    read_changes,
    read_exclusions,
    read_matrix,
    read_rankings,
    read_release_diffs,
    read_serving,
    read_warm_checks,
    script_files,
)
from pipeline.page import (
    DEVICE_CLASSES,
    HISTORY_READ,
    LATEST_READ,
    counted_apart,
    documented_fails,
    fails_title,
    release_title,
    render_site,
)

SPACE_PAGE, SPACE_CARD, FEED_FILE = "index.html", "README.md", "feed.xml"
ATOM = "http://www.w3.org/2005/Atom"
#: Entries in the feed: the newest changes (a reader polls it; the whole record is data/changes/).
FEED_ENTRIES = 200
_KIND_TITLES = {
    "new_model": "New model",
    "new_pass": "New pass",
    "new_failure": "New failure",
    "regression": "Regression",
    "disagrees": "Measured again, disagrees",
    "reproduced": "Reproduced",
}


@dataclass(frozen=True)
class SiteNames:
    """Where the Space's page points to: the dataset, the Space and the address the page is served at."""

    dataset_repo: str
    space_repo: str
    #: The page's address (feed links point into it); default the Space's page on the Hub.
    site_url: str = ""
    dataset_sha: str = ""
    note: str | None = None

    @property
    def page_url(self) -> str:
        return self.site_url or f"https://huggingface.co/spaces/{self.space_repo}"

    @property
    def feed_url(self) -> str:
        """The feed beside the page (given a site address), else the file in the Space repo on the Hub."""
        if not self.site_url:
            return f"https://huggingface.co/spaces/{self.space_repo}/resolve/main/{FEED_FILE}"
        base = self.site_url.rsplit("/", 1)[0] if self.site_url.endswith(".html") else self.site_url.rstrip("/")
        return f"{base}/{FEED_FILE}"


#: What XML 1.0 cannot hold at all, escaped or not: C0 controls but tab, newline and carriage return, lone
#: surrogates, U+FFFE and U+FFFF. ElementTree writes them as they are, and a reader then refuses the whole feed.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (stored text may predate the record's patterns)."""
    return _NOT_XML.sub("", text)


def _iso(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return str(value)


def details_link(page_url: str, row: dict[str, Any]) -> str:
    """The page's address with the hash that opens a model's details (every device shown)."""
    query = urlencode({"task": row["task"], "view": "all", "device": "all", "m": row["model_id"]})
    return f"{page_url}#{query}"


def entry_summary(row: dict[str, Any]) -> str:
    text = f"{_KIND_TITLES[row['kind']]} on {row['hardware']} ({row['device']}) with {row['toolchain']}"
    if row["status"] != "pass":
        text += f": fails at {row.get('failure_stage') or '?'} ({row.get('failure_code') or '?'})"
    if row["kind"] == "regression" and row.get("previous_toolchain"):
        text += f"; passed with {row['previous_toolchain']}"
    if row["kind"] == "disagrees":
        text += ": its speed is outside the noise of the row before, on the same stack (flagged for a maintainer)"
    return text + "."


def release_entry(diff: dict[str, Any]) -> dict[str, Any]:
    """A release diff's one feed entry: its title, summary, time (its newest row's) and the page's section."""
    entries = diff["entries"]
    count = Counter(e["kind"] for e in entries if not counted_apart(e))
    title = release_title(str(diff["old"]), str(diff["new"]))
    parts = [
        f"{count.get('newly_failing', 0)} newly failing",
        f"{count.get('code_changed', 0)} failing with another code",
        f"{count.get('newly_passing', 0)} newly passing",
        f"{count.get('still_passing', 0)} still passing",
    ]
    if count.get("not_comparable"):
        parts.append(f"{count['not_comparable']} not comparable (another instance or workload)")
    if apart := sum(map(counted_apart, entries)):
        parts.append(f"{apart} from community rows, counted apart")
    if any((e.get("new_device") or e.get("old_device")) == "cpu" for e in entries):
        parts.append("CPU rows: not Trainium2 results")
    from pipeline.records import verdict_counts  # the verdicts' one wording (issue 50)

    parts.append(f"speed: {verdict_counts(entries, 'speed_pct')}")
    dates = [d for e in entries for d in (e.get("new_finished_at"), e.get("old_finished_at")) if d is not None]
    return {
        "title": f"Release diff: {title}",
        "summary": f"{title}: " + ", ".join(parts) + ".",
        "updated": max(dates, default=dt.datetime(1970, 1, 1, tzinfo=dt.UTC)),
        "anchor": f"release-{diff['old']}--{diff['new']}",
        "id": f"urn:trncat:release:{diff['old']}--{diff['new']}",
    }


def feed_xml(
    changes: Sequence[dict[str, Any]],
    *,
    names: SiteNames,
    updated: dt.datetime | None = None,
    releases: Sequence[dict[str, Any]] = (),
    matrix_rows: Sequence[Mapping[str, Any]] = (),
) -> str:
    """An Atom 1.0 document (RFC 4287) of the newest changes; ElementTree escapes every text, and what XML cannot
    hold at all is dropped (:func:`xml_text`).

    Args:
        changes: change rows (:data:`pipeline.dataset.changes.CHANGES_SCHEMA`), newest first.
        names: the dataset, the Space and the page's address.
        updated: the feed's time (default: its newest entry's, so an unchanged dataset gives the same bytes).
        releases: release diffs (``data/releases/``, read by :func:`pipeline.dataset.read_release_diffs`): one
            entry each, first.
        matrix_rows: the stage matrix's rows (``data/matrix.parquet``): an entry for each model, task and device class
            documented as supported whose run failed (its failing records in its id: a new failure is a new entry).

    Returns:
        The XML text.
    """
    ET.register_namespace("", ATOM)
    order = {kind: i for i, (kind, _) in enumerate(CHANGE_KINDS)}
    rows = sorted(changes, key=lambda r: (r["finished_at"], -order[r["kind"]], r["model_id"]), reverse=True)
    rows = rows[:FEED_ENTRIES]

    def sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
        node = ET.SubElement(parent, f"{{{ATOM}}}{tag}", {k: xml_text(v) for k, v in attrs.items()})
        if text is not None:
            node.text = xml_text(text)
        return node

    feed = ET.Element(f"{{{ATOM}}}feed")
    sub(feed, "title", f"trncat: changes in {names.dataset_repo}")
    sub(
        feed, "subtitle", "New models, new passes, new failures and regressions of Hugging Face models on AWS Trainium2"
    )
    sub(feed, "id", names.feed_url)
    times = [rows[0]["finished_at"]] if rows else []
    times += [release_entry(diff)["updated"] for diff in releases]
    fails = [dict(f, updated=max((r["decided_at"] for r in f["rows"] if r.get("decided_at")), default=None))
             for f in documented_fails(matrix_rows)]  # fmt: skip
    times += [f["updated"] for f in fails if f["updated"]]
    newest = updated or max(times, default=dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
    sub(feed, "updated", _iso(newest))
    sub(feed, "link", rel="self", type="application/atom+xml", href=names.feed_url)
    sub(feed, "link", rel="alternate", type="text/html", href=names.page_url)
    sub(feed, "link", rel="related", href=f"https://huggingface.co/datasets/{names.dataset_repo}")
    author = sub(feed, "author")
    sub(author, "name", "trncat")

    def entry(title: str, id_: str, updated: Any, href: str) -> ET.Element:
        node = sub(feed, "entry")
        sub(node, "title", title)
        sub(node, "id", id_)
        sub(node, "updated", _iso(updated))
        sub(node, "link", rel="alternate", type="text/html", href=href)
        return node

    for info in map(release_entry, releases):
        node = entry(info["title"], info["id"], info["updated"], f"{names.page_url}#{info['anchor']}")
        sub(node, "category", term="release_diff", label="Release diff")
        sub(node, "summary", info["summary"])
    for found in fails:
        device = DEVICE_CLASSES.get(found["device_class"], found["device_class"])
        title = f"Documented but fails: {found['model_id']} ({found['task']}, {device})"
        records = ",".join(sorted(str(r.get("record_id")) for r in found["rows"]))
        id_ = f"urn:trncat:documented-fails:{found['model_id']}:{found['task']}:{found['device_class']}:{records}"
        node = entry(title, id_, found["updated"] or newest, details_link(names.page_url, found))
        sub(node, "category", term="documented_but_fails", label="Documented but fails")
        sub(node, "summary", fails_title([found]) + ".")
    for row in rows:
        id_ = f"urn:trncat:change:{row['record_id']}:{row['kind']}"
        title = f"{_KIND_TITLES[row['kind']]}: {row['model_id']} ({row['task']})"  # Regression: org/model (task)
        node = entry(title, id_, row["finished_at"], details_link(names.page_url, row))
        sub(node, "category", term=row["kind"], label=_KIND_TITLES[row["kind"]])
        sub(node, "summary", entry_summary(row))
    ET.indent(feed)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="unicode") + "\n"


def write_site(dataset: Path, out: Path, *, names: SiteNames, script_paths: Sequence[str] | None = None) -> None:
    """Replace the folder ``out`` with the Space tree of the dataset folder ``dataset``, all at once.

    ``script_paths``: every script file of the dataset (its repo's listing) where the folder holds only some of
    them (those the Space lacks); the page links every model that has one, the tree holds those in the folder.

    Raises:
        DatasetError: a Parquet file of the dataset is unreadable.
    """
    releases = read_release_diffs(dataset)
    present = script_files(dataset)
    card = render.render(
        "space_card.md.j2",
        title="trncat catalog",
        dataset_repo=names.dataset_repo,
        dataset_sha=names.dataset_sha or "unknown",
    )
    matrix = read_matrix(dataset)
    with fsatomic.staged_folder(out) as stage:
        for old in list(stage.iterdir()):
            if not old.name.startswith("."):
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        site = render_site(
            latest=LatestBatches(dataset, LATEST_READ),  # only what the page shows, a batch at a time, read once
            history=iter_results(dataset, HISTORY_READ),  # packed as it is read (pipeline.page.rows.History)
            rankings=read_rankings(dataset),
            exclusions=read_exclusions(dataset),
            # Which models have scripts, from the one walk (or the listing); texts are read only if the page inlines
            # them.
            scripts=ScriptTexts(dataset, paths=present if script_paths is None else script_paths),
            note=names.note,
            feed=FEED_FILE,
            dataset_repo=names.dataset_repo,
            releases=releases,
            serving=read_serving(dataset),
            warm_checks=read_warm_checks(dataset),
            matrix_rows=matrix,
            # A large catalog's data files, fetched by the page: each written as it is made, its text let go.
            emit=lambda relative, text: fsatomic.write_text(stage / relative, text),
        )
        fsatomic.write_text(stage / SPACE_PAGE, site.html)
        fsatomic.write_text(stage / SPACE_CARD, card)
        feed = feed_xml(read_changes(dataset), names=names, releases=releases, matrix_rows=matrix)
        fsatomic.write_text(stage / FEED_FILE, feed)
        fsatomic.link_files(dataset, stage, present)  # linked, not copied: 200,000 at 100k models
