"""docs/neuron-facts.md lists every Neuron environment variable the code, the runner kit and the workflows name."""

from __future__ import annotations

import ast
import re

from tests import ROOT

FACTS = ROOT / "docs" / "neuron-facts.md"
VARIABLE = re.compile(r"\b(?:NEURON|TORCH_NEURONX)_[A-Z0-9_]+\b")


def _table_variables() -> set[str]:
    section = FACTS.read_text(encoding="utf-8").split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    return {m[1] for m in re.finditer(r"^\| `([A-Z0-9_]+)`", section, re.M)}


def _named_in_code() -> dict[str, set[str]]:
    """Variable -> files. In Python only string literals count (constants like NEURON_INDEX_URL are ours)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # A package face's __all__ lists names of Python objects (NEURON_INDEX_URL), not environment variables.
        exported = {
            id(element)
            for node in tree.body
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for element in ast.walk(node.value)
        }
        for node in ast.walk(tree):
            if id(node) in exported:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in VARIABLE.findall(node.value):
                    found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    others = [*(ROOT / "runners").iterdir(), *(ROOT / ".github" / "workflows").glob("*.yml"),
              *(ROOT / "pipeline").rglob("templates/*")]  # fmt: skip
    for path in others:
        if path.is_file():
            for name in VARIABLE.findall(path.read_text(encoding="utf-8")):
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_neuron_variable_the_code_names_is_in_the_facts_table() -> None:
    named = _named_in_code()
    assert {"NEURON_RT_VISIBLE_CORES", "TORCH_NEURONX_NEFF_CACHE_DIR"} <= set(named)  # the scan sees the code
    missing = {name: sorted(files) for name, files in named.items() if name not in _table_variables()}
    assert missing == {}, f"add these to docs/neuron-facts.md with their documentation source: {missing}"


def test_every_row_names_a_source_and_whether_it_was_seen_on_hardware() -> None:
    for line in FACTS.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `") or (line.startswith("| ") and "---" not in line and "where the docs" not in line
                                       and "question" not in line and "|" in line[2:]):  # fmt: skip
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == 5:
                assert cells[2], f"no source: {line}"
                assert cells[4] in {"no", "yes", "n/a"}, f"seen on hardware must be yes/no: {line}"


def test_the_old_xla_cache_settings_are_gone_from_the_code() -> None:
    assert "NEURON_COMPILE_CACHE_URL" not in _named_in_code()
