"""The load generator: guidellm (``guidellm run``), driven through a scenario file, its figures read from its own
JSON report, read through guidellm's own report model (``GenerativeBenchmarksReport``). Nothing here times a
request: every figure of a point is guidellm's.

One guidellm run sweeps several concurrencies (guidellm's sub-benchmarks), each with its own request budget and
warm-ups (twice the concurrency, see :func:`scenario`). The sweep (:mod:`pipeline.serve.sweep`) runs one group of
points at a time and stops early.

:func:`run_client` runs each client of the engine (guidellm, ``vllm bench serve``, lm-eval) in a process group of its
own.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pipeline.backends import owned_group, package_version
from pipeline.records import point_spread
from pipeline.serve.engine import OFFLINE_ENV, EngineSpec, console_script
from pipeline.serve.workload import IMAGE_CONTENT, IMAGE_FORMAT, ServingWorkload

if TYPE_CHECKING:
    from guidellm.benchmark import GenerativeBenchmark, GenerativeBenchmarksReport
    from guidellm.schemas import StatusDistributionSummary

TOOL = "guidellm"
PERCENTILES = ("p50", "p90", "p99")
#: The load generators' environment (:func:`run_client` adds it to this process's): offline, one tokenizer thread.
CLIENT_ENV = {**OFFLINE_ENV, "TOKENIZERS_PARALLELISM": "false"}
Report = TypeVar("Report")


def tool_version() -> str | None:
    return package_version(TOOL)


def guidellm_command() -> list[str]:
    return [console_script(TOOL)]


def _request_shape(spec: EngineSpec, workload: ServingWorkload) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The backend arguments and the datasets for ``spec``'s engine, both holding ignore-EOS.

    vLLM takes guidellm's own ignore-EOS (with ``output_tokens`` guidellm sends ``ignore_eos``, vLLM's sampling
    parameter). ``transformers serve`` refuses a field it does not know (``ignore_eos``: HTTP 422), so there the
    output length is fixed with transformers' own generation config (``min_new_tokens`` = ``max_new_tokens``:
    EOS cannot end a request early), and guidellm sends ``max_tokens``.

    An image workload adds guidellm's own ``synthetic_image`` dataset beside the random prompts: guidellm zips the
    two row by row (one request: a prompt and its images) and sends them to ``/v1/chat/completions`` as a ``text``
    and an ``image_url`` content part (a ``data:image/jpeg;base64`` URL) of one user message.
    """
    out = workload.output_tokens
    backend: dict[str, Any] = {
        "kind": "openai_http",
        "target": spec.base_url,
        "model": spec.model_name,
        "request_format": "/v1/completions",
        "timeout": 600,
    }
    if spec.api_key:  # guidellm 0.8.1 takes the key as a backend argument only (its scenario, never its argv)
        backend["api_key"] = spec.api_key
    data: dict[str, Any] = {
        "kind": "synthetic_text",
        "prompt_tokens": workload.input_tokens,
        "prompt_tokens_min": workload.input_min,
        "prompt_tokens_max": workload.input_tokens,
    }
    if spec.engine == "transformers-serve":
        config = {"max_new_tokens": out, "min_new_tokens": out, "do_sample": False}
        backend["max_tokens"] = out
        backend["extras"] = {"body": {"generation_config": json.dumps(config, sort_keys=True)}}
    else:
        data["output_tokens"] = out
    if not workload.images_per_request:
        return backend, [data]
    backend["request_format"] = "/v1/chat/completions"
    images = {
        "kind": "synthetic_image",
        "width": workload.image_width,
        "height": workload.image_height,
        "images_per_request": workload.images_per_request,
        "format": IMAGE_FORMAT,
        "content": IMAGE_CONTENT,
        "seed": workload.seed,
    }
    return backend, [data, images]


