"""The queue: candidates minus what is measured or excluded -> GitHub Actions matrices, and what a sweep costs.

- :mod:`~pipeline.queue.matrix`: the measured keys, the matrix entries (largest and longest first), the chunks;
- :mod:`~pipeline.queue.toolchain`: the pinned toolchain (``runners/toolchain.yaml``) a measurement is keyed by;
- :mod:`~pipeline.queue.planners`: each candidate planned from its files on the Hub at its revision;
- :mod:`~pipeline.queue.serving`: serving jobs (``trncat serve``) for passing text-generation rows (and
  image-text-to-text rows of the architectures vLLM Neuron serves with images), and their GPU twins;
- :mod:`~pipeline.queue.gpu`: the GPU runner class, a job sized in GPUs of a GPU instance (the Compare view's
  cuda rows);
- :mod:`~pipeline.queue.warm`: the second-machine warm checks to run next (published bundles not yet verified);
- :mod:`~pipeline.queue.stage_matrix`: the stage matrix's rows (issue 49): each discovered model's plan, stage
  and feature states per device class, beside vLLM Neuron's documented support;
- the cost model: :mod:`~pipeline.queue.durations` (each job's seconds and compile host memory from the
  dataset's history), :mod:`~pipeline.queue.fleet` (prices, runner partitions, the estimate and the recommended
  fleet) and :mod:`~pipeline.queue.sweep` (a discrete-event simulation of a sweep on a fleet).

May import: the top-level modules, :mod:`pipeline.hub`, :mod:`pipeline.records`, :mod:`pipeline.dataset` (what
was measured), :mod:`pipeline.discover` (the candidates) and :mod:`pipeline.plan`. Imported by: the CLI and
:mod:`pipeline.release` (the pins a release diff picks rows by).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.queue.durations import HOST_MEMORY_PERCENTILE, PRIOR, DurationModel, param_bucket
    from pipeline.queue.fleet import (
        estimate_sweep,
        format_estimate,
        format_partition,
        layout_fleet,
        recommend_fleet,
    )
    from pipeline.queue.matrix import (
        MAX_CHUNK,
        Queue,
        build_queue,
        fetch_results,
        load_candidates,
        matrix_order,
    )
    from pipeline.queue.planners import HubPlanner
    from pipeline.queue.serving import serving_jobs, serving_seconds
    from pipeline.queue.stage_matrix import load_support, matrix_inputs, matrix_rows, refresh_matrix
    from pipeline.queue.sweep import Job, SweepResult, simulate
    from pipeline.queue.toolchain import as_pinned, load_apt_pins, load_toolchain, version_column
    from pipeline.queue.warm import MAX_WARM_ENTRIES, warm_queue


lazy_face(__name__)
