"""``trncat publish``: one commit (data + scripts + card + page) to the Hub dataset, as a PR a maintainer reviews.

The commit is built on a partial mirror of the dataset repo: ``data/summary.json`` (the card's counts and the shard
layout), the latest shards the records' models are in, and the results files that could already hold them: one GET
each on one HTTP session, never the results history, the family index (its shards are written from the latest
shards), the card or the page. A latest shard split in sixteen is deleted in the same commit. Requests that need no
answer of another go together (:mod:`pipeline.hub.together`): on the real Hub each waits a round trip. The card
(from the summary) and the touched models' scripts are rendered again; one the repo already holds byte for byte (its
git id: one ``paths-info`` request for all) is neither written nor committed. The catalog page (which needs the
whole latest view) is not rebuilt by a Hub publish. A dataset without a summary gets its whole latest view mirrored
once, and the summary with it. The history stays append-only: a publish only adds a results file.

When the bot already has an open PR, the commit goes onto it (``refs/pr/N``, the oldest when there are more)
instead of opening a second one; when the branch moves while committing, the commit is rebuilt on the new head
(:meth:`pipeline.hub.Hub.commit`). Publishing results that are already there changes nothing: no commit, no PR.

Two publishes that start while the bot has no open PR both open one. So a publish that opened a PR looks again
once it is open: when an older open bot PR is there too, it commits its records onto that one (rebuilt on its
head: what the other publish added stays, nothing is added twice), says so on its own PR and closes it. The
newer PR always folds into the older one, so any number of publishes at once end with one open PR holding every
record, and merging it puts each on main once. A whole publish has one deadline (``TRNCAT_PUBLISH_DEADLINE_S``).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pipeline import constants, fsatomic
from pipeline.dataset import (
    BuildSummary,
    CardNames,
    build,
    refresh_new_views,
    tree_digests,
    write_front_files,
)
from pipeline.errors import PipelineError, RepoNotFoundError
from pipeline.hub import CommitResult, Hub, deadline, file_additions, file_deletions, together
from pipeline.ids import validate_model_id
from pipeline.prices import Pricing
from pipeline.publish.description import describe
from pipeline.publish.prepare import Derived, Prepared, checked_overlay, prepare_folder

logger = logging.getLogger(__name__)

PR_TITLE_PREFIX = "[trncat] benchmark results"
NOTHING_TO_PUBLISH = "nothing to publish: the dataset already holds these results"
#: What a comment on a commit of the bot PR names it by (``<!-- trncat-commit SHA -->``): a run that finds the PR's
#: last commit named by no comment posts the one a run before it could not (issue 48.6).
COMMIT_KEY = "trncat-commit"


@dataclass
class PublishResult:
    repo: str
    files: list[str]
    summary: BuildSummary
    description: str
    pr_num: int | None = None
    pr_url: str | None = None
    commit: str | None = None
    dry_run: bool = False
    #: Overlay files and rows set aside, one message each (the rest was published).
    set_aside: list[str] = field(default_factory=list)

    @property
    def published(self) -> bool:
        return self.commit is not None


def publish_to_folder(
    records: list[dict[str, Any]],
    *,
    out: Path,
    overlay: Path | None = None,
    pricing: Pricing | None = None,
    derived: Derived | None = None,
) -> PublishResult:
    """The offline target: the same files as a Hub publish, written into a local dataset folder (new rows priced
    with ``pricing``, see :func:`pipeline.dataset.build`; ``derived`` written after them)."""
    before = tree_digests(out) if out.exists() else {}
    overlay_map, set_aside = checked_overlay(overlay)
    summary = build(records, out, pricing=pricing) if records else BuildSummary()
    if overlay_map:
        with fsatomic.staged_folder(out) as stage:
            for path_in_repo, data in overlay_map.items():
                fsatomic.write_bytes(stage / path_in_repo, data)
            write_front_files(stage)
    note = derived.write(out) if derived is not None and out.exists() else None
    if out.exists():
        refresh_new_views(out)
    after = tree_digests(out) if out.exists() else {}
    files = sorted({*(p for p, d in after.items() if before.get(p) != d), *(p for p in before if p not in after)})
    return PublishResult(
        repo=str(out),
        files=files,
        summary=summary,
        description=describe(summary, files=files, set_aside=len(set_aside), notes=[note] if note else []),
        commit="local" if files else None,
        set_aside=set_aside,
    )


@dataclass
class _Publication:
    """One publish to a Hub dataset: the mirrors prepared so far, each built on the parent commit it names.

    A commit that finds the branch moved asks for its operations again (:meth:`operations`); the files are
    then rebuilt on a fresh mirror of the new head.
    """

    hub: Hub
    repo: str
    records: list[dict[str, Any]]
    overlay: Path | None
    work: Path
    names: CardNames
    pricing: Pricing | None
    derived: Derived | None
    prepared: list[Prepared] = field(default_factory=list)

    @property
    def latest(self) -> Prepared:
        return self.prepared[-1]

    def prepare_at(self, parent: str) -> Prepared:
        """Mirror the repo at ``parent`` into a new folder and build the records and the overlay on it."""
        hub, repo = self.hub, self.repo
        prepared = prepare_folder(
            self.records,
            folder=self.work / f"mirror-{len(self.prepared)}",
            overlay=self.overlay,
            fetch=lambda paths, into: hub.fetch_files(repo, paths, revision=parent, into=into, repo_type="dataset"),
            remote_files=lambda under: hub.list_files(repo, revision=parent, repo_type="dataset", under=under),
            parent=parent,
            names=self.names,
            blob_ids=lambda paths: hub.blob_ids(repo, paths, revision=parent, repo_type="dataset"),
            pricing=self.pricing,
            derived=self.derived,
        )
        self.prepared.append(prepared)
        return prepared

    def operations(self, parent: str) -> list[Any]:
        """The commit's operations on ``parent`` (none when that parent already holds everything)."""
        prepared = self.latest if self.latest.parent == parent else self.prepare_at(parent)
        return file_additions(prepared.changed) + file_deletions(prepared.deleted)


