"""What the Hub client returns: a model as the Hub lists it, and the outcome of a commit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from huggingface_hub.hf_api import ExpandModelProperty_T, ModelInfo

from pipeline.ids import architecture_name, base_model_ids, model_type_name

HubSort = Literal["trending_score", "downloads"]
RepoType = Literal["model", "dataset", "space"]
#: What a listing carries, so discovery needs no request per model.
LISTING_EXPAND: list[ExpandModelProperty_T] = [
    "sha",
    "safetensors",
    "tags",
    "gated",
    "downloads",
    "likes",
    "trendingScore",
    "pipeline_tag",
    "library_name",
    "lastModified",
    # The model's family: the Hub's summary of its config.json (architectures, model_type; a diffusers repo's
    # pipeline class) and its card's metadata (base_model), so neither file is downloaded per model.
    "config",
    "cardData",
]

#: What a read of a repo's info that wants its commit sha alone expands: the whole info lists every file of the repo
#: (thousands of scripts in the dataset's). (huggingface_hub types ``expand`` as one property; its *_info methods
#: take a list, as the Hub does.)
ONLY_SHA: Any = ["sha"]


@dataclass(frozen=True)
class ModelListing:
    """One model as the Hub lists it."""

    id: str
    sha: str | None
    pipeline_tag: str | None
    tags: tuple[str, ...]
    gated: Literal[False, "auto", "manual"]
    downloads: int
    likes: int
    trending_score: int
    params: int | None
    library_name: str | None
    last_modified: datetime | None
    architecture: str | None = None
    model_type: str | None = None
    base_model: tuple[str, ...] = ()
    #: The card's ``base_model_relation`` (adapter, merge, quantized, finetune) when it says.
    base_relation: str | None = None
    #: The repo's file paths, when asked for (:meth:`pipeline.hub.Hub.model_info` with ``files=True``).
    files: tuple[str, ...] | None = None

    @property
    def custom_code(self) -> bool:
        """The model needs ``trust_remote_code`` (we never run those)."""
        return "custom_code" in self.tags

    @classmethod
    def from_info(cls, info: ModelInfo) -> ModelListing:
        """Build from huggingface_hub's ModelInfo (fields it lacks get neutral values)."""
        gated = info.gated if info.gated in ("auto", "manual") else False
        return cls(
            id=info.id,
            sha=info.sha,
            pipeline_tag=info.pipeline_tag,
            tags=tuple(info.tags or ()),
            gated=gated,
            downloads=_count(info.downloads) or 0,
            likes=_count(info.likes) or 0,
            trending_score=_count(info.trending_score) or 0,
            params=_count(info.safetensors.total) if info.safetensors else None,
            library_name=info.library_name,
            last_modified=info.last_modified,
            **_family(info.config, info.card_data),
            files=tuple(s.rfilename for s in info.siblings) if info.siblings is not None else None,
        )


def _family(config: Any, card: Any) -> dict[str, Any]:
    """architecture, model_type, base_model and base_relation from the Hub's config summary and card metadata.

    Both are the repo's own text (untrusted): a name that is no plain class name or model type, or a base that is
    no Hub id, is dropped. A diffusers repo's summary names its pipeline class (``config["diffusers"]``).
    """
    config = config if isinstance(config, dict) else {}
    architectures = config.get("architectures")
    architecture = architecture_name(architectures[0]) if isinstance(architectures, list) and architectures else None
    diffusers = config.get("diffusers")
    if architecture is None and isinstance(diffusers, dict):
        architecture = architecture_name(diffusers.get("_class_name"))
    get = getattr(card, "get", None)
    relation = get("base_model_relation") if get else None
    return {
        "architecture": architecture,
        "model_type": model_type_name(config.get("model_type")),
        "base_model": base_model_ids(get("base_model") if get else None),
        "base_relation": relation if relation in ("adapter", "merge", "quantized", "finetune") else None,
    }


def _count(value: object) -> int | None:
    """A count from the Hub's JSON (untrusted): an integer or a finite float, else None (a null, a string...)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) == float("inf"):
        return None
    return int(value)


@dataclass(frozen=True)
class CommitResult:
    """What a commit produced. ``created`` is False when nothing changed (no commit was made)."""

    sha: str
    pr_num: int | None = None
    pr_url: str | None = None
    url: str | None = None
    created: bool = True
    rebases: int = 0
