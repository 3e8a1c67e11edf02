"""The mutation check of the Neuron path: put one realistic bug at a time into a scratch copy, run the tests that
must catch it, and report the bugs that got through.

Each mutant in ``neuron_mutants.yaml`` (beside this module) is a small hand-written patch: the file, the text as
it is (``before``, which must occur exactly once), the text as the bug writes it (``after``), the row of
docs/neuron-facts.md whose fact it violates (``fact``, the row's first cell), what it is (``kind``: ``production``,
a bug in the real Neuron path; ``emulator``, one of the emulator's rules, ``rule``, made permissive) and the tests
that must go red (``tests``, pytest node ids). A mutant is *killed* when its tests fail (or run past the
timeout), *survives* when they pass, and is *stale* when its ``before`` text is not in its file once (the code
moved: the list must follow it).

Semantic bugs (a call moved, a synchronize dropped, a flag the next release removes) need hand-written patches:
a generic mutation tool's operators (mutmut, cosmic-ray: swapped operators, changed constants) do not write
them, and one of its runs per operator over these emulated tests would take hours, so none is used here.

``python -m tests.support.mutation`` runs every mutant (``--only ID`` some of them) in a scratch copy of the
checkout (the files git tracks or would track, never the working tree itself), after one baseline run of the
tests on the unmutated copy (a test that already fails would "kill" everything); ``--jobs N`` tries N mutants at
once, each in its own copy (default: one per CPU); ``--report FILE`` writes the JSON report. Run on demand and by
the scheduled ``mutation`` workflow, never by ``make test``; ``tests/testing/test_mutation.py`` checks the list
itself (every ``before`` found once, every rule and row named, every test existing) in ``make test``. Imports
nothing of trncat's.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

MUTANTS_FILE = Path(__file__).with_name("neuron_mutants.yaml")
REPO = Path(__file__).resolve().parents[2]
KINDS = ("production", "emulator")
#: pytest's exit codes that mean the tests ran and some failed (1) or were interrupted by our timeout (None).
FAILED = 1


@dataclass(frozen=True)
class Mutant:
    """One bug, as a patch of one file, and the tests that must catch it."""

    id: str
    kind: str
    file: str
    before: str
    after: str
    fact: str
    tests: tuple[str, ...]
    why: str = ""
    rule: str | None = None


@dataclass
class Outcome:
    """What became of one mutant: ``killed``, ``survived``, ``stale`` or ``broken`` (its tests did not run)."""

    id: str
    kind: str
    status: str
    seconds: float
    detail: str = ""
    tests: list[str] = field(default_factory=list)


def load(path: Path = MUTANTS_FILE) -> list[Mutant]:
    """The mutants of the list, in its order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    mutants = []
    for entry in data["mutants"]:
        entry = dict(entry)
        entry["tests"] = tuple(entry["tests"])
        mutants.append(Mutant(**entry))
    return mutants


def occurrences(mutant: Mutant, root: Path = REPO) -> int:
    """How often the mutant's ``before`` text occurs in its file (1 when the list is current)."""
    try:
        return (root / mutant.file).read_text(encoding="utf-8").count(mutant.before)
    except OSError:
        return 0


def checkout_files(root: Path = REPO) -> list[str]:
    """The files of the checkout: those git tracks and those it would (not ignored)."""
    done = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                          check=True)  # fmt: skip
    return sorted(name for name in done.stdout.decode().split("\0") if name and (root / name).is_file())


def scratch_copy(dest: Path, root: Path = REPO) -> Path:
    """A copy of the checkout's files in ``dest`` (the tests run there, with its ``pipeline`` first on the path)."""
    for name in checkout_files(root):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    return dest


def run_tests(copy: Path, tests: list[str], timeout_s: float) -> tuple[int | None, str]:
    """pytest on ``tests`` in the copy; (exit code, the output's tail), the code None after a timeout."""
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
               "--timeout", str(int(timeout_s)), *tests]  # fmt: skip
    try:
        done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout_s + 60)
    except subprocess.TimeoutExpired as exc:
        return None, str(exc.stdout or "")[-1500:]
    return done.returncode, (done.stdout + done.stderr)[-1500:]


