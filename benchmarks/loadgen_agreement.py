"""Two real load generators, one answer: guidellm and ``vllm bench serve`` against one vLLM server.

One vLLM server on this machine's CPU (``pipeline.serve``'s own :func:`engine_for` / :class:`Engine`, the tiny
Llama built locally at vLLM's size, ``pipeline.testing``) answers both tools, in interleaved rounds (guidellm,
vllm-bench, guidellm, vllm-bench, ...). Each tool runs through trncat's own functions, exactly as ``trncat serve
--load-generator`` runs it: guidellm through :func:`scenario` / :func:`run_guidellm` / :func:`points_of` (one
guidellm run sweeps every concurrency), ``vllm bench serve`` through :func:`vllmbench.bench_args` /
:func:`vllmbench.run_vllm_bench` / :func:`vllmbench.point_of` (one run per concurrency, InferenceX's flags). The
workload is the CPU sweep's (``cpu-tiny``), unless ``--same-requests`` evens out what the two tools are given.

Per concurrency and figure (output tok/s, TTFT p50, TPOT p50, ITL p50, e2e p50) it prints each tool's median over
its rounds and its spread (min-max: two runs of one tool differ by that much), and the paired difference
(vllm-bench minus guidellm, round by round, the median over the rounds, in % of guidellm's too).

    python benchmarks/loadgen_agreement.py [--rounds 3] [--concurrency 1,2,4] [--same-requests]

Nothing is downloaded. Needs the vLLM environment (``make vllm-env``, or TRNCAT_VLLM_PYTHON). The two tools'
workloads are not identical by default (the script says how, before the table): see docs/methodology.md,
"Two load generators, one answer". Exit status 0 when every round of both tools measured every point, else 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.cli.serving import concurrencies  # noqa: E402  (the one parser of a sweep, trncat serve's)
from pipeline.serve import (  # noqa: E402
    Engine,
    engine_for,
    free_port,
    points_of,
    run_guidellm,
    scenario,
    serving_workload,
    vllmbench,
)
from pipeline.serve.loadgen import tool_version  # noqa: E402
from pipeline.serve.vllmenv import vllm_environment  # noqa: E402
from pipeline.serve.workload import ServingWorkload  # noqa: E402
from pipeline.testing import VLLM_HIDDEN_SIZE, build_tiny_llama  # noqa: E402

TOOLS = ("guidellm", "vllm-bench")
#: figure -> (its heading, how to read it from a point, its unit).
FIGURES = {
    "tok_s": ("output tok/s", lambda p: p["output_tok_s"], "tok/s"),
    "ttft": ("TTFT p50", lambda p: p["ttft_s"]["p50"] * 1000, "ms"),
    "tpot": ("TPOT p50", lambda p: p["tpot_ms"]["p50"], "ms"),
    "itl": ("ITL p50", lambda p: p["itl_ms"]["p50"], "ms"),
    "e2e": ("e2e p50", lambda p: p["e2e_s"]["p50"] * 1000, "ms"),
}
T0 = time.monotonic()


def say(line: str) -> None:
    print(f"[{time.monotonic() - T0:6.0f} s] {line}", flush=True)


def guidellm_points(spec: Any, workload: ServingWorkload, model: Path, folder: Path) -> list[dict[str, Any]]:
    """One guidellm run over every concurrency, as ``trncat serve`` runs it (its scenario, its reader)."""
    levels = list(workload.concurrencies)
    doc = scenario(spec, workload, levels, tokenizer=model, report=folder / "report.json")
    load = run_guidellm(doc, folder, timeout_s=1800, name="guidellm")
    if load.report is None:
        say(f"  guidellm exited with {load.returncode} and wrote no report: {load.output_tail[-400:]}")
        return []
    return points_of(load.report)


def vllm_bench_points(spec: Any, workload: ServingWorkload, model: Path, folder: Path) -> list[dict[str, Any]]:
    """One ``vllm bench serve`` run per concurrency, as ``trncat serve --load-generator vllm-bench`` runs them."""
    points = []
    for level in workload.concurrencies:
        result = folder / f"vllm-bench-{level}.json"
        args = vllmbench.bench_args(spec, workload, level, tokenizer=model, result=result)
        bench = vllmbench.run_vllm_bench(args, folder, timeout_s=1800, name=f"point-{level}", api_key=spec.api_key)
        if bench.report is None:
            say(f"  vllm bench serve exited with {bench.returncode} at concurrency {level}: {bench.output_tail[-400:]}")
            return points
        points.append(vllmbench.point_of(bench.report))
    return points


def workload_note(workload: ServingWorkload) -> list[str]:
    """What each tool is given, from the functions' own arguments: the prompt lengths and the requests per point."""
    lo, hi, r = workload.input_min, workload.input_tokens, workload.range_ratio
    vlo, vhi = math.floor(hi * (1 - r)), math.ceil(hi * (1 + r))  # vLLM's bounds (docs/neuron-facts.md)
    per_stream = workload.measured_per_stream
    same = (lo, hi) == (vlo, vhi) and per_stream == vllmbench.PROMPTS_PER_STREAM
    return [
        f"workload {workload.name}: output {workload.output_tokens} tokens fixed (ignore-EOS) for both, warm-ups "
        f"{workload.warmup_per_stream} x concurrency for both",
        f"  guidellm   input uniform in [{lo}, {hi}] tokens (trncat's range ratio {r}: [(1-r)L, L]), "
        f"{per_stream} measured requests per stream",
        f"  vllm-bench input uniform in [{vlo}, {vhi}] tokens (vLLM's range ratio: [(1-r)L, (1+r)L]), "
        f"{vllmbench.PROMPTS_PER_STREAM} measured requests per stream (InferenceX's --num-prompts 10 x CONC)",
        f"  identical requests: {'yes' if same else 'NO (the figures compare the tools on different loads)'}",
    ]


