"""The tests, one folder per package of pipeline/ (tests/<package>/test_*.py), the repo-wide ones at the top."""

from __future__ import annotations

from pathlib import Path

#: The repository's root, its shared test fixtures and the golden files of the generated scripts and card.
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = ROOT / "tests" / "golden"
