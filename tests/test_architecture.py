"""The shape of the package: one package per stage or concern, the directions between them, public faces,
no import circle anywhere, small files, and the owners of the layouts.

docs/architecture.md describes the shape; these tests keep it.
"""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pipeline"
MAX_LINES = 400
#: What every stage uses stays at the top of pipeline/ (errors, constants, ids, the registries, hardware facts).
MAX_TOP_LEVEL_MODULES = 12
#: Path fragments of the dataset layout that only pipeline/dataset/ may name (the CLI's help text describes
#: the layout to people, so it may name it too).
LAYOUT_PATHS = (
    "data/results", "data/latest", "data/rankings", "data/exclusions", "exclusions.parquet", "data/families",
)  # fmt: skip

#: The allowed directions: package -> the packages it may import (every package may import the top-level
#: modules, which import no package). Read from the bottom up, it is the flow in docs/architecture.md: the
#: ground (the Hub client, the devices, the fixtures), the contracts (a model's files, the result record, the
#: local hub), what the stages plan and render with (the planner, the generated files, the page), the dataset
#: they all store into, then the stages in the order of the flow: discover -> queue -> bench -> publish -> space,
#: and the CLI at the edge. The planner comes before the queue and the bench that size jobs with it; the record
#: and the dataset come early because every stage makes, reads or stores records.
ALLOWED: dict[str, set[str]] = {
    "hub": set(),
    "backends": set(),
    "testing": set(),
    "localhub": {"hub"},
    "models": {"hub"},
    "records": {"backends"},
    "plan": {"hub", "models"},
    "render": {"backends"},
    "page": {"backends", "records"},
    # serve drives an engine with a load generator and writes a record (hardware from backends, checks from records;
    # the serving smoke's tiny model from testing; a Hub model's files and the remote-code gate from models; the one
    # failure classification from bench, so that one event is one verdict in both).
    "serve": {"backends", "bench", "hub", "models", "records", "testing"},
    "dataset": {"page", "records", "render"},
    "discover": {"dataset", "hub", "records"},
    "queue": {"dataset", "discover", "hub", "plan", "records"},
    "bench": {"backends", "hub", "models", "plan", "records", "testing"},
    # publish uploads the compiled-cache bundles too, checked again under the rule the Neuron backend owns.
    "publish": {"backends", "dataset", "hub", "records", "render"},
    # check answers for models the catalog has not measured: it reads what discover, the planner and the dataset
    # know (and renders run.py), and nothing imports it but the CLI.
    "check": {"backends", "dataset", "discover", "hub", "models", "plan", "records", "render"},
    "space": {"dataset", "hub", "page", "records", "render"},
    # release watches for Neuron releases and diffs two toolchains' rows: the pins (queue), the results (dataset).
    "release": {"dataset", "queue", "records"},
    "cli": {
        "backends", "bench", "check", "dataset", "discover", "hub", "localhub", "models", "page", "plan",
        "publish", "queue", "records", "release", "render", "serve", "space", "testing",
    },
}  # fmt: skip


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
FACES = {name for name, path in MODULES.items() if path.name == "__init__.py"}
PACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def _public_names(face: str) -> set[str]:
    """The names a package's face makes public: what it imports from its own modules (under ``if TYPE_CHECKING:``, as
    a lazy face lists them, or plainly), the one list of its names; a face that also defines names of its own, or
    passes on another package's, lists them all in ``__all__`` instead."""
    body = ast.parse(MODULES[face].read_text(encoding="utf-8")).body
    for node in body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            assert isinstance(node.value, ast.List | ast.Tuple), f"{face}.__all__ is not a literal list"
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    typing_blocks = [n.body for n in body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING"]
    return {
        alias.asname or alias.name
        for node in (*body, *(n for block in typing_blocks for n in block))
        if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith(face + ".")
        for alias in node.names
    }


PUBLIC = {face: _public_names(face) for face in FACES}


def owner(module: str) -> str:
    """The package a module belongs to, or ``core`` for the top-level modules (``__main__`` is the CLI's)."""
    if module == "pipeline.__main__":
        return "cli"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "core"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, *, typing_too: bool = False) -> list[tuple[str, str | None]]:
    """(module, name) of every import in ``path``, at module or function level; ``name`` is None for a plain
    ``import``. ``from P import X`` is an import of the module ``P.X`` when X is a module that P's face does not
    list, else of ``P`` (naming X). TYPE_CHECKING blocks are left out unless ``typing_too``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    if not typing_too:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node):
                skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in MODULES and alias.name not in PUBLIC.get(node.module, set()):
                    found.append((submodule, None))
                else:
                    found.append((node.module, alias.name))
    return found


def _graph(*, typing_too: bool = False) -> dict[str, set[str]]:
    return {
        name: {m for m, _ in _imports(path, typing_too=typing_too) if m in MODULES and m != name}
        for name, path in MODULES.items()
    }


GRAPH = _graph()


def _owned_by(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("typing_too", [False, True], ids=["run-time", "with-type-checking"])
def test_there_is_no_import_circle_anywhere(typing_too: bool) -> None:
    # Inside packages too: a module that imports its own package's face (which imports it back) is a circle.
    cycle = _cycle(_graph(typing_too=typing_too))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_a_circle_is_found_where_there_is_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_at_most_twelve_modules_stay_at_the_top() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_the_allowed_directions_name_every_package_and_have_no_circle() -> None:
    assert set(ALLOWED) == set(PACKAGES)
    assert all(deps <= set(PACKAGES) for deps in ALLOWED.values())
    assert _cycle({p: set(deps) for p, deps in ALLOWED.items()}) is None


def test_top_level_modules_import_no_package() -> None:
    offenders = sorted(
        f"{m} -> {d}" for m, deps in GRAPH.items() if owner(m) == "core" for d in deps if owner(d) != "core"
    )
    assert offenders == []


def test_nothing_in_the_product_imports_the_tests() -> None:
    # The tests' own code (the Neuron emulator in tests/support/neuron/ among it) stays out of what trncat runs.
    offenders = sorted(
        f"{name} -> {m}"
        for name, path in MODULES.items()
        for m, _ in _imports(path, typing_too=True)
        if m == "tests" or m.startswith("tests.")
    )
    assert offenders == []


def test_packages_import_only_in_the_allowed_directions() -> None:
    offenders = sorted(
        f"{m} -> {d}"
        for m, deps in GRAPH.items()
        for d in deps
        if owner(m) != "core" and owner(d) not in ("core", owner(m)) and owner(d) not in ALLOWED[owner(m)]
    )
    assert offenders == [], "an import against the allowed directions (tests/test_architecture.py ALLOWED)"


def test_the_direction_check_fails_on_an_import_against_the_flow() -> None:
    # The planner importing the benchmark (the bench imports the planner) is refused.
    assert "bench" not in ALLOWED["plan"] and "plan" in ALLOWED["bench"]
    assert owner("pipeline.plan.model") == "plan" and owner("pipeline.bench.run") == "bench"
    assert owner("pipeline.errors") == "core" and owner("pipeline.__main__") == "cli"


def test_other_packages_use_only_a_package_s_public_names() -> None:
    offenders: list[str] = []
    for module, path in MODULES.items():
        for target, name in _imports(path, typing_too=True):
            if target not in MODULES or owner(target) in ("core", owner(module)):
                continue
            if target not in FACES:
                offenders.append(f"{module} imports the module {target} (use its package's face)")
            elif name is not None and name not in PUBLIC[target]:
                offenders.append(f"{module} imports {target}.{name}, which {target}'s face does not make public")
    assert offenders == []


def test_every_public_name_of_a_face_exists() -> None:
    """Each public name of a face resolves (a lazy face imports its module on that first use) to what its
    module defines: never the same-named submodule, unless the face lists that submodule itself."""
    missing: list[str] = []
    for face in sorted(FACES):
        module = importlib.import_module(face)
        tree = ast.parse(MODULES[face].read_text(encoding="utf-8"))
        listed_modules = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                          and n.module == face for a in n.names}  # fmt: skip
        for name in sorted(PUBLIC[face]):
            value = getattr(module, name, missing)
            if value is missing:
                missing.append(f"{face}.{name}")
            elif isinstance(value, types.ModuleType) and name not in listed_modules:
                missing.append(f"{face}.{name} is the submodule, not the name its face imports")
    assert missing == []


def _may_import(doc: str) -> set[str] | None:
    """The packages a face's docstring says it may import (None: "every package")."""
    text = " ".join(doc.split())
    match = re.search(r"May import: (.*?)(?:Imported by|$)", text)
    assert match, "no 'May import:' sentence"
    if "every package" in match.group(1):
        return None
    return set(re.findall(r":mod:`pipeline\.([a-z_]+)`", match.group(1)))


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_face_says_what_it_owns_may_import_and_who_imports_it(package: str) -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc.split()) >= 12, f"pipeline/{package}/__init__.py opens with no docstring of what it owns"
    assert "Imported by" in " ".join(doc.split())
    stated = _may_import(doc)
    allowed = ALLOWED[package]
    assert (stated if stated is not None else set(PACKAGES) - {package}) == allowed, (
        f"pipeline/{package}/__init__.py's 'May import:' names {sorted(stated or [])}, ALLOWED has {sorted(allowed)}"
    )