def table(levels: list[int], runs: dict[str, list[dict[int, dict[str, Any]]]]) -> list[str]:
    head = (f"{'conc':>4}  {'figure':<12} {'guidellm':>9} {'(min-max)':>17}  {'vllm-bench':>10} {'(min-max)':>17}"
            f"  {'paired diff':>11} {'%':>7}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for level in levels:
        for key, (name, read, unit) in FIGURES.items():
            values = {t: [read(r[level]) for r in runs[t]] for t in TOOLS}
            pairs = [(b - a, 100.0 * (b - a) / a if a else float("nan")) for a, b in zip(*values.values(), strict=True)]
            cells = []
            for tool in TOOLS:
                v = values[tool]
                cells.append(f"{statistics.median(v):>9.2f} {f'({min(v):.2f}-{max(v):.2f})':>17}")
            diff = statistics.median(d for d, _ in pairs)
            pct = statistics.median(p for _, p in pairs)
            label = name if key == "tok_s" else f"{name} {unit}"
            lines.append(f"{level:>4}  {label:<12} {cells[0]}  {cells[1].rjust(28)}  {diff:>+11.2f} {pct:>+6.1f}%")
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each tool, interleaved (default 3)")
    parser.add_argument("--concurrency", type=concurrencies, default=(1, 2, 4))
    parser.add_argument(
        "--same-requests",
        action="store_true",
        help="give both tools the same requests: a fixed input length (range ratio 0) and InferenceX's "
        f"{vllmbench.PROMPTS_PER_STREAM} measured requests per stream for guidellm too",
    )
    parser.add_argument("--json", type=Path, help="also write every round's points here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    found = vllm_environment()
    if found is None:
        print("no vLLM environment: `make vllm-env` (or TRNCAT_VLLM_PYTHON) makes one", file=sys.stderr)
        return 2
    workload = dataclasses.replace(serving_workload("cpu-tiny"), concurrencies=tuple(args.concurrency))
    if args.same_requests:
        workload = dataclasses.replace(workload, range_ratio=0.0, measured_per_stream=vllmbench.PROMPTS_PER_STREAM)
    levels = list(workload.concurrencies)
    load = os.getloadavg()
    say(f"guidellm {tool_version()}, vllm bench serve from vLLM {found.version} ({found.distribution}); "
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    for line in workload_note(workload):
        say(line)
    runs: dict[str, list[dict[int, dict[str, Any]]]] = {t: [] for t in TOOLS}
    complete = True
    with tempfile.TemporaryDirectory(prefix="loadgen-agreement-") as tmp:
        work = Path(tmp)
        model = build_tiny_llama(work / "tiny-llama", hidden_size=VLLM_HIDDEN_SIZE)
        spec = engine_for("cpu", model, port=free_port(), chips=1, dtype="float32", lnc=None,
                          max_model_len=workload.input_tokens + workload.output_tokens + 64, max_streams=max(levels),
                          model_id="trncat-demo/tiny-llama", revision="0" * 40)  # fmt: skip
        say(f"starting vLLM on the CPU (1 to 5 minutes on busy cores): {spec.shell()}")
        with Engine(spec, work / "engine.log") as engine:
            ready = engine.wait_ready(timeout_s=900)
            say(f"vLLM ready in {ready:.0f} s (a first completion came back)")
            for round_ in range(args.rounds):
                for tool in TOOLS:
                    folder = work / f"{tool}-{round_}"
                    folder.mkdir()
                    say(f"round {round_ + 1}/{args.rounds}: {tool} at concurrency {','.join(map(str, levels))} ...")
                    started = time.monotonic()
                    measure = guidellm_points if tool == "guidellm" else vllm_bench_points
                    points = {p["concurrency"]: p for p in measure(spec, workload, model, folder)}
                    whole = sorted(points) == levels and all(p["success_rate"] == 1.0 for p in points.values())
                    if not whole or not engine.alive():
                        say(f"  {tool} measured {sorted(points)} of {levels}: this round is not kept")
                        complete = False
                        continue
                    runs[tool].append(points)
                    tok_s = ", ".join(f"c{c} {points[c]['output_tok_s']:.1f}" for c in levels)
                    say(f"  done in {time.monotonic() - started:.0f} s: output tok/s {tok_s}")
    load = os.getloadavg()
    say(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    kept = min(len(runs[t]) for t in TOOLS)
    if kept == 0:
        print("no round of both tools measured every point: nothing to compare", file=sys.stderr)
        return 1
    runs = {t: runs[t][:kept] for t in TOOLS}
    if args.json:
        args.json.write_text(json.dumps({"workload": workload.to_record(), "runs": runs}, indent=1), encoding="utf-8")
    print()
    print(f"guidellm vs vllm bench serve, one vLLM CPU server, {kept} interleaved rounds each "
          f"(median, min-max over rounds; paired diff = vllm-bench - guidellm, median over rounds)")  # fmt: skip
    for line in table(levels, runs):
        print(line)
    for tool in TOOLS:  # what each round measured: a point's requests and how long it lasted
        measured = "; ".join(
            f"c{c} " + ",".join(f"{r[c]['requests']}/{r[c]['duration_s']:.2f}s" for r in runs[tool]) for c in levels
        )
        print(f"{tool:>10} requests/duration measured per point, by round: {measured}")
    return 0 if complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
