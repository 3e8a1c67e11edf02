"""Who may write to a local hub started with tokens, and how much a request may send.

Without tokens (the default, what tests and the demo use) every request acts as :data:`USER`. Started with
tokens, every write (any PUT or DELETE, and every POST but the read-only ``paths-info`` and ``validate-yaml``,
told by their exact routes: a word elsewhere in a path makes nothing a read) needs ``Authorization: Bearer <one
of them>``, compared in constant time, before any of its body is read. An LFS upload carries no
Authorization header (huggingface_hub PUTs to the batch answer's ``href`` as to a presigned URL), so the
batch answer signs each upload URL with a secret of this server and the upload must carry that signature.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable

from pipeline.localhub.messages import Response, error, split_rev

#: The largest request body accepted (413 beyond): room for a small model's weights or a dataset's Parquet.
MAX_BODY_BYTES = 512 * 1024 * 1024
_REPO_TYPES = {"models", "datasets", "spaces"}


class Gate:
    """Checks write tokens (when there are any) and signs LFS upload URLs.

    Args:
        tokens: Tokens allowed to write; None accepts every request (no token needed).
    """

    def __init__(self, tokens: Iterable[str] | None = None) -> None:
        self.tokens = None if tokens is None else tuple(t.encode() for t in tokens if t)
        self._secret = secrets.token_bytes(32)

    @property
    def enabled(self) -> bool:
        return self.tokens is not None

    def sign(self, oid: str) -> str:
        """The signature an upload of ``oid`` must carry (``?sig=``)."""
        return hmac.new(self._secret, oid.encode(), hashlib.sha256).hexdigest()

    def refuse(
        self, method: str, segments: list[str], query: dict[str, list[str]], headers: dict[str, str]
    ) -> Response | None:
        """A 401 answer for a write without a valid token (or an unsigned upload); None when allowed."""
        if self.tokens is None or not _is_write(method, segments):
            return None
        if segments[:1] == ["lfs-upload"] and method == "PUT":
            sig = (query.get("sig") or [""])[0]
            oid = segments[1] if len(segments) > 1 else ""
            if hmac.compare_digest(sig.encode(), self.sign(oid).encode()):
                return None
            return error(401, "Upload URL is not signed by this server", "Unauthorized")
        scheme, _, token = headers.get("authorization", "").partition(" ")
        given = token.strip().encode()
        if scheme.lower() == "bearer" and any(hmac.compare_digest(given, t) for t in self.tokens):
            return None
        return error(401, "Invalid credentials in Authorization header: a write needs a token", "Unauthorized")


def _is_write(method: str, segments: list[str]) -> bool:
    if method in {"PUT", "DELETE", "PATCH"}:
        return True
    return method == "POST" and not is_read_only_post(segments)


def is_read_only_post(segments: list[str]) -> bool:
    """The two POSTs that only read, by their whole route: ``/api/validate-yaml`` and
    ``/api/{type}s/{namespace}/{name}/paths-info/{revision}`` (issue 22.10: a segment anywhere used to count)."""
    if segments == ["api", "validate-yaml"]:
        return True
    if len(segments) < 6 or segments[0] != "api" or segments[1] not in _REPO_TYPES or segments[4] != "paths-info":
        return False
    _, rest = split_rev(segments[5:])
    return not rest
