"""The mutation check's list (tests/support/neuron_mutants.yaml) stays true to the code, and its runner tells a
killed mutant from a surviving one. The mutants themselves run on demand and in the scheduled ``mutation``
workflow (``python -m tests.support.mutation``), never here: each one runs emulated tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import ROOT
from tests.support import mutation
from tests.support.neuron import RULES

MUTANTS = mutation.load()


def test_every_mutant_patches_text_that_is_in_its_file_once() -> None:
    stale = {m.id: mutation.occurrences(m) for m in MUTANTS if mutation.occurrences(m) != 1}
    assert stale == {}, "the code moved: update tests/support/neuron_mutants.yaml"
    assert len({m.id for m in MUTANTS}) == len(MUTANTS) and all(m.before != m.after for m in MUTANTS)


def test_every_mutant_names_its_facts_row_and_tests_that_exist() -> None:
    text = (ROOT / "docs" / "neuron-facts.md").read_text(encoding="utf-8")
    rows = {m[1].strip() for m in re.finditer(r"^\| ([^|]+?) \|", text, re.M)}
    assert [m.id for m in MUTANTS if m.fact not in rows] == []
    for m in MUTANTS:
        assert m.kind in mutation.KINDS and m.tests, m.id
        for test in m.tests:
            path, _, name = test.partition("::")
            tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
            functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            assert not name or name in functions, f"{m.id}: no test {test}"


def test_every_emulator_rule_is_made_permissive_by_a_mutant() -> None:
    made_permissive = {m.rule for m in MUTANTS if m.kind == "emulator"}
    assert {r.key for r in RULES} - made_permissive == set()
    assert made_permissive <= {r.key for r in RULES}
    # and the survivors the check first found are in the list, as production mutants
    production = {m.id for m in MUTANTS if m.kind == "production"}
    first = {"distributed-after-load", "no-init-process-group", "neuron-ls-233-flag-only",
             "compile-partial-graphs-other-mode", "peak-without-synchronize", "device-zero-on-every-rank"}  # fmt: skip
    assert first <= production


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout of one module and its test, for the runner's own test (git-less: its files are listed here)."""
    (tmp_path / "toy.py").write_text("def double(x):\n    return x * 2\n")
    (tmp_path / "test_toy.py").write_text("from toy import double\n\n\ndef test_double():\n    assert double(2) == 4\n")
    monkeypatch.setattr(mutation, "checkout_files", lambda root=None: ["toy.py", "test_toy.py"])
    return tmp_path


def test_the_runner_kills_a_caught_mutant_and_reports_a_survivor(toy: Path) -> None:
    copy = mutation.scratch_copy(toy / "copy", root=toy)
    caught = mutation.Mutant("caught", "production", "toy.py", "x * 2", "x * 3", "f", ("test_toy.py",))
    missed = mutation.Mutant("missed", "production", "toy.py", "x * 2", "x + x", "f", ("test_toy.py",))
    stale = mutation.Mutant("stale", "production", "toy.py", "x * 4", "x", "f", ("test_toy.py",))
    outcomes = [mutation.try_mutant(m, copy, timeout_s=120) for m in (caught, missed, stale)]
    assert [o.status for o in outcomes] == ["killed", "survived", "stale"]
    assert (copy / "toy.py").read_text() == (toy / "toy.py").read_text()  # put back after each mutant
    result = mutation.report(outcomes, wall_s=1.0, baseline_ok=True)
    assert (result["tried"], result["killed"], result["survived"], result["stale"]) == (3, 1, 1, 1)


def test_two_at_once_each_in_its_own_copy_gives_the_outcomes_in_the_lists_order(toy: Path) -> None:
    """``--jobs 2``: two mutants of the same file at once cannot see each other's patch (one copy each), and the
    report keeps the list's order whatever finishes first."""
    copies = [mutation.scratch_copy(toy / f"copy-{k}", root=toy) for k in range(2)]
    mutants = [
        mutation.Mutant(f"m{k}", "production", "toy.py", "x * 2", after, "f", ("test_toy.py",))
        for k, after in enumerate(("x * 3", "x + x", "x * 4", "x << 1"))
    ]
    outcomes = mutation.try_all(mutants, copies, timeout_s=120)
    assert [(o.id, o.status) for o in outcomes] == [
        ("m0", "killed"),
        ("m1", "survived"),
        ("m2", "killed"),
        ("m3", "survived"),
    ]
    assert all((copy / "toy.py").read_text() == (toy / "toy.py").read_text() for copy in copies)
