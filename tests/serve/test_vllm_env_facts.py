"""Every environment variable of vLLM and its Neuron plugin that trncat's engines set has a row in
docs/neuron-facts.md with the page that documents it: the variables of every engine command the builders make
(``vllm_commands.every_vllm_command``: the LNC, the warm start's cache root and its strict switch, ...) and every
``VLLM_*`` name pipeline/serve and pipeline/backends hold as a string."""

from __future__ import annotations

import ast
import re

from tests import ROOT
from tests.serve.vllm_commands import every_vllm_command

FACTS = ROOT / "docs" / "neuron-facts.md"
#: Whose variables: vLLM's and Neuron's (the Hub's offline switches are not the engine's facts).
ENGINE_VARIABLE = re.compile(r"^(?:VLLM|NEURON)_[A-Z0-9_]+$")
VLLM_NAME = re.compile(r"\bVLLM_[A-Z0-9_]+\b")
#: A source cell names a page: a docs path, a URL, or a file of a named repository.
PAGE = re.compile(r"DOCS/|https?://|aws-neuron-sdk `|vLLM's `")


def documented(text: str) -> dict[str, list[str]]:
    """Variable -> the source cells of the rows whose first cell names it in code (`` `VAR` `` or
    `` `$VAR/...` ``), across every table of the facts (a table's source column is its "where the docs state it")."""
    found: dict[str, list[str]] = {}
    source_at: int | None = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            source_at = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if i + 1 < len(lines) and lines[i + 1].startswith("| ---"):  # a header
            source_at = next((k for k, c in enumerate(cells) if c.startswith("where the docs")), None)
            continue
        if source_at is None or line.startswith("| ---") or len(cells) <= source_at:
            continue
        for name in re.findall(r"`\$?([A-Z][A-Z0-9_]+)", cells[0]):
            found.setdefault(name, []).append(cells[source_at])
    return found


def engine_variables() -> dict[str, set[str]]:
    """Variable -> where it comes from: the commands that set it, and the files that name it."""
    found: dict[str, set[str]] = {}
    for name, spec in every_vllm_command().items():
        for variable in spec.env:
            if ENGINE_VARIABLE.match(variable):
                found.setdefault(variable, set()).add(f"the command of: {name}")
    trees = {
        path: ast.parse(path.read_text(encoding="utf-8"))
        for folder in ("serve", "backends")
        for path in sorted((ROOT / "pipeline" / folder).rglob("*.py"))
    }
    # trncat's own constants named VLLM_* (VLLM_INSTALL, ...) are no variables of vLLM's, wherever a string names them
    ours = {
        target.id
        for tree in trees.values()
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for variable in set(VLLM_NAME.findall(node.value)) - ours:
                    found.setdefault(variable, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_engine_variable_has_a_row_with_its_page() -> None:
    variables = engine_variables()
    # the scan sees what the engines set: the LNC, the warm start's root and its strict switch
    assert {"NEURON_LOGICAL_NC_CONFIG", "VLLM_CACHE_ROOT", "VLLM_NEURON_DISABLE_WARMUP_COMPILE"} <= set(variables)
    rows = documented(FACTS.read_text(encoding="utf-8"))
    missing = {
        name: sorted(where)[:3]
        for name, where in sorted(variables.items())
        if not any(PAGE.search(source) for source in rows.get(name, []))
    }
    assert missing == {}, f"add a row with its documentation page to docs/neuron-facts.md for: {missing}"


def test_a_variable_without_a_row_or_without_a_page_fails() -> None:
    """The check can fail: a row whose source names no page does not count, and a name without a row is seen."""
    table = (
        "| fact | where the docs state it | used by | seen on hardware |\n| --- | --- | --- | --- |\n"
        "| `VLLM_A` is a switch | as above | x | no |\n| `$VLLM_B/cache` holds it | `DOCS/b.html` | x | no |\n"
    )
    rows = documented(table)
    assert not any(PAGE.search(s) for s in rows["VLLM_A"])
    assert any(PAGE.search(s) for s in rows["VLLM_B"])
    assert "VLLM_C" not in rows
