"""The compiled-cache bundles of a publish: each passing CI neuron run's bundle into the compiled-cache model repo.

A bundle travels from the trn2 runner as an artifact beside its record (``trncat collect`` checked it); the runner
holds no Hub token, so it goes up here, in the publish job, with the record that made it: the record then names
it (``compiled_cache``: repo, the commit that holds it, path, sha256, bytes, files) and goes into the dataset PR a
maintainer reviews. No row of the dataset's main names a bundle before that review, and a user's run.py downloads
only what a row names, at that commit, digest checked.

Only publish names a bundle: a record that arrives naming one (``trncat collect`` refuses it; a file handed to
publish directly may still) has it dropped first (:func:`drop_named_bundles`), and is named again only when its
bundle lies beside it and was uploaded here, or found in the compiled-cache repo given with the same digest.
Only a CI record's bundle is published (a community or local record may never name one); each is checked again
(:func:`pipeline.backends.neuron.check_bundle`: the NEFF cache's own files only, under the size cap); the file's
name is its digest, so a re-run that compiled the same graphs finds its bundle already there and uploads nothing;
all new bundles go up in one commit. Over the cap, or refused: no bundle, and the record's
``compiled_cache_skipped`` says why.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.backends.neuron import MAX_BUNDLE_BYTES, BundleInfo, bundle_beside, check_bundle
from pipeline.errors import BundleError, RepoNotFoundError
from pipeline.hub import Hub, file_additions, git_blob_id, together
from pipeline.ids import validate_model_id
from pipeline.records import bundle_path, validate_record

logger = logging.getLogger(__name__)

#: What ``compiled_cache_skipped`` may not hold (the schema's rule for free text): C0 controls but tab and newlines.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _skipped(reason: str) -> str:
    """A reason as the record's ``compiled_cache_skipped`` may hold it: controls replaced, at most 500 characters."""
    return _CONTROL.sub("?", reason)[:500]


#: A revision that stands in for the commit while a record's ``compiled_cache`` is checked before the upload.
_PENDING = "0" * 40


@dataclass
class BundlesPublished:
    """What a publish did with the bundles beside its records."""

    #: Paths committed to the compiled-cache repo (empty on a dry run, or when all were there already).
    uploaded: list[str] = field(default_factory=list)
    #: Paths the repo already held with the same sha256 (nothing uploaded for them).
    reused: list[str] = field(default_factory=list)
    #: One message per bundle not published (the record goes on without it).
    set_aside: list[str] = field(default_factory=list)
    #: The commit the new bundles landed in.
    commit: str | None = None


