"""The docs' tables the stage matrix uses (issue 49), refreshed by the release watch: each architecture of
``runners/vllm-neuron-docs.yaml`` names its vLLM Neuron model recipe at a commit; the watch reads each recipe at
its newest commit (an injected fetcher), parses its feature table into the file's shape, and a table that differs
is the new file of the release pull request (a diff a maintainer reviews).

A page is untrusted text: nothing of it is run, and nothing of it reaches the file but a date (``date_updated``,
checked as one), the commit (40 hex digits) and values of the allowed set, each from a status the parser knows
(✅, ❌, N/A); an unknown status on a row the matrix reads is refused with one line, never guessed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from pipeline.errors import ConfigError
from pipeline.ids import is_revision
from pipeline.types import MATRIX_FEATURES as FEATURES

DOCS_FILE = "runners/vllm-neuron-docs.yaml"
#: (repository, path) -> (the newest commit of that page, the page's text at it).
Fetcher = Callable[[str, str], tuple[str, str]]
MAX_PAGE_BYTES = 1_000_000
_SOURCE = re.compile(r"https://github\.com/(vllm-project/vllm-neuron)/blob/([0-9a-f]{40})/(docs/[a-z0-9/_-]+\.md)")
_DATE = re.compile(r"<!-- meta: date_updated: (\d{4}-\d{2}-\d{2}) -->")
_HARDWARE = re.compile(r"using the Neuron SDK on AWS (.{0,200}?) hardware\.")
#: The matrix's features -> the feature cell of a recipe's table that documents it (an FP8 KV cache is no FP8
#: checkpoint); a ``(Trn2)`` / ``(Trn3)`` in the cell scopes it to that class and says the other has it not.
_ROWS = {
    "lora": r"LoRA( adapters)?",
    "eagle3": r"Speculative decoding \(EAGLE3\)",
    "prefix_caching": r"Prefix caching \(APC\)",
    "fp8": r"FP8 (static|weights).*",
    "mxfp4": r"MXFP4 weights.*",
    "mxfp8": r"MXFP8 weights.*",
}
_STATUS = {"✅": "supported", "❌": "not_supported", "N/A": "not_supported"}
CLASSES = ("trn2", "trn3")


def parse_recipe(text: str, *, source: str) -> dict[str, Any]:
    """One recipe page (read at ``source``) -> the file's entry: ``source``, ``as_of``, the ``trn2`` and ``trn3``
    tables (``model`` and each feature: supported, not_supported or not_listed).

    Raises:
        ConfigError: the page is not a recipe the parser knows, or a row the matrix reads has an unknown status.
    """
    date, flat = _DATE.search(text), " ".join(text.split())
    hardware = _HARDWARE.search(flat)
    listed = [c for c in CLASSES if hardware and f"(`{c}`)" in hardware[1]]
    if date is None or not listed:
        raise ConfigError(f"{source}: not a model recipe: no date_updated, or no Trainium hardware it is served on")
    empty = dict.fromkeys(FEATURES, "not_listed")
    tables = {c: {"model": "supported" if c in listed else "not_listed", **empty} for c in CLASSES}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3:
            continue
        feature = cells[1].replace("*", "")
        for name, pattern in _ROWS.items():
            if not re.fullmatch(pattern, feature):
                continue
            status = _STATUS.get(cells[2].split(" ")[0] if cells[2] else "")
            if status is None:
                raise ConfigError(f"{source}: {feature[:60]!r}: status {cells[2][:40]!r} is none of ✅, ❌, N/A")
            only = [c for c in CLASSES if f"({c.capitalize()})" in feature]
            for cls in listed:
                tables[cls][name] = status if not only or cls in only else "not_supported"
    return {"source": source, "as_of": date[1], **tables}


def refresh_docs(text: str, fetch: Fetcher) -> tuple[str | None, list[str]]:
    """The docs file ``text`` with every recipe read again at its newest commit: (the new text, or None when the
    tables are the same; one line per page that changed, for the pull request).

    Raises:
        ConfigError: the file or a page is not what it should be (the fetcher's own errors pass through).
    """
    try:
        table = yaml.safe_load(text)["architectures"]
        before = {arch: _plain(entry) for arch, entry in table.items()}
    except (yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{DOCS_FILE}: not the docs' tables: {str(exc)[:200]}") from None
    pages = {arch: _SOURCE.fullmatch(str(entry["source"])) for arch, entry in before.items()}
    if bad := sorted(arch for arch, match in pages.items() if match is None):
        raise ConfigError(f"{DOCS_FILE}: {', '.join(bad)}: the source is no vLLM Neuron page at a commit")
    parsed: dict[tuple[str, str], dict[str, Any]] = {}
    notes: list[str] = []
    for arch, (repo, old, path) in ((a, m.groups()) for a, m in pages.items() if m):
        if (repo, path) not in parsed:
            commit, page = fetch(repo, path)
            if not is_revision(commit) or len(page.encode()) > MAX_PAGE_BYTES:
                raise ConfigError(f"{repo} {path}: the fetcher gave no commit, or a page over {MAX_PAGE_BYTES} bytes")
            parsed[repo, path] = parse_recipe(page, source=f"https://github.com/{repo}/blob/{commit}/{path}")
            if parsed[repo, path] != before[arch]:
                notes.append(f"{path}: {old[:7]} -> {commit[:7]} (as of {parsed[repo, path]['as_of']})")
    new = {arch: parsed[m[1], m[3]] for arch, m in pages.items() if m}
    return (None, []) if new == before else (dump_docs(text, new), notes)


def _plain(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An entry as compared: the date as text, the tables as plain mappings."""
    return {"source": entry["source"], "as_of": str(entry["as_of"]), **{c: dict(entry[c]) for c in CLASSES}}


def dump_docs(text: str, table: Mapping[str, Mapping[str, Any]]) -> str:
    """The docs file: ``text``'s header comment, then ``table`` as the file writes it (a page that documents two
    architectures once, the second an alias of the first)."""
    header = [line for line in text.splitlines() if line.startswith("#")]
    lines, anchors = [*header, "architectures:"], dict[str, str]()
    pages = Counter(entry["source"] for entry in table.values())
    for arch, entry in table.items():
        if entry["source"] in anchors:
            lines.append(f"  {arch}: *{anchors[entry['source']]}")
            continue
        name = entry["source"].rsplit("/", 1)[1].removesuffix(".md").replace("-", "_")
        anchors[entry["source"]] = name
        lines.append(f"  {arch}:" + (f" &{name}" if pages[entry["source"]] > 1 else ""))
        lines += [f"    source: {entry['source']}", f'    as_of: "{entry["as_of"]}"']
        for cls in CLASSES:
            cells = ", ".join(f"{key}: {entry[cls][key]}" for key in ("model", *FEATURES))
            lines.append(f"    {cls}: {{{cells}}}")
    return "\n".join(lines) + "\n"