def scenario(
    spec: EngineSpec, workload: ServingWorkload, concurrencies: list[int], *, tokenizer: Path, report: Path
) -> dict[str, Any]:
    """guidellm's scenario for ``concurrencies``: one sub-benchmark per concurrency, its budget
    ``(warm-ups + measured) x concurrency`` requests, the first ``warm-ups x concurrency`` of them guidellm's
    warm-up (left out of its figures)."""
    backend, data = _request_shape(spec, workload)
    per_stream = workload.warmup_per_stream + workload.measured_per_stream
    # guidellm's sub-benchmarks must share one warm-up: a share of each point's budget, set a hair above
    # warmup / (warmup + measured) so that its int(share x budget) is exactly the point's warm-ups at every point
    warmup: dict[str, Any] | float = 0.0
    if workload.warmup_per_stream:
        share = (workload.warmup_per_stream + 0.1 / max(concurrencies)) / per_stream
        warmup = {"mode": "requests", "percent": share}

    def point(concurrency: int) -> dict[str, Any]:
        return {"profile.streams": concurrency, "constraints[0].count": per_stream * concurrency}

    return {
        "spec": {
            "backend": backend,
            "profile": {"kind": "concurrent", "streams": [concurrencies[0]], "warmup": warmup},
            "tokenizer": {"kind": "huggingface_auto", "model": str(tokenizer)},
            "data": data,
            "constraints": [{"kind": "max_requests", "count": per_stream * concurrencies[0]}],
            "seed": {"kind": "static", "value": workload.seed},
            "outputs": [{"kind": "json", "path": str(report)}],
        },
        # guidellm's sub-benchmarks: one per concurrency, each with its own budget and warm-ups
        "benchmarks": [point(c) for c in concurrencies],
    }


def run_client(
    argv: Sequence[str], log: Path, *, env: dict[str, str], timeout_s: float, tail_chars: int, **group: Any
) -> tuple[int | None, str]:
    """Run one of the engine's clients (a load generator, lm-eval) to its end in a process group of its own
    (:func:`pipeline.backends.owned_group`: registered for ``trncat reap``, ended by serve's signal handler and
    whenever this returns: its workers too), its output in ``log``, ``env`` added to this process's environment;
    ``group``: ``owned_group``'s ``cwd`` and ``grace_s`` (default 5 s). Returns its exit status (None: it ran past
    ``timeout_s``) and the last ``tail_chars`` bytes of its log."""
    with owned_group(argv, log=log, env={**os.environ, **env}, **{"grace_s": 5.0, **group}) as process:
        try:
            code: int | None = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
    return code, log.read_bytes()[-tail_chars:].decode("utf-8", errors="replace")


def recorded(program: str, args: Sequence[str], local: Mapping[str, str]) -> str:
    """A client's command as the record keeps it: ``program`` by name, then ``args`` with this machine's paths
    replaced (``local``: path -> what names it anywhere, e.g. the model's folder -> its Hub id), where a path stands
    alone or as a ``key=path,`` argument (lm-eval's model arguments)."""
    words = []
    for word in args:
        word = local.get(word, word)
        for path, name in local.items():
            word = word.replace(f"={path},", f"={name},")
        words.append(word)
    return shlex.join([*program.split(), *words])


@dataclass(frozen=True)
class LoadRun(Generic[Report]):
    """What one run of a load generator left: its report as read (guidellm's through its report model, ``vllm bench
    serve``'s result JSON; None: none was written, or one its reader refuses), exit status and output tail."""

    report: Report | None
    returncode: int
    output_tail: str
    argv: tuple[str, ...]