def test_each_sub_package_face_opens_with_a_docstring() -> None:
    silent = [f for f in sorted(FACES) if f.count(".") > 1 and not ast.get_docstring(ast.parse(MODULES[f].read_text()))]
    assert silent == []


def test_tests_mirror_the_packages() -> None:
    tests = PACKAGE.parent / "tests"
    missing = [p for p in PACKAGES if not any((tests / p).glob("test_*.py"))]
    assert missing == [], "tests/<package>/ holds each package's tests"
    strays = sorted(p.name for p in tests.glob("test_*.py") if p.stem.removeprefix("test_") in PACKAGES)
    assert strays == []


def test_stage_modules_never_import_the_cli() -> None:
    offenders = [m for m, deps in GRAPH.items() if owner(m) != "cli" and any(owner(d) == "cli" for d in deps)]
    assert offenders == []


@pytest.mark.parametrize("library", ["huggingface_hub", "httpx2"])
def test_only_the_hub_package_imports_the_hub_client(library: str) -> None:
    offenders = [
        m
        for m, path in MODULES.items()
        if not _owned_by(m, "pipeline.hub") and any(_owned_by(i, library) for i, _ in _imports(path))
    ]
    assert offenders == [], f"only pipeline.hub may import {library}"


def test_only_the_dataset_package_reads_or_writes_the_layout() -> None:
    parquet = [
        m
        for m, path in MODULES.items()
        if not _owned_by(m, "pipeline.dataset") and "pyarrow.parquet" in {i for i, _ in _imports(path)}
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
    assert "pipeline.plan" in GRAPH["pipeline.queue.planners"]  # through the planner's face
    assert {"plan", "queue", "page", "records"} <= set(PACKAGES)
    assert "plan_model" in PUBLIC["pipeline.plan"]
    assert any(_owned_by(i, "huggingface_hub") for i, _ in _imports(MODULES["pipeline.hub.client"]))
