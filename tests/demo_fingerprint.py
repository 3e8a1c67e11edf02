"""Print a fingerprint of a demo output tree with timestamps and measured numbers masked.

Used to show that a refactoring changes no output: run ``trncat demo`` before and after, fingerprint both
trees and diff them::

    .venv/bin/python tests/demo_fingerprint.py demo-out > before.txt
    # ... change the code, run the demo again ...
    .venv/bin/python tests/demo_fingerprint.py demo-out > after.txt
    diff before.txt after.txt

Parquet files are printed as their schema and their rows; text files as their text. Masked: times and dates,
run file names, record ids, content revisions, every float (every number on the page), peak memory figures
and the page's CSP hashes (they hash the data).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from pathlib import Path
from typing import Any

# Run as a script, this folder is sys.path[0]: its tests/queue/ package would shadow the standard library's queue
# (which pyarrow imports).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import pyarrow.parquet as pq  # noqa: E402

MEASURED_INTS = {"peak_host_memory_bytes", "peak_device_memory_bytes"}
_TEXT_MASKS = (
    (re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{12}"), "<run>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(\+00:00|Z)?"), "<time>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}"), "<date>"),
    (re.compile(r"sha256-[A-Za-z0-9+/=]+"), "sha256-<hash>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<id>"),
    # The tiny models' weights are drawn at random, so their content revisions differ per demo.
    (re.compile(r"\b[0-9a-f]{40}\b"), "<revision>"),
    (re.compile(r"\d+\.\d+(e[+-]?\d+)?"), "<num>"),
)


def mask_text(text: str) -> str:
    for pattern, replacement in _TEXT_MASKS:
        text = pattern.sub(replacement, text)
    return text


def _mask_value(column: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) or column in MEASURED_INTS:
        return f"<{type(value).__name__}>"
    if isinstance(value, dt.datetime):
        return "<time>"
    if isinstance(value, str):
        return mask_text(value)
    # Nested columns (latency_by_batch_s, history, attempts) hold measured floats too.
    if isinstance(value, list):
        return [_mask_value(column, v) for v in value]
    if isinstance(value, dict):
        return {k: _mask_value(k, v) for k, v in value.items()}
    return value


def fingerprint(root: Path) -> str:
    lines: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = mask_text(path.relative_to(root).as_posix())
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            lines.append(f"== {name} ({table.num_rows} rows)")
            lines.append(str(table.schema))
            for row in table.to_pylist():
                masked = {k: _mask_value(k, v) for k, v in row.items()}
                lines.append(json.dumps(masked, sort_keys=True, default=str))
        else:
            lines.append(f"== {name}")
            text = mask_text(path.read_text(encoding="utf-8"))
            if path.suffix == ".html":  # the page formats measured figures as integers too ("3 ms", "711")
                text = re.sub(r"\d+", "<n>", text)
            lines.append(text)
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: demo_fingerprint.py DEMO_OUT_DIR")
    print(fingerprint(Path(sys.argv[1])))
