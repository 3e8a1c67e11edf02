"""The model side of ``trncat check``: a model's listing and its small files (never weights, never code), what it
is, what it was made from, and whether trncat could run it at all.

Per model: one ``model_info`` (with the file list, so only files the repo holds are asked for), then the small
files it holds (:data:`pipeline.models.FAMILY_FILES`, then a sentence-transformers transformer's config, a
pipeline's component configs), each round downloaded together. The gates judge the files as the bench would,
before anything else reads them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.discover import REMOTE_CODE_REASON, gated_reason
from pipeline.errors import GatedRepoError, RemoteCodeRefused, RepoNotFoundError
from pipeline.ids import validate_model_id
from pipeline.models import (
    ADAPTER_CONFIG,
    FAMILY_FILES,
    MAX_FILE_BYTES,
    Family,
    folder_family,
    read_model_index,
    read_small_json,
    refusal,
    transformer_config_path,
)

if TYPE_CHECKING:
    from pipeline.hub import Hub, ModelListing

logger = logging.getLogger(__name__)

#: Quantization methods a repo's tags name (its card names the full-precision model as base_model).
QUANTIZED_TAGS = frozenset({"gguf", "gptq", "awq", "bitsandbytes", "4-bit", "8-bit", "exl2", "fp8", "mlx"})


@dataclass
class ModelFacts:
    """What the Hub and the model's small files say about one model.

    ``missing`` is why it could not be read at all (not on the Hub); ``refusal`` is ``(kind, reason)`` when trncat
    would not run it (remote code, gated without access), in discover's words. ``folder`` holds the small files
    fetched (None when none could be); ``runnable`` says whether they are enough to plan and run it (a config.json,
    or a pipeline's model_index.json).
    """

    model_id: str
    listing: ModelListing | None = None
    missing: str | None = None
    refusal: tuple[str, str] | None = None
    folder: Path | None = None
    family: Family = field(default_factory=Family)
    runnable: bool = False
    #: Small files not downloaded: over :data:`pipeline.models.MAX_FILE_BYTES` (or of no listed size).
    oversized: list[str] = field(default_factory=list)

    @property
    def revision(self) -> str | None:
        return self.listing.sha if self.listing else None

    @property
    def bases(self) -> tuple[str, ...]:
        """The models it names as its base, the card's first, then an adapter's (valid Hub ids, each once)."""
        found = dict.fromkeys(self.family.base_model)
        if self.listing is not None:
            found.update(dict.fromkeys(self.listing.base_model))
        return tuple(b for b in found if b.casefold() != self.model_id.casefold())

    @property
    def relation(self) -> str:
        """How it was made from its base: what its card says, else what its files and tags show."""
        listing = self.listing
        if listing is not None and listing.base_relation:
            return listing.base_relation
        files = set(listing.files or ()) if listing else set()
        tags = set(listing.tags) if listing else set()
        if ADAPTER_CONFIG in files or "peft" in tags:
            return "adapter"
        if tags & QUANTIZED_TAGS or any(f.endswith(".gguf") for f in files):
            return "quantized"
        if "merge" in tags or len(self.bases) > 1:
            return "merge"
        return "finetune"


def _extra_files(folder: Path, files: set[str]) -> list[str]:
    """Files the first ones point at: a sentence-transformers transformer's config in its own folder, each
    pipeline component's config.json (the planner reads them; weights are counted from configs, never fetched)."""
    extra: list[str] = []
    inner = transformer_config_path(read_small_json(folder / "modules.json"))
    if inner and inner != "config.json" and inner in files:
        extra.append(inner)
    try:
        index = read_model_index(folder)
    except RemoteCodeRefused:  # an index that cannot be judged: the gate refuses it next, nothing more is fetched
        index = None
    for name, value in (index or {}).items():
        if not name.startswith("_") and isinstance(value, list) and f"{name}/config.json" in files:
            extra.append(f"{name}/config.json")
    return extra


def read_model(hub: Hub, model_id: str, *, revision: str | None = None, files: bool = True) -> ModelFacts:
    """A model's listing and (``files``) its small files at ``revision`` (default: main's head).

    Raises:
        ModelIdError: ``model_id`` is no Hub id.
        HubError: the Hub failed (a missing model is a fact, not an error).
    """
    validate_model_id(model_id)
    facts = ModelFacts(model_id=model_id)
    try:
        listing = hub.model_info(model_id, revision=revision, files=True)
    except RepoNotFoundError as exc:
        facts.missing = f"not on the Hub: {exc}"
        return facts
    facts.listing = listing
    facts.family = Family(listing.architecture, listing.model_type, listing.base_model)
    if listing.custom_code:
        facts.refusal = ("remote_code", REMOTE_CODE_REASON)
    if not files or facts.refusal:
        return facts
    # The small files of the repo that tell its family and plan (the listing's file list says which it has).
    listed = set(listing.files or ())
    wanted = [name for name in FAMILY_FILES if name in listed]
    try:
        # Sizes before anything is downloaded: a small file over the bound every reader of them keeps is not.
        sizes: dict[str, int] = {}

        def fetch(names: list[str]) -> Path | None:
            _sizes(hub, model_id, listing, revision, names, sizes)
            return _download(hub, model_id, listing.sha or revision, _bounded(names, sizes, facts))

        folder = fetch(wanted)
        if folder is not None:  # then the files those point at
            folder = fetch(_extra_files(folder, listed)) or folder
    except GatedRepoError:
        facts.refusal = ("gated", f"{gated_reason(listing)}; nor can this token read its files")
        return facts
    facts.folder = folder
    if folder is None:
        return facts
    if (refused := refusal(folder)) is not None:
        facts.refusal = ("remote_code", refused)
        return facts
    read = folder_family(folder)
    facts.family = Family(
        read.architecture or listing.architecture,
        read.model_type or (listing.model_type if not read.architecture else None),
        read.base_model or listing.base_model,
    )
    facts.runnable = (folder / "config.json").is_file() or (folder / "model_index.json").is_file()
    return facts


def _sizes(
    hub: Hub, model_id: str, listing: ModelListing, revision: str | None, names: list[str], sizes: dict[str, int]
) -> None:
    """Add the sizes of ``names`` to ``sizes``: from the download cache when it holds every one of them at the
    listing's commit (a second check of a model asks nothing for them), else from one tree listing of the repo.
    A gated model's are always asked: the listing is what says whether this token may read its files."""
    names = [name for name in names if name not in sizes]
    if not names:
        return
    if listing.sha and not listing.gated:
        local = [hub.cached(model_id, name, revision=listing.sha) for name in names]
        if all(path is not None for path in local):
            sizes.update((name, path.stat().st_size) for name, path in zip(names, local, strict=True) if path)
            return
    sizes.update(hub.file_sizes(model_id, revision=listing.sha or revision or "main"))


def _bounded(names: list[str], sizes: dict[str, int], facts: ModelFacts) -> list[str]:
    """``names`` whose listed size is within :data:`pipeline.models.MAX_FILE_BYTES`; the rest noted, not fetched
    (a name the listing has no size for is not fetched either)."""
    kept = [name for name in names if 0 <= sizes.get(name, -1) <= MAX_FILE_BYTES]
    for name in names:
        if name not in kept:
            facts.oversized.append(name)
            logger.warning("%s of %s: %s bytes, over the %d a small file may be: not downloaded", name,
                           facts.model_id, sizes.get(name, "unknown"), MAX_FILE_BYTES)  # fmt: skip
    return kept


def _download(hub: Hub, model_id: str, revision: str | None, names: list[str]) -> Path | None:
    """Download ``names`` (small files the repo holds) at ``revision``, sent together; the snapshot folder they
    land in. At a commit the download cache holds them all (a second check of the model), they are taken from it
    without a download call (:meth:`pipeline.hub.Hub.download_all`)."""
    paths = hub.download_all(model_id, names, revision=revision)
    if not paths:
        return None
    return paths[0].parents[names[0].count("/")]  # the folder above the first file's own folders


def infer_task(listing: ModelListing | None) -> str | None:
    """The catalog task a model's listing points to (its library, then its pipeline tag), or None when unclear."""
    if listing is None:
        return None
    if listing.library_name == "sentence-transformers":
        return "sentence-embeddings"
    if listing.library_name == "diffusers" or listing.pipeline_tag == "text-to-image":
        return "text-to-image"
    if listing.pipeline_tag in ("image-text-to-text", "text-generation"):
        return listing.pipeline_tag
    return None
