"""Code the tests and the benchmarks share, kept out of the product package.

- :mod:`~tests.support.records`: sample records of each kind;
- :mod:`~tests.support.catalog_rows`: a large catalog drawn in Arrow columns (the page's scale test and benchmark);
- :mod:`~tests.support.browser`: Debian's Chromium for the page's browser tests;
- :mod:`~tests.support.mutation`: the mutation check of the Neuron path (``python -m tests.support.mutation``,
  its bugs in ``neuron_mutants.yaml``).
"""
