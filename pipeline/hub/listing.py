"""What the Hub client returns: a model as the Hub lists it, and the outcome of a commit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from huggingface_hub.hf_api import ExpandModelProperty_T, ModelInfo

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
]


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
        )


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
