"""The planner: from config files alone, a model's parameters, bytes, NeuronCores and the parallelism to run it.

- :mod:`~pipeline.plan.model`: the entry (:func:`plan_config` pure, :func:`plan_model` from a folder or the Hub)
  for a transformers model; a diffusers pipeline goes to :mod:`~pipeline.plan.diffusion`;
- :mod:`~pipeline.plan.result`: the :class:`Plan` both answer, and the dtype names;
- counting: :mod:`~pipeline.plan.params` (parameters on the meta device), :mod:`~pipeline.plan.model_types`
  (the model types transformers knows, read without importing it or torch), :mod:`~pipeline.plan.shapes`
  (attention and image shapes), :mod:`~pipeline.plan.quantization` (quantized checkpoints); the counts from a
  checkpoint's headers are :mod:`pipeline.models`';
- sizing: :mod:`~pipeline.plan.memory` (bytes per core of a layout) and :mod:`~pipeline.plan.advice` (the one line
  of advice);
- diffusers pipelines: :mod:`~pipeline.plan.diffusion`, :mod:`~pipeline.plan.components` (each component from its
  config) and :mod:`~pipeline.plan.diffusion_shapes` (resolution and activations, and the workload a run gets);
- :mod:`~pipeline.plan.limits`: the bounds a config must keep to be built, and the time and memory one build may
  take (a child process).

The method, its constants and worked examples are in ``docs/planner.md``.

May import: the top-level modules, :mod:`pipeline.models` (the gate on a pipeline's index) and
:mod:`pipeline.hub` (for typing; the caller passes the ``Hub``). Imported by: :mod:`pipeline.queue`,
:mod:`pipeline.bench` and the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.plan.components import index_entries, weight_files
    from pipeline.plan.diffusion import plan_pipeline
    from pipeline.plan.diffusion_shapes import FEW_STEPS, resolve_workload
    from pipeline.plan.limits import MAX_EXPERTS, MAX_HEADS, MAX_LAYERS, config_problem
    from pipeline.plan.model import format_plan, plan_config, plan_model, runner_label
    from pipeline.plan.params import config_hash, describe
    from pipeline.plan.result import Plan, normalize_dtype


lazy_face(__name__)