def try_mutant(mutant: Mutant, copy: Path, timeout_s: float) -> Outcome:
    """Apply one mutant in the copy, run its tests, put the file back."""
    path = copy / mutant.file
    original = path.read_text(encoding="utf-8")
    start = time.monotonic()
    if original.count(mutant.before) != 1:
        found = original.count(mutant.before)
        return Outcome(mutant.id, mutant.kind, "stale", 0.0, f"`before` found {found} times in {mutant.file}")
    path.write_text(original.replace(mutant.before, mutant.after), encoding="utf-8")
    try:
        code, tail = run_tests(copy, list(mutant.tests), timeout_s)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = round(time.monotonic() - start, 1)
    ran = re.search(r"\b\d+ failed\b", tail) is not None  # a test failed, not the collection or a plugin import
    if code is None or (code == FAILED and ran):
        status = "killed"
    elif code == 0:
        status = "survived"
    else:  # 2 interrupted, 3 internal error, 4 usage error, 5 no tests: the tests did not run as named
        status = "broken"
    lines = tail.strip().splitlines()
    # why it went red: pytest's short summary (FAILED test - the error) or its first "E" line, then the counts
    why = next((line.strip() for line in lines if line.startswith(("FAILED ", "ERROR "))), "") or next(
        (line.strip() for line in lines if line.startswith("E ")), ""
    )
    detail = "timeout" if code is None else " | ".join(part for part in (why[:300], lines[-1] if lines else "") if part)
    return Outcome(mutant.id, mutant.kind, status, seconds, detail, list(mutant.tests))


def try_all(mutants: list[Mutant], copies: list[Path], timeout_s: float) -> list[Outcome]:
    """Every mutant, as many at once as there are copies (each mutant patches its own copy alone), each outcome
    printed as it comes; the outcomes in the list's order."""
    free: queue.SimpleQueue[Path] = queue.SimpleQueue()
    for copy in copies:
        free.put(copy)

    def one(mutant: Mutant) -> Outcome:
        copy = free.get()
        try:
            outcome = try_mutant(mutant, copy, timeout_s)
        finally:
            free.put(copy)
        print(f"{outcome.status:<9} {outcome.id:<28} {outcome.seconds:>7.1f}s  {outcome.detail}", flush=True)
        return outcome

    with ThreadPoolExecutor(max_workers=len(copies)) as pool:
        return list(pool.map(one, mutants))


def baseline(copy: Path, mutants: list[Mutant], timeout_s: float) -> tuple[bool, str]:
    """Every named test passes on the unmutated copy (else the check would mean nothing)."""
    tests = sorted({t for m in mutants for t in m.tests})
    code, tail = run_tests(copy, tests, timeout_s * 2)
    return code == 0, tail


def report(outcomes: list[Outcome], *, wall_s: float, baseline_ok: bool, jobs: int = 1) -> dict[str, Any]:
    """The check's result: counts per status and kind, and each mutant's outcome."""
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "stale", "broken")}
    return {
        "tried": len(outcomes),
        **counts,
        "by_kind": {k: {s: sum(o.kind == k and o.status == s for o in outcomes) for s in counts} for k in KINDS},
        "baseline_passed": baseline_ok,
        "wall_s": round(wall_s, 1),
        "cpus": os.cpu_count(),
        "jobs": jobs,
        "mutants": [asdict(o) for o in outcomes],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the mutants; exit 1 when one survives, is stale or broken, or the baseline fails."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.mutation", description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", default=[], help="a mutant id (repeatable); default: all")
    parser.add_argument("--kind", choices=KINDS, help="only the mutants of one kind")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds for one mutant's tests")
    parser.add_argument("--no-baseline", action="store_true", help="skip the run on the unmutated copy")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants at once (default: the CPUs)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    mutants = [m for m in load() if (not args.only or m.id in args.only) and (not args.kind or m.kind == args.kind)]
    if args.list:
        for m in mutants:
            print(f"{m.id:<28} {m.kind:<10} {m.file}  [{m.fact}]  -> {' '.join(m.tests)}")
        return 0
    start = time.monotonic()
    jobs = max(1, min(args.jobs, len(mutants)))
    with tempfile.TemporaryDirectory(prefix="trncat-mutation-") as scratch:
        copies = [scratch_copy(Path(scratch) / f"checkout-{k}") for k in range(jobs)]
        baseline_ok, tail = (True, "") if args.no_baseline else baseline(copies[0], mutants, args.timeout)
        if not baseline_ok:
            print(f"baseline: the named tests fail on the unmutated code:\n{tail}", file=sys.stderr)
            outcomes: list[Outcome] = []
        else:
            outcomes = try_all(mutants, copies, args.timeout)
    result = report(outcomes, wall_s=time.monotonic() - start, baseline_ok=baseline_ok, jobs=jobs)
    print(
        f"tried {result['tried']}, killed {result['killed']}, surviving {result['survived']}, stale "
        f"{result['stale']}, broken {result['broken']}; wall {result['wall_s']} s, {result['cpus']} CPUs, "
        f"{result['jobs']} at once"
    )
    if args.report:
        args.report.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    bad = result["survived"] or result["stale"] or result["broken"] or not baseline_ok
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