def publish(
    records: list[dict[str, Any]],
    *,
    repo: str,
    hub: Hub,
    overlay: Path | None = None,
    dry_run: bool = False,
    invalid: int = 0,
    space: str | None = None,
    pricing: Pricing | None = None,
    derived: Derived | None = None,
) -> PublishResult:
    """Publish ``records`` (valid ones: validate first) and ``overlay`` to the Hub dataset ``repo`` as a PR.

    The card names ``repo`` and links the catalog's Space ``space`` (default ``constants.TRNCAT_SPACE``); the
    new rows are priced with ``pricing`` (see :func:`pipeline.dataset.build`); ``derived`` (the release diff) is
    built on the same mirror after them and goes into the same commit.

    Raises:
        HubError: (or a child) the Hub failed after retries and rebases; nothing local is changed.
    """
    validate_model_id(repo)
    with deadline(constants.TRNCAT_PUBLISH_DEADLINE_S), tempfile.TemporaryDirectory(prefix="trncat-publish-") as tmp:
        # The head and the token's user need nothing of each other: asked together (one round trip, not two).
        head, user = together.at_once(lambda: hub.head_sha(repo, repo_type="dataset", revision="main"), hub.whoami)
        try:
            main_head = head.result()
        except RepoNotFoundError:
            if dry_run:
                raise
            logger.info("creating the dataset repo %s", repo)
            hub.create_repo(repo, repo_type="dataset", exist_ok=True)
            main_head = hub.head_sha(repo, repo_type="dataset", revision="main")
        # Only our own open PR is reused: a PR anyone else titled like ours must never receive the bot's commits.
        try:
            author: str | None = user.result()
        except PipelineError:
            if not dry_run:
                raise
            author = None  # a dry run may go without a token; it then shows the PR a token's owner might reuse
            logger.warning("no Hub token: the dry run looks for the bot's open PR by title only")
        # The oldest open PR of the bot's is the one every publish goes onto (two publishes that opened one each at
        # once fold the newer into it).
        open_prs = hub.open_bot_prs(repo, repo_type="dataset", author=author, title_prefix=PR_TITLE_PREFIX)
        pr_num = open_prs[0] if open_prs else None
        revision = f"refs/pr/{pr_num}" if pr_num is not None else "main"
        space = space or constants.TRNCAT_SPACE
        validate_model_id(space)
        names = CardNames(repo=repo, space=space)
        publication = _Publication(hub, repo, records, overlay, Path(tmp), names, pricing, derived)
        parent = main_head if pr_num is None else hub.head_sha(repo, repo_type="dataset", revision=revision)
        first = publication.prepare_at(parent)
        files = first.files
        description = _describe(first, invalid=invalid)
        if dry_run or first.empty:
            if first.empty:
                description = NOTHING_TO_PUBLISH
                if not dry_run and pr_num is not None:
                    _post_a_lost_comment(hub, repo, pr_num, publication, main_head, invalid=invalid)
            return PublishResult(repo=repo, files=files, summary=first.summary, pr_num=pr_num, dry_run=dry_run,
                                 description=description, set_aside=first.set_aside)  # fmt: skip

        title = f"{PR_TITLE_PREFIX} {dt.date.today().isoformat()}"
        result = hub.commit(
            repo,
            operations_factory=publication.operations,
            message=title,
            description=description,
            repo_type="dataset",
            create_pr=pr_num is None,
            revision=revision if pr_num is not None else None,
            parent=parent,
        )
        last = publication.latest
        if last.empty:  # the branch moved to a state that already holds everything
            return PublishResult(repo=repo, files=[], summary=last.summary, pr_num=pr_num,
                                 description=NOTHING_TO_PUBLISH, set_aside=last.set_aside)  # fmt: skip
        files = last.files
        description = _describe(last, invalid=invalid)
        if pr_num is not None:  # an update to the open bot PR: say what this commit adds
            hub.comment(repo, pr_num, _keyed(description, result.sha), repo_type="dataset")
        elif result.pr_num is not None:  # a new PR: another publish may have opened one at the same time
            result = _fold_into_an_older_pr(hub, repo, publication, result, author=author, title=title, invalid=invalid)
            last = publication.latest
            files = last.files or files
        pr_num = result.pr_num if result.pr_num is not None else pr_num
        return PublishResult(
            repo=repo,
            files=files,
            summary=last.summary,
            description=description,
            pr_num=pr_num,
            pr_url=result.pr_url,
            commit=result.sha,
            set_aside=last.set_aside,
        )


