"""The benchmark: one model run unmodified through its own library on a device, measured, checked, one record.

- :mod:`~pipeline.bench.run`: the entry, :func:`bench_model` (resolve the model, size the run, escalate cores on
  an OOM, write the record);
- :mod:`~pipeline.bench.harness` (the parent: child process, timeout, memory watchdog, the record) and
  :mod:`~pipeline.bench.child` (the child: load, first call, timed calls), with :mod:`~pipeline.bench.process`,
  :mod:`~pipeline.bench.spec`, :mod:`~pipeline.bench.verify` and :mod:`~pipeline.bench.agreement` (the answer
  checked against a CPU float32 reference), :mod:`~pipeline.bench.escalation`;
- :mod:`~pipeline.bench.failures` (ordered rules that classify an error) and :mod:`~pipeline.bench.messages`;
- :mod:`~pipeline.bench.tasks`: one ``TaskRunner`` per task (the task registry);
- :mod:`~pipeline.bench.doctor`: ``trncat doctor``, is this machine ready; :mod:`~pipeline.bench.smoke`: its
  smoke runs of a tiny model.

May import: the top-level modules, :mod:`pipeline.backends` (the device), :mod:`pipeline.models` (fetch and
gates), :mod:`pipeline.plan` (sizing and the workload a run gets), :mod:`pipeline.records`, :mod:`pipeline.hub`
(typing; the caller passes the ``Hub``) and :mod:`pipeline.testing` (the smoke's tiny model). Imported by: the
CLI (``trncat bench``, ``trncat doctor``, the demo) and :mod:`pipeline.serve` (the one classification of a
failure: an engine's, as a benchmark child's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.bench.doctor import run_checks
    from pipeline.bench.failures import INTERRUPTED, classify
    from pipeline.bench.run import bench_model
    from pipeline.bench.smoke import smoke, smoke_line
    from pipeline.bench.spec import BenchOptions


lazy_face(__name__)
