"""Code the tests and the benchmarks share, kept out of the product package.

- :mod:`~tests.support.records`: sample records of each kind;
- :mod:`~tests.support.families`: the family index read back, and the rows it should hold, in Python;
- :mod:`~tests.support.catalog_rows`: a large catalog drawn in Arrow columns (the page's scale test and benchmark);
- :mod:`~tests.support.browser`: Debian's Chromium for the page's browser tests;
- :mod:`~tests.support.faulty_hub`: the local hub's server with fault injection and request hooks (the
  ``localhub`` fixture's);
- :mod:`~tests.support.neuron`: the Neuron emulator (a trn2 machine on disk and an emulated ``torch_neuronx``);
  nothing under ``pipeline/`` imports it (``tests/test_architecture.py``);
- :mod:`~tests.support.mutation`: the mutation check of the Neuron path (``python -m tests.support.mutation``,
  its bugs in ``neuron_mutants.yaml``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: Path) -> str:
    """The sha256 (hex) of a file (a bundle's, as its record names it)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
