"""Rows with a published compiled-cache bundle, shared by the warm-check tests (queue, publish, page)."""

from __future__ import annotations

from typing import Any

from pipeline.records import bundle_path

#: The machine (an EC2 instance id) the rows' bundles were made on.
MADE_ON = "i-0123456789abcdef1"


def with_bundle(record: dict[str, Any], sha256: str) -> dict[str, Any]:
    """``record`` (a CI neuron pass) naming a published compiled-cache bundle of digest ``sha256``, as publish names
    one (pipeline/publish/bundles.py)."""
    record["compiled_cache"] = {"repo_id": "trncat/trncat-compiled", "revision": "e" * 40, "sha256": sha256,
                                "path": bundle_path(record, sha256), "bytes": 1024, "files": 3}  # fmt: skip
    record["run"]["machine"] = MADE_ON  # the machine that made it: what a second-machine check is compared with
    return record