def _keyed(text: str, sha: str) -> str:
    """A comment on a commit of the PR, naming it: the next run knows by it that the comment was posted."""
    return f"{text}\n\n<!-- {COMMIT_KEY} {sha} -->"


def _post_a_lost_comment(hub: Hub, repo: str, pr_num: int, publication: _Publication, main_head: str, *,
                         invalid: int) -> None:  # fmt: skip
    """The comment an earlier run could not post after its commit (the Hub went away between the two), posted by
    this run of results the PR already holds, once: each update's comment names its commit (:func:`_keyed`), so
    the PR's last commit after the one that opened it, with no comment naming it, is owed one."""
    commits, comments = hub.pr_events(repo, pr_num, repo_type="dataset")
    if len(commits) < 2 or any(f"{COMMIT_KEY} {commits[-1]}" in text for text in comments):
        return
    sha = commits[-1]
    logger.warning("%s#%d: commit %s has no comment (a run could not post it): posting it now", repo, pr_num, sha)
    note = _describe(publication.prepare_at(main_head), invalid=invalid)
    said = (f"The comment on commit {sha[:12]} could not be posted when it was made (the Hub went away); a later "
            f"publish of the same results posts it. What they add to main:\n\n{note}")  # fmt: skip
    hub.comment(repo, pr_num, _keyed(said, sha), repo_type="dataset")


def _describe(prepared: Prepared, *, invalid: int) -> str:
    """The PR description of what ``prepared`` adds."""
    return describe(prepared.summary, files=prepared.files, invalid=invalid, set_aside=len(prepared.set_aside),
                    notes=prepared.notes)  # fmt: skip


def _fold_into_an_older_pr(
    hub: Hub,
    repo: str,
    publication: _Publication,
    opened: CommitResult,
    *,
    author: str | None,
    title: str,
    invalid: int,
) -> CommitResult:
    """The PR ``opened`` just opened, or (when an older open bot PR is there too: another publish opened it at the
    same time) the commit of these records onto that older PR, this one closed with a comment saying where they went.
    """
    ours = opened.pr_num
    assert ours is not None
    numbers = hub.open_bot_prs(repo, repo_type="dataset", author=author, title_prefix=PR_TITLE_PREFIX)
    older = [n for n in numbers if n < ours]
    if not older:
        return opened
    into = older[0]
    logger.warning("%s: PR #%d was opened at the same time as this publish's #%d: folding #%d into it",
                   repo, into, ours, ours)  # fmt: skip
    folded = hub.commit(repo, operations_factory=publication.operations, message=title, repo_type="dataset",
                        description=f"Folded in from #{ours}.", revision=f"refs/pr/{into}")  # fmt: skip
    last = publication.latest
    if folded.created and not last.empty:
        note = _describe(last, invalid=invalid)
        said = f"Folded in from #{ours} (opened by a publish at the same time):\n\n{note}"
        hub.comment(repo, into, _keyed(said, folded.sha))
    hub.comment(repo, ours, f"Folded into #{into}, which another publish opened at the same time: its rows are there.")
    hub.close_pr(repo, ours)
    url = re.sub(r"/discussions/\d+$", f"/discussions/{into}", opened.pr_url) if opened.pr_url else None
    return replace(folded, pr_num=into, pr_url=url)
