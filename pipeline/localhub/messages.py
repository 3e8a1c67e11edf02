"""Request and response types shared by the local hub's routes, and Hub-shaped error answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

#: The user every request acts as (a hub started with tokens checks them for writes: pipeline.localhub.auth).
USER = "localhub-user"
#: URL prefix of each repo type.
PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


@dataclass
class Request:
    """What the route functions need of an HTTP request."""

    method: str
    segments: list[str]  # path split on "/", each segment unquoted (so "refs%2Fpr%2F1" stays one)
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    base_url: str
    path: str
    #: Signs an LFS upload URL for an oid (a hub started with tokens); None: upload URLs are not signed.
    sign: Callable[[str], str] | None = None

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name) or self.query.get(f"{name}[]")
        return values[0] if values else default

    def args(self, name: str) -> list[str]:
        return (self.query.get(name) or []) + (self.query.get(f"{name}[]") or [])

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


@dataclass
class Response:
    """An answer; ``file`` (path, start, length) streams a blob instead of ``body``."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    file: tuple[Path, int, int] | None = None


def ok(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response."""
    return Response(status, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})})


def error(status: int, message: str, code: str | None = None, extra: dict[str, str] | None = None) -> Response:
    """An error the way the Hub sends it: JSON body plus X-Error-Code / X-Error-Message headers."""
    headers = {"X-Error-Message": message, **(extra or {})}
    if code:
        headers["X-Error-Code"] = code
    return ok({"error": message}, status, headers)


def split_rev(segments: list[str]) -> tuple[str, list[str]]:
    """Revision and the rest; huggingface_hub quotes "/" in revisions, but accept a raw refs/pr/N too."""
    if len(segments) >= 3 and segments[0] == "refs" and segments[1] in {"pr", "heads"}:
        return "/".join(segments[:3]), segments[3:]
    return segments[0], segments[1:]


def parse_path(raw: str) -> tuple[list[str], dict[str, list[str]]]:
    """Split a raw request target into unquoted segments and query."""
    path, _, query = raw.partition("?")
    return [unquote(s) for s in path.split("/") if s], parse_qs(query, keep_blank_values=True)
