"""One serving run: start the engine, time it to ready, sweep the concurrencies with the load generator, time a
warm restart, and write one record (its ``serving`` section).

Faults, each with a verdict and a reason: an engine that never becomes ready is an ``error`` record (infra) with
its log tail; an engine that stops, at start or mid-sweep, is classified by ``trncat bench``'s rules on its exit
status and log (killed from outside, a taken port, a full disk: ``error``; a broken config, an out-of-memory, a
model it refuses: ``fail``); a point whose requests fail is kept with its success rate and ends the sweep; an
engine that dies mid-sweep keeps the points measured, says at which concurrency, and its whole process group is
stopped (no server process is left behind).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.backends import Stopped, stopped_by
from pipeline.bench import INTERRUPTED, classify
from pipeline.records import SCHEMA_VERSION, ResultRecord, RunInfo, Serving, merge_rounds
from pipeline.serve import vllmbench
from pipeline.serve.cost import cost_points, headline, price_record
from pipeline.serve.engine import Engine, EngineSpec, EngineStartError
from pipeline.serve.evals import run_eval
from pipeline.serve.features import exercise
from pipeline.serve.loadgen import TOOL as GUIDELLM
from pipeline.serve.loadgen import LoadRun, points_of, recorded, run_guidellm, scenario, tool_version
from pipeline.serve.options import ServingRun
from pipeline.serve.workload import MIN_SUCCESS_RATE

logger = logging.getLogger(__name__)

#: The last line of a Python traceback: the exception's type.
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): ", re.MULTILINE)


def _engine_failure(engine: Engine, message: str, log: str, *, stage: str) -> tuple[str, dict[str, str]]:
    """The verdict on an engine that stopped (at start, or under load): the rules ``trncat bench`` classifies its
    child with (:func:`pipeline.bench.classify`, on the engine's exit status and log), so that one event is one
    verdict in both: killed from outside an ``error`` (retried), a taken port, a full disk ``error``s, a broken
    config or an out-of-memory the model's ``fail``."""
    returncode = engine.process.returncode if engine.process is not None else None
    raised = _RAISED.findall(log)  # the exception its traceback ended with, as bench's child reports its own
    found = classify(exc_type=raised[-1] if raised else None, exit_code=returncode, message=f"{message}\n{log}",
                     stage_hint=stage)  # fmt: skip
    return found.status, _failure(found.stage, found.code, message)


#: The load generators a run can choose, as ``--load-generator`` names them -> the tool as the record names it, and
#: how its version is read.
LOAD_GENERATORS = {"guidellm": (GUIDELLM, tool_version), "vllm-bench": (vllmbench.TOOL, vllmbench.tool_version)}


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _failure(stage: str, code: str, message: str) -> dict[str, str]:
    return {"stage": stage, "code": code, "message": message[:2000]}


@dataclass
class _Progress:
    """What a run measured so far and where it is: a run stopped from outside records both."""

    points: list[dict[str, Any]] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    stage: str = "load"
    where: str = "while the engine was starting"


def _interrupted(signum: int, progress: _Progress) -> dict[str, str]:
    """The failure of a run stopped by ``signum`` (the ``interrupted`` of ``trncat bench``: an ``error``)."""
    kept = ", ".join(str(p["concurrency"]) for p in progress.points) or "none"
    message = (
        f"trncat serve was stopped by {signal.Signals(signum).name} {progress.where}: the engine's and the load "
        f"generator's process groups were ended; the points kept: concurrency {kept}"
    )
    return _failure(progress.stage, INTERRUPTED, message)


def _sweep(
    engine: Engine, spec: EngineSpec, run: ServingRun, folder: Path, progress: _Progress
) -> tuple[str | None, str | None]:
    """Sweep, keeping each point in ``progress`` as it is measured; returns why the sweep stopped early (None: it
    ran to the end) and a failure code: ``engine_died`` (the engine exited under load: the points measured before
    are kept; its verdict is :func:`_engine_failure`'s), ``loadgen_failed`` (guidellm measured nothing of a group
    while the engine was up: infra). A stop asked for from outside (:func:`pipeline.backends.stopped_by`) ends it
    after the point in flight."""
    options, points, commands = run.options, progress.points, progress.commands
    levels = list(options.workload.concurrencies)
    progress.stage = "run"
    # vllm bench serve: a run per point
    size = 1 if options.load_generator == "vllm-bench" else max(1, options.group or 1)
    tool = LOAD_GENERATORS[options.load_generator][0]
    for start in range(0, len(levels), size):
        group = levels[start : start + size]
        progress.where = f"at concurrency {group[0]}, before it was measured"
        measured, load, command = _measure(spec, run, folder, group)
        commands.append(command)
        rounds = [measured]
        while len(rounds) < options.rounds and len(measured) == len(group) and stopped_by() is None and engine.alive():
            again, load, _ = _measure(spec, run, folder, group)  # the same command again
            if len(again) < len(group):  # a short round is left out; what stopped it is checked below
                break
            rounds.append(again)
        measured = merge_rounds(rounds) if len(rounds) > 1 else measured
        if stopped_by() is not None:  # its report, when one was written, was whole: guidellm writes it at the end
            points.extend(p for p in measured if p["success_rate"] >= MIN_SUCCESS_RATE)
            if points:
                progress.where = f"after concurrency {points[-1]['concurrency']}"
            return None, None
        if not engine.alive():  # first: its requests failing after it died says nothing about the load it took
            points.extend(p for p in measured if p["success_rate"] >= MIN_SUCCESS_RATE)
            code = engine.process.returncode if engine.process is not None else None
            reason = f"the engine exited with {code} under load at concurrency {group[0]}: {engine.log_tail(400)}"
            return reason, "engine_died"
        for point in measured:
            points.append(point)
            progress.where = f"after concurrency {point['concurrency']}"
            if point["success_rate"] < MIN_SUCCESS_RATE:
                reason = f"success rate {point['success_rate']:.3f} at concurrency {point['concurrency']} is below "
                return reason + f"{MIN_SUCCESS_RATE}: the engine cannot take more", None
        if not measured:
            reason = f"{tool} exited with {load.returncode} and measured nothing: {load.output_tail[-600:]}"
            return reason, "loadgen_failed"
        if len(measured) < len(group):
            reason = f"{tool} exited with {load.returncode} at concurrency {group[len(measured)]}: "
            return reason + load.output_tail[-600:], None
    return None, None


def _measure(
    spec: EngineSpec, run: ServingRun, folder: Path, group: list[int]
) -> tuple[list[dict[str, Any]], LoadRun[Any], str]:
    """One run of the load generator over ``group``: the points it measured, the run (its ``returncode`` and
    ``output_tail``) and its command as the record keeps it."""
    workload = run.options.workload
    if run.options.load_generator == "vllm-bench":
        result = folder / f"vllm-bench-{group[0]}.json"
        args = vllmbench.bench_args(spec, workload, group[0], tokenizer=run.tokenizer, result=result)
        bench = vllmbench.run_vllm_bench(args, folder, timeout_s=run.point_timeout_s, name=f"point-{group[0]}",
                                         api_key=spec.api_key)  # fmt: skip
        local = {str(run.tokenizer): run.model_id, spec.model_name: run.model_id, str(folder): "."}
        measured = [vllmbench.point_of(bench.report)] if bench.report else []
        return measured, bench, recorded(vllmbench.TOOL, args, local)
    doc = scenario(spec, workload, group, tokenizer=run.tokenizer, report=folder / f"report-{group[0]}.json")
    load = run_guidellm(doc, folder, timeout_s=run.point_timeout_s * len(group), name=f"points-{group[0]}")
    # the command by name, its scenario by file name: no path of this machine in the record
    local = {a: Path(a).name for a in load.argv if a.startswith(str(folder))}
    return (points_of(load.report) if load.report else []), load, recorded(GUIDELLM, load.argv[1:], local)


def serve_model(
    spec: EngineSpec,
    run: ServingRun,
    folder: Path,
    *,
    restart: Callable[[], EngineSpec] | None = None,
    refusal: tuple[str, dict[str, str]] | None = None,
    running: Engine | None = None,
) -> dict[str, Any]:
    """Run the whole serving measurement and return its record (never raises for an engine's or the load
    generator's fault: those are the record's verdict). ``restart`` gives the spec of the warm restart (the
    same command; a fresh port when the first one is still held). ``refusal`` (a status and its failure: the
    model was refused or not fetched) is recorded as it is, and no engine starts. ``running``: sweep an engine the
    caller started and made ready (several load generators against one server), and leave it running."""
    started, wall0 = _now(), time.monotonic()
    options, workload, pricing, chips = run.options, run.options.workload, run.options.pricing, run.options.chips
    tool, version_of = LOAD_GENERATORS[options.load_generator]
    version = version_of()
    instance = run.hardware.get("instance_type")
    price = pricing.price(instance) if pricing else None
    share = (chips / options.instance_chips) if options.instance_chips else (1.0 if options.device == "cpu" else None)
    status, failure = "pass", None
    progress = _Progress()
    points, commands = progress.points, progress.commands
    stopped: str | None = None
    ready_s: float | None = None
    warm_ready_s: float | None = None
    log_tail: str | None = None
    evaluation: dict[str, Any] | None = None
    probed = exercise(spec, options.features, served=False, timeout_s=0) or None  # not probed, until the probe runs
    engine = running or Engine(spec, folder / "engine.log")  # running: the caller's, ready, started and stopped by it
    if refusal is not None:
        status, failure = refusal[0], dict(refusal[1])
    else:
        try:
            with contextlib.nullcontext(engine) if running else engine:
                ready_s = running.ready_s if running else engine.wait_ready(timeout_s=options.ready_timeout_s)
                stopped, died = _sweep(engine, spec, run, folder, progress)
                if died == "engine_died":
                    status, failure = _engine_failure(engine, stopped or "", engine.log_tail(), stage="run")
                elif died:  # the load generator, not the model: an infra error
                    status, failure = "error", _failure("run", died, stopped or f"{tool} failed")
                    log_tail = engine.log_tail()
                if options.eval_task is not None and not died and engine.alive() and stopped_by() is None:
                    progress.where = "after the sweep, while the task score was taken"
                    evaluation = run_eval(
                        spec,
                        options.eval_task,
                        folder / "eval",
                        tokenizer=run.tokenizer,
                        timeout_s=run.eval_timeout_s,
                        model_id=run.model_id,
                    )
                if options.features and not died and engine.alive() and stopped_by() is None:
                    progress.where = "after the sweep, while its features were probed"
                    probed = exercise(spec, options.features, served=True, timeout_s=run.point_timeout_s)
        except Stopped:
            pass  # a stop asked for before a tool started: the verdict below
        except EngineStartError as exc:
            log_tail = exc.log_tail or engine.log_tail()
            if exc.code == "not_ready":  # alive but never ready in the time given
                status, failure = "error", _failure("timeout", "engine_not_ready", str(exc))
            elif exc.code == "dead_after_health":  # it runs, but not this model: the model's verdict on this engine
                status, failure = "fail", _failure("load", "engine_dead_after_health", str(exc))
            else:
                status, failure = _engine_failure(engine, str(exc), log_tail, stage="load")
        if (signum := stopped_by()) is not None:
            status, failure = "error", _interrupted(signum, progress)
            evaluation = evaluation if evaluation and evaluation["score"] is not None else None
            log_tail = log_tail or engine.log_tail()
        if status == "pass" and not any(p["success_rate"] >= MIN_SUCCESS_RATE for p in points):
            status = "fail"
            failure = _failure("run", "requests_failed", stopped or f"{tool} measured no point")
        if status == "pass" and evaluation is not None and evaluation["passed"] is False:
            status = "fail"
            failure = _failure(
                "accuracy",
                "eval_below_floor",
                f"{evaluation['task']} {evaluation['metric']} {evaluation['score']:.4f} is below the floor "
                f"{evaluation['floor']} ({evaluation['floor_source']})",
            )
    if status == "pass" and options.warm_restart and running is None:
        warm_spec = restart() if restart else spec
        progress.stage, progress.where = "load", "after the sweep, while the warm restart started"
        try:
            with Engine(warm_spec, folder / "engine-warm.log") as warm:
                warm_ready_s = warm.wait_ready(timeout_s=options.ready_timeout_s)
        except Stopped:
            pass
        except EngineStartError as exc:
            if stopped_by() is None:
                stopped = (stopped + "; " if stopped else "") + f"the warm restart failed: {exc}"
        if (signum := stopped_by()) is not None:
            status, failure, warm_ready_s = "error", _interrupted(signum, progress), None
    cost_points(points, options.chips, usd_per_hour=price.usd if price else None, share=share)
    serving = Serving(
        tool={"name": tool, "version": version or "unknown", "commands": commands},
        engine={
            "name": spec.engine,
            "command": spec.shell(),
            "options": spec.options,
            "ready_s": ready_s,
            "warm_ready_s": warm_ready_s,
            "log_tail": log_tail,
        },
        workload=workload.to_record() | (vllmbench.WORKLOAD if tool == vllmbench.TOOL else {}),
        chips=options.chips,
        weight_dtype=options.weight_dtype,
        kv_dtype=options.weight_dtype,  # the engine's KV cache is in the weights' dtype (no run sets another)
        versions={"guidellm" if tool == GUIDELLM else "vllm_bench": version, **run.engine_versions},
        points=points,
        stopped=stopped,
        slo=options.slo.to_record(),
        headline=headline(points, options.slo),
        price=price_record(price, instance=instance, option=pricing.option if pricing else "", share=share),
        eval=evaluation,
        active_params=run.active_params,
        features=probed,
    )
    return _record(run, status, failure, serving, started, time.monotonic() - wall0)


def _record(
    run: ServingRun,
    status: str,
    failure: dict[str, str] | None,
    serving: Serving,
    started: str,
    wall: float,
) -> dict[str, Any]:
    options, workload = run.options, run.options.workload
    first = next((p for p in serving.points if p["success_rate"] >= MIN_SUCCESS_RATE), None)
    tool = serving.tool["name"]
    ready_s = serving.engine["ready_s"]
    notes = [f"serving: {serving.engine['name']} driven by {tool}, {workload.name} workload"]
    if workload.images_per_request:
        notes.append(
            f"{workload.images_per_request} synthetic {workload.image_width} x {workload.image_height} image(s) per "
            f"request, sent by {tool} as image_url content parts of /v1/chat/completions"
        )
    if serving.stopped:
        notes.append(f"the sweep stopped early: {serving.stopped[:400]}")
    evaluation = serving.eval
    if evaluation is not None and evaluation["score"] is None:  # a check that did not run is said, never hidden
        notes.append(f"no task score: lm-eval gave none ({(evaluation['output_tail'] or '')[-300:]})")
    return ResultRecord(
        schema_version=SCHEMA_VERSION,
        model_id=run.model_id,
        revision=run.revision,
        task=workload.task,
        status=status,
        failure=failure,
        device=options.device,
        hardware=run.hardware,
        cores=options.chips,
        dtype=options.weight_dtype,
        workload={
            "batch_size": 1,
            "input_tokens": workload.input_tokens,
            "output_tokens": workload.output_tokens,
            "image_size": None,
        },
        metrics={
            "params": run.params,
            "weights_bytes": None,
            "load_s": min(ready_s, wall) if ready_s is not None else None,
            "compile_s": None,
            # the first point's (one user at a time: the figures a batch-1 row has)
            "ttft_s": first["ttft_s"]["p50"] if first else None,
            "latency_s": {"p50": first["e2e_s"]["p50"], "p90": first["e2e_s"]["p90"]} if first else None,
            "decode_tokens_per_s": first["tok_s_per_user"] if first else None,
            "wall_s": wall,
            "peak_device_memory_bytes": None,
            "peak_host_memory_bytes": None,
            "roofline_fraction": None,
        },
        versions=run.versions,
        run=RunInfo(started, _now(), *(run.ci_run or (None, None, None)), source=options.source),
        notes=notes,
        serving=serving,
    ).to_dict()
