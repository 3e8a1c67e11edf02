"""docs/threat-model.md names, beside each attack, the test that reproduces it: every such test exists."""

from __future__ import annotations

import ast
import re

from tests import ROOT

DOC = ROOT / "docs" / "threat-model.md"


def _functions(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_every_test_the_threat_model_names_exists() -> None:
    named: list[tuple[str, str]] = []
    for cell in re.findall(r"`((?:tests/[\w/]+\.py)?::\w+)`", DOC.read_text(encoding="utf-8")):
        path, _, name = cell.partition("::")
        named.append((path or named[-1][0], name))  # `::name` is in the file named just before
    assert len(named) >= 24, "every attack of the last rounds names its test"
    missing = [f"{path}::{name}" for path, name in named if name not in _functions(path)]
    assert missing == [], f"docs/threat-model.md names tests that do not exist: {missing}"


def test_the_runner_threat_model_names_this_rounds_guards() -> None:
    section = (ROOT / "runners" / "README.md").read_text(encoding="utf-8").split("## Threat model", 1)[1]
    for needle in ("DevicePolicy=closed", "DeviceAllow=", "TemporaryFileSystem=", "ref: ${{ github.sha }}",
                   "pull_request_target", "CODEOWNERS", "this repository alone"):  # fmt: skip
        assert needle in section, needle