def drop_named_bundles(records: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Drop every ``compiled_cache`` the records arrived with (changed in place); one message per record."""
    out = []
    for name, record in records:
        if record.pop("compiled_cache", None) is not None:
            out.append(f"{name}: arrived naming a compiled-cache bundle; only publish names one: dropped")
    return out


def _candidate(name: str, record: dict[str, Any], *, max_bytes: int, out: BundlesPublished) -> BundleInfo | None:
    """The bundle beside record file ``name`` when it may be published; else None (with a message, and the
    record's ``compiled_cache_skipped`` where the run deserved a bundle)."""
    bundle = bundle_beside(Path(name))
    if not bundle.is_file():
        return None
    source = record["run"]["source"]
    if source != "ci":
        out.set_aside.append(f"{bundle}: a {source} record's bundle is never published (only CI compiles them)")
        return None
    if record["device"] != "neuron" or record["status"] != "pass":
        out.set_aside.append(f"{bundle}: only a passing neuron run's bundle is published")
        return None
    try:
        info = check_bundle(bundle, max_bytes=max_bytes)
    except BundleError as exc:
        record["compiled_cache_skipped"] = _skipped(str(exc))
        out.set_aside.append(f"{bundle}: {exc}")
        return None
    pending = {**record, "compiled_cache": _naming(record, info, repo="trncat/pending", revision=_PENDING)}
    if problems := validate_record(pending, allow_emulated=True):  # e.g. a compiler version no folder can hold
        reason = f"no bundle: {problems[0][0]}: {problems[0][1]}"
        record["compiled_cache_skipped"] = _skipped(reason)
        out.set_aside.append(f"{bundle}: {reason}")
        return None
    return info


def _same(held: tuple[str | None, str, str | None], local: Path, info: BundleInfo) -> bool:
    """Whether the repo's file is this bundle: by its LFS sha256, or (a repo that stores it as a regular git file:
    small, and no ``*.gz`` rule in its .gitattributes) by its git blob id."""
    sha256, blob_id, _ = held
    return sha256 == info.sha256 if sha256 is not None else blob_id == git_blob_id(local.read_bytes())


def _naming(record: dict[str, Any], info: BundleInfo, *, repo: str, revision: str) -> dict[str, Any]:
    return {"repo_id": repo, "revision": revision, "path": bundle_path(record, info.sha256), "sha256": info.sha256,
            "bytes": info.bytes, "files": info.files}  # fmt: skip


def publish_bundles(
    records: list[tuple[str, dict[str, Any]]],
    *,
    hub: Hub,
    repo: str,
    dry_run: bool = False,
    max_bytes: int = MAX_BUNDLE_BYTES,
) -> BundlesPublished:
    """Upload the bundles beside ``records`` (``(file name, record)``, valid ones) to the model repo ``repo``
    and name each in its record (the records are changed in place): a ``compiled_cache`` a record arrived with is
    dropped first, so every bundle a record names after this was uploaded or verified here, in ``repo``.

    Args:
        records: The records to publish, each with the file it was read from (its bundle lies beside it).
        hub: The Hub client.
        repo: The compiled-cache model repo (created when missing).
        dry_run: Say what would be uploaded; upload nothing and name nothing.
        max_bytes: The size cap (:data:`pipeline.backends.neuron.MAX_BUNDLE_BYTES`).

    Raises:
        HubError: (or a child) the Hub failed; no record names a bundle then.
    """
    validate_model_id(repo)
    out = BundlesPublished(set_aside=drop_named_bundles(records))
    wanted: dict[str, tuple[Path, BundleInfo, list[dict[str, Any]]]] = {}
    for name, record in records:
        info = _candidate(name, record, max_bytes=max_bytes, out=out)
        if info is not None:
            path = bundle_path(record, info.sha256)
            _, _, owners = wanted.setdefault(path, (bundle_beside(Path(name)), info, []))
            owners.append(record)
    if not wanted:
        return out
    # What the repo holds and its head need nothing of each other: asked together (one round trip); the repo is
    # created only when it is missing (a dry run creates nothing: every bundle is then new).
    head: str | None = None
    try:
        held, head = together.results(
            lambda: hub.held_files(repo, sorted(wanted), revision="main", repo_type="model"),
            lambda: hub.head_sha(repo, repo_type="model", revision="main"),
        )
    except RepoNotFoundError:
        held = {}
        if not dry_run:
            hub.create_repo(repo, repo_type="model", exist_ok=True)
            head = hub.head_sha(repo, repo_type="model", revision="main")
    new: dict[str, Path] = {}
    for path, (local, info, _) in sorted(wanted.items()):
        if path not in held:
            new[path] = local
        elif _same(held[path], local, info):
            out.reused.append(path)
        else:  # a name is its digest: another file under it would change what an older row downloads
            out.set_aside.append(f"{local}: {repo} holds another file at {path}; not replaced")
            for record in wanted[path][2]:
                record["compiled_cache_skipped"] = f"{repo} holds another file at {path}"
    if dry_run or head is None:
        out.uploaded = sorted(new)
        return out
    if new:
        result = hub.commit(
            repo,
            operations_factory=lambda parent: file_additions(new),
            message=f"[trncat] compiled caches of {len(new)} run(s)",
            repo_type="model",
            parent=head,
        )
        out.commit, out.uploaded = result.sha, sorted(new)
    for path, (_, info, owners) in wanted.items():
        if path in new:
            revision = out.commit
        elif path in out.reused:
            revision = held[path][2] or head  # the commit that added it: a re-publish names the same one
        else:
            continue
        for record in owners:
            record["compiled_cache"] = _naming(record, info, repo=repo, revision=str(revision))
    logger.info("compiled caches: %d uploaded, %d already there", len(out.uploaded), len(out.reused))
    return out