def run_guidellm(
    scenario_doc: dict[str, Any], folder: Path, *, timeout_s: float, name: str
) -> LoadRun[GenerativeBenchmarksReport]:
    """Run guidellm on one scenario (written to ``folder``) in a process group of its own, and read its JSON report.

    Raises:
        Stopped: a stop was asked for before guidellm started (:func:`pipeline.backends.stopping_on_signals`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    scenario_path = folder / f"{name}.scenario.json"
    key = scenario_doc["spec"]["backend"].get("api_key")
    _write_private(scenario_path, scenario_doc)  # the engine's key: the owner's alone while guidellm runs
    report_path = Path(scenario_doc["spec"]["outputs"][0]["path"])
    report_path.unlink(missing_ok=True)
    argv = (*guidellm_command(), "run", "--scenario", str(scenario_path), "--disable-console-interactive")
    log = folder / f"{name}.guidellm.log"
    code, tail = run_client(argv, log, env=CLIENT_ENV, timeout_s=timeout_s, tail_chars=4000)
    if key:  # the scenario kept is the run's without the key
        backend = {**scenario_doc["spec"]["backend"], "api_key": "(the engine's per-start key, not kept)"}
        _write_private(scenario_path, {**scenario_doc, "spec": {**scenario_doc["spec"], "backend": backend}})
    return LoadRun(read_report(report_path), 124 if code is None else code, tail, argv)


def _write_private(path: Path, doc: dict[str, Any]) -> None:
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as file:
        file.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def read_report(path: Path) -> GenerativeBenchmarksReport | None:
    """guidellm's JSON report through its own model; None when there is none or the model refuses it."""
    if not path.is_file():
        return None
    from guidellm.benchmark import GenerativeBenchmarksReport

    try:
        return GenerativeBenchmarksReport.load_file(path)
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


def _percentiles(summary: StatusDistributionSummary, scale: float) -> dict[str, float | None]:
    """The successful requests' p50, p90 and p99, scaled; None each when no request succeeded."""
    stat = summary.successful
    if not stat.count:
        return dict.fromkeys(PERCENTILES)
    return {p: float(getattr(stat.percentiles, p)) * scale for p in PERCENTILES}


def point_of(benchmark: GenerativeBenchmark) -> dict[str, Any]:
    """One sweep point from one benchmark of guidellm's report, every figure as guidellm computed it.

    ``tok_s_per_user`` is the median user's decode speed (1000 / median TPOT ms), as InferenceX plots its
    interactivity; the service level reads its own percentile (:func:`pipeline.serve.cost.meets`).
    """
    from guidellm.scheduler import ConcurrentStrategy

    metrics = benchmark.metrics
    totals = metrics.request_totals
    requests = totals.successful + totals.errored + totals.incomplete
    strategy = benchmark.config.strategy
    tpot = _percentiles(metrics.time_per_output_token_ms, 1.0)
    return {
        "concurrency": strategy.streams if isinstance(strategy, ConcurrentStrategy) else strategy.max_concurrency or 0,
        "requests": requests,
        "success_rate": (totals.successful / requests) if requests else 0.0,
        "output_tok_s": metrics.output_tokens_per_second.total.mean if totals.successful else None,
        "input_tok_s": getattr(metrics.prompt_tokens_per_second.total, "mean", None) if totals.successful else None,
        "tok_s_per_user": (1000.0 / tpot["p50"]) if tpot["p50"] else None,
        "ttft_s": _percentiles(metrics.time_to_first_token_ms, 1e-3),
        "tpot_ms": tpot,
        "itl_ms": _percentiles(metrics.inter_token_latency_ms, 1.0),
        "e2e_s": _percentiles(metrics.request_latency, 1.0),
        "duration_s": benchmark.duration,
    } | _spread(benchmark)


def _spread(benchmark: GenerativeBenchmark) -> dict[str, Any]:
    """The point's ``spread`` (:func:`pipeline.records.point_spread`) from the successful requests in guidellm's
    measured window (its warm-ups are in the report's list too; the window is the rule guidellm's own figures are
    computed by: ended after the window opened, started before it closed), one value each."""
    start, end = benchmark.start_time, benchmark.end_time
    kept = [
        r
        for r in benchmark.requests.successful or []
        if start <= r.request_end_time and (r.request_start_time or 0) <= end
    ]
    figures = (("ttft_s", "time_to_first_token_ms", 1e-3), ("tpot_ms", "time_per_output_token_ms", 1.0),
               ("e2e_s", "request_latency", 1.0))  # fmt: skip
    samples = {
        name: [v * scale for r in kept if (v := getattr(r, field)) is not None] for name, field, scale in figures
    }
    point = {"output_tok_s": benchmark.metrics.output_tokens_per_second.total.mean if kept else None}
    spread = point_spread(point, samples)
    return {"spread": spread} if spread else {}


def points_of(report: GenerativeBenchmarksReport) -> list[dict[str, Any]]:
    """Every point of a guidellm report, in its order."""
    return [point_of(b) for b in report.benchmarks]
