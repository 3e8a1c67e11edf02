"""The backends: one module per backend, one line in the registry (:data:`~pipeline.backends.base.REGISTRY`).

A backend knows its device: the device string, how to synchronize, whether and how to compile, its peak
memory, its memory per core, its versions and the environment for N cores. Everything else in the harness
is shared (``tests/backends/test_backends.py`` checks that swapping the backend is the only difference).
:mod:`~pipeline.backends.groups` owns the process group a device's run leads (the benchmark child's, a serving
engine's, its load generator's): the one stop, signal handler and ``trncat reap`` register both use.
:mod:`~pipeline.backends.machine` says which machine a run is on (the instance id, else the host name): what a
second-machine warm check compares.

May import: the top-level modules only (torch and each device's packages are imported lazily, in the child).
Imported by: :mod:`pipeline.bench` (the device; the child's stop), :mod:`pipeline.serve` (the engine's stop),
:mod:`pipeline.records` (a row's toolchain label, a GPU's bandwidth), :mod:`pipeline.render` (install lines,
requirements), :mod:`pipeline.page` (the install line shown) and the CLI.
"""

from __future__ import annotations

from pipeline.backends.base import (
    FRESH_VENV,
    Backend,
    CompiledRun,
    backend_class,
    get_backend,
    package_version,
    world_of,
)
from pipeline.backends.cuda import gpu_bandwidth
from pipeline.backends.groups import Stopped, group_members, owned_group, reap_orphans, stopped_by, stopping_on_signals
from pipeline.backends.machine import machine_identity, this_machine
