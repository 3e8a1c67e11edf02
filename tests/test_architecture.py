"""The shape of the package: import directions, owners of the layouts, no cycle, small files.

docs/architecture.md describes the shape; these tests keep it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pipeline"
MAX_LINES = 400
#: Path fragments of the dataset layout that only pipeline/dataset/ may name (the CLI's help text describes
#: the layout to people, so it may name it too).
LAYOUT_PATHS = ("data/results", "data/latest", "data/rankings", "data/exclusions", "exclusions.parquet")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports at run time (TYPE_CHECKING blocks left out), at module or function level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
    return found


GRAPH = {name: {m for m in _imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def _owned_by(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_there_is_no_import_cycle() -> None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            # A package's own submodules import each other through the package: not a cycle of the design.
            if state.get(nxt) == 1 and not _owned_by(node, nxt):
                cycle = stack[stack.index(nxt) :] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


def test_stage_modules_never_import_the_cli() -> None:
    edge = ("pipeline.cli", "pipeline.__main__")  # the CLI itself and `python -m pipeline`
    offenders = [m for m, deps in GRAPH.items() if m not in edge[1:] and not _owned_by(m, edge[0]) and any(
        _owned_by(d, edge[0]) for d in deps)]  # fmt: skip
    assert offenders == []


@pytest.mark.parametrize("library", ["huggingface_hub", "httpx2"])
def test_only_the_hub_package_imports_the_hub_client(library: str) -> None:
    offenders = [
        m
        for m, path in MODULES.items()
        if not _owned_by(m, "pipeline.hub") and any(_owned_by(i, library) for i in _imports(path))
    ]
    assert offenders == [], f"only pipeline.hub may import {library}"


def test_only_the_dataset_package_reads_or_writes_the_layout() -> None:
    parquet = [
        m for m, path in MODULES.items() if not _owned_by(m, "pipeline.dataset") and "pyarrow.parquet" in _imports(path)
    ]
    assert parquet == [], "only pipeline.dataset reads or writes Parquet"
    named: list[str] = []
    for module, path in MODULES.items():
        if _owned_by(module, "pipeline.dataset") or _owned_by(module, "pipeline.cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named.extend(f"{module}: {frag}" for frag in LAYOUT_PATHS if frag in node.value)
    # Docstrings may describe the layout; code may not build its paths.
    code_only = [n for n in named if not _in_docstring_only(n)]
    assert code_only == [], "only pipeline.dataset names the dataset's paths"


def _in_docstring_only(entry: str) -> bool:
    module, fragment = entry.split(": ", 1)
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                docstrings.add(doc)
    constants = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and fragment in n.value
    ]
    return all(value in docstrings for value in constants)


def test_no_file_in_the_package_passes_400_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in sorted(PACKAGE.rglob("*"))
        if p.is_file() and p.suffix in {".py", ".j2", ".js", ".css"}
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }  # fmt: skip
    assert long == {}


def test_the_checks_see_the_package() -> None:
    # The checks above pass trivially on an empty graph: make sure they read the real one.
    assert "pipeline.dataset.build" in GRAPH and "pipeline.hub.client" in GRAPH
    assert "pipeline.dataset.layout" in GRAPH["pipeline.dataset.build"]
    assert any(_owned_by(i, "huggingface_hub") for i in _imports(MODULES["pipeline.hub.client"]))
