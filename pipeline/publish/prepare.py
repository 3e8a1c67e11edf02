"""What one publish adds: a partial mirror of the dataset repo, the records and the overlay built into it, and the
files that changed. Nothing here talks to the Hub: the caller hands in how to fetch and list the repo's files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import fsatomic
from pipeline.dataset import (
    RESULTS_DIR,
    SERVING_FILE,
    SUMMARY_FILE,
    BuildSummary,
    CardNames,
    build,
    clean_overlay,
    held_paths,
    is_family_path,
    overlay_files,
    publish_paths,
    read_summary,
    refresh_card,
    refresh_new_views,
    summary_paths,
    tree_digests,
)
from pipeline.hub import git_blob_id, together
from pipeline.prices import Pricing
from pipeline.records import Problem, parse_time

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Derived:
    """A file a publish derives from the dataset's results once the records are built in (the release diff).

    The publish package does not know what it is: the caller (the CLI) hands in which of the target's paths it reads
    and how to write it, and the file goes into the same commit as the records (one PR). Written again on a retry
    from the same rows, it is the same bytes, so it is no change.
    """

    #: The target's results files (``data/results/...``) -> the paths to mirror before the build (a path the target
    #: lacks is skipped: the derived file itself, the first time).
    paths: Callable[[list[str]], list[str]]
    #: The built folder -> writes the file(s) into it; returns a line for the PR description, or None.
    write: Callable[[Path], str | None]
    #: Models whose latest shards are mirrored too though no record of theirs comes (a warm check's: the matrix).
    models: tuple[str, ...] = ()


@dataclass
class Prepared:
    """The files one publish would add or replace, built on a mirror of the target at ``parent``."""

    parent: str | None
    folder: Path
    changed: dict[str, Path] = field(default_factory=dict)
    #: Files the target holds that this publish removes (a latest shard split in sixteen, and its family rows).
    deleted: list[str] = field(default_factory=list)
    summary: BuildSummary = field(default_factory=BuildSummary)
    #: Overlay files and rows set aside (:func:`checked_overlay`), one message each.
    set_aside: list[str] = field(default_factory=list)
    #: What the derived files say for the PR description (:attr:`Derived.write`), one line each.
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.changed and not self.deleted

    @property
    def files(self) -> list[str]:
        """Every path the commit adds, replaces or deletes."""
        return sorted({*self.changed, *self.deleted})


def prepare_folder(
    records: list[dict[str, Any]],
    *,
    folder: Path,
    overlay: Path | None,
    fetch: Callable[[list[str], Path], object],
    remote_files: Callable[[str | None], list[str]],
    parent: str | None = None,
    names: CardNames | None = None,
    blob_ids: Callable[[list[str]], dict[str, str]],
    pricing: Pricing | None = None,
    derived: Derived | None = None,
) -> Prepared:
    """Mirror what the target needs into ``folder``, add the records and the overlay, and list what changed.

    The folder is a :func:`pipeline.fsatomic.scratch` folder: thrown away if anything fails.

    Args:
        fetch: (paths, folder) -> downloads those the target holds.
        remote_files: folder in the repo (None: all) -> the target's file paths under it.
        names: The repo and Space the card names.
        blob_ids: paths -> git blob ids of those the target holds (:meth:`pipeline.hub.Hub.blob_ids`): a script
            the target already holds with the same content is then neither written nor changed.
        pricing: The price table and option the new rows are priced with (None: no price, no cost).
        derived: A file derived from the results once the records are in (its inputs mirrored first).
    """
    with fsatomic.scratch(folder):
        overlay_map, set_aside = checked_overlay(overlay)
        # Records are valid here, so every finish time parses.
        since = min((parse_time(r["run"]["finished_at"]) for r in records), default=None)  # type: ignore[type-var]
        folder.mkdir(parents=True, exist_ok=True)
        # Together: the summary, the results files that could hold the records, the scripts' and card's git ids.
        # data/serving.json too when a serving record comes: build merges into it (a path the repo lacks is skipped)
        first = [SUMMARY_FILE, SERVING_FILE] if any(r.get("serving") for r in records) else [SUMMARY_FILE]
        calls: list[Callable[[], Any]] = [lambda: fetch(first, folder)]
        calls.append((lambda: remote_files(RESULTS_DIR)) if since is not None or derived is not None else list)
        if records:
            calls.append(lambda: blob_ids(held_paths(records)))
        _, results, *ids = together.results(*calls)
        counts = read_summary(folder)
        everything: list[str] | None = None
        if counts is not None:
            also = [{"model_id": model} for model in derived.models] if derived else []
            wanted = summary_paths(counts, [*records, *also], remote_results=results, since=since, extra=overlay_map)
        else:  # a dataset from before the summary file: its whole latest view, once
            everything = remote_files(None)
            wanted = publish_paths(everything, extra=overlay_map, since=since)
        if derived is not None:  # what the derived file reads (the results history, say), and the file itself
            wanted = sorted({*wanted, *derived.paths(list(results))})
        if wanted:
            fetch(wanted, folder)
        # The family index is never mirrored: each family shard is written from its latest shard.
        held_index = counts is not None and "families" in counts["configs"]
        before = tree_digests(folder)
        for path_in_repo, data in overlay_map.items():
            fsatomic.write_bytes(folder / path_in_repo, data)
        overlay_changed = bool(overlay_map) and tree_digests(folder) != before
        held: Callable[[str, bytes], bool] | None = (
            (lambda path, data, known=ids[0]: known.get(path) == git_blob_id(data)) if ids else None
        )
        summary = (
            build(records, folder, page=False, names=names, held=held, pricing=pricing) if records else BuildSummary()
        )
        if not summary.changed and overlay_changed:
            refresh_card(folder, names=names)
        note = derived.write(folder) if derived is not None else None
        refresh_new_views(folder, names=names)
        after = tree_digests(folder)
        changed = {path: folder / path for path, digest in after.items() if before.get(path) != digest}
        # A latest shard split in sixteen: its file and its family rows' file leave the repo. The shard was mirrored;
        # its family file (never mirrored) is in the repo when the listing, or the card's views, say so.
        listed = set(everything) if everything is not None else set()
        deleted = sorted(
            path
            for path in summary.removed
            if path not in after and (path in before or path in listed or (held_index and is_family_path(path)))
        )
        return Prepared(
            parent=parent,
            folder=folder,
            changed=changed,
            deleted=deleted,
            summary=summary,
            set_aside=set_aside,
            notes=[note] if note else [],
        )


def checked_overlay(overlay: Path | None) -> tuple[dict[str, bytes], list[str]]:
    """The overlay's well-formed discovery outputs (path in repo -> bytes), and what was set aside.

    A file that is no discovery output, or a bad row of one, is set aside with a message naming it
    (:func:`pipeline.dataset.clean_overlay`); the rest is published, and so are the records: one odd listing
    never stops a publish.
    """
    return clean_overlay(overlay_files(overlay))


def provenance_problems(records: Iterable[tuple[str, dict[str, Any]]]) -> list[Problem]:
    """Records that come from the wrong place for their ``run.source``.

    A community record is published only from a ``results/community/`` folder (what the submission check
    reviewed), and that folder holds community records only: a "ci" record a pull request put there is never
    published as the project's own measurement (CI records come from the runs' artifacts).
    """
    out = []
    for name, record in records:
        in_community = Path(name).parts[-3:-1] == ("results", "community")
        source = record["run"]["source"]
        if source == "community" and not in_community:
            out.append(Problem(name, "run.source", "a community record is published only from results/community/"))
        elif in_community and source != "community":
            out.append(Problem(name, "run.source", f"results/community/ holds community records only, not {source!r}"))
    return out
