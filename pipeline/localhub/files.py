"""Small file helpers of the local hub's store: the Hub's time format and atomic JSON writes."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def now() -> str:
    """The current time as the Hub writes it (``2026-11-30T12:00:00.000Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a temp file per process and thread, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)
