"""The task score of a served model: lm-eval (EleutherAI's lm-evaluation-harness) against the engine's
OpenAI-compatible completions endpoint, on a pinned task and subset, judged against a per-model floor.

lm-eval runs as a child process (``lm-eval run --model local-completions``: plain-text prompts, greedy, its own
scoring); trncat reads the score from its results file and compares it with the floor, nothing more. Two tasks:

- ``gsm8k`` for real models: lm-eval's own task, 5-shot, the first :data:`GSM8K_LIMIT` problems of the test split,
  ``exact_match`` after its ``strict-match`` filter; the default floor 0.90 is InferenceX's
  (utils/evals/thresholds.yaml, ``default: gsm8k: 0.90``);
- ``trncat-tiny-arith``, the CPU tests' task: a YAML and a JSONL shipped in ``eval_tasks/`` (twelve one-step
  sums, read from that folder: nothing is downloaded); its floor, 0.0, is a stated test floor (the tiny
  random-weight Llama answers nothing right): it checks the path, and a model's score is what it is.

No remote code: lm-eval's ``trust_remote_code`` is never passed, and the engine, the tokenizer and the datasets
library run offline (the tiny task's JSONL is local; gsm8k on a runner is lm-eval's own dataset id).
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipeline.backends import package_version
from pipeline.serve.engine import CLIENT_KEY_ENV, OFFLINE_ENV, EngineSpec, console_script
from pipeline.serve.loadgen import recorded, run_client

TOOL = "lm-eval"
#: The tasks shipped with the repository (the tests' task), run from a copy of this folder.
TASKS_DIR = Path(__file__).resolve().parent / "eval_tasks"
#: The gsm8k subset a real model is scored on: the first N problems of the test split (trncat's choice: a task
#: score beside a serving sweep, not a leaderboard figure).
GSM8K_LIMIT = 250
INFERENCEX_FLOOR = "InferenceX utils/evals/thresholds.yaml (default: gsm8k: 0.90)"


@dataclass(frozen=True)
class EvalTask:
    """A pinned lm-eval task: its name, the subset, the metric read and its floor with where it comes from."""

    name: str
    task: str
    metric: str
    subset: str
    limit: int | None
    num_fewshot: int
    floor: float
    floor_source: str
    #: Shipped in :data:`TASKS_DIR` (run from a copy of it); False: lm-eval's own task.
    local: bool = False


EVAL_TASKS: dict[str, EvalTask] = {
    "gsm8k": EvalTask(
        name="gsm8k",
        task="gsm8k",
        metric="exact_match,strict-match",
        subset=f"test split, first {GSM8K_LIMIT} problems, 5-shot",
        limit=GSM8K_LIMIT,
        num_fewshot=5,
        floor=0.90,
        floor_source=INFERENCEX_FLOOR,
    ),
    "trncat-tiny-arith": EvalTask(
        name="trncat-tiny-arith",
        task="trncat_tiny_arith",
        metric="exact_match,first-number",
        subset="all 12 sums of eval_tasks/trncat_tiny_arith.jsonl, 0-shot",
        limit=None,
        num_fewshot=0,
        floor=0.0,
        floor_source="a stated test floor: the tiny random-weight Llama answers nothing right; it checks the path",
        local=True,
    ),
}


def eval_task(name: str, *, floor: float | None = None) -> EvalTask:
    """The named task, its floor replaced when ``floor`` is given (a per-model floor).

    Raises:
        KeyError: no such task.
    """
    task = EVAL_TASKS[name]
    if floor is None:
        return task
    return replace(task, floor=floor, floor_source="given for this model")


def _lm_eval() -> list[str]:
    script = console_script("lm-eval")
    return [script] if script != "lm-eval" else [sys.executable, "-m", "lm_eval"]


def lm_eval_argv(spec: EngineSpec, task: EvalTask, *, tokenizer: Path, out: Path) -> list[str]:
    """The ``lm-eval run`` command against ``spec``'s completions endpoint (greedy, one request at a time)."""
    model_args = ",".join(
        [
            f"model={spec.model_name}",
            f"base_url={spec.base_url}/v1/completions",
            "tokenizer_backend=huggingface",
            f"tokenizer={tokenizer}",
            "tokenized_requests=False",
            "num_concurrent=1",
            "max_retries=3",
        ]
    )
    argv = [*_lm_eval(), "run", "--model", "local-completions", "--model_args", model_args, "--tasks", task.task]
    argv += ["--num_fewshot", str(task.num_fewshot), "--output_path", str(out), "--seed", "1234"]
    if task.limit is not None:
        argv += ["--limit", str(task.limit)]
    if task.local:
        argv += ["--include_path", "."]
    return argv


def _score(results_dir: Path, task: EvalTask) -> tuple[float | None, float | None]:
    """The metric and its standard error from lm-eval's newest results file under ``results_dir``."""
    files = sorted(results_dir.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        return None, None
    try:
        results = json.loads(files[-1].read_text(encoding="utf-8"))["results"][task.task]
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    name, _, filt = task.metric.partition(",")
    score, stderr = results.get(task.metric), results.get(f"{name}_stderr,{filt}")
    number = (int, float)
    return (
        float(score) if isinstance(score, number) else None,
        float(stderr) if isinstance(stderr, number) else None,
    )


def run_eval(
    spec: EngineSpec, task: EvalTask, work: Path, *, tokenizer: Path, timeout_s: float, model_id: str | None = None
) -> dict[str, Any]:
    """Score the engine ``spec`` serves on ``task``; the record's ``serving.eval`` section. Its command names
    ``lm-eval`` by name and the tokenizer by ``model_id`` (a Hub id; default: as run), no path of this machine.

    ``passed`` is None when no score came back (lm-eval failed: its output tail says why), else whether the
    score reached the floor.
    """
    work.mkdir(parents=True, exist_ok=True)
    cwd = work / "tasks"
    if task.local:
        shutil.copytree(TASKS_DIR, cwd, dirs_exist_ok=True)
    else:
        cwd.mkdir(exist_ok=True)
    out = work / "lm-eval-results"
    argv = lm_eval_argv(spec, task, tokenizer=tokenizer, out=out)
    env = {"HF_DATASETS_CACHE": str(work / "datasets-cache"), "HF_ALLOW_CODE_EVAL": "0"}
    if spec.api_key:  # lm-eval's local-completions sends OPENAI_API_KEY as its bearer token
        env[CLIENT_KEY_ENV] = spec.api_key
    if task.local:  # the shipped task reads only its own JSONL
        env |= {**OFFLINE_ENV, "HF_DATASETS_OFFLINE": "1"}
    log = work / "lm-eval.log"
    code, tail = run_client(argv, log, env=env, timeout_s=timeout_s, tail_chars=1500, cwd=cwd, grace_s=10.0)
    if code is None:
        tail = f"lm-eval ran past {timeout_s:g} s: {tail[-1200:]}"
    score, stderr = _score(out, task)
    args = argv[3:] if argv[1:3] == ["-m", "lm_eval"] else argv[1:]  # after the program, however it was run
    return {
        "tool": {"name": TOOL, "version": package_version("lm_eval") or "unknown"},
        "task": task.name,
        "subset": task.subset,
        "metric": task.metric,
        "score": score,
        "stderr": stderr,
        "floor": task.floor,
        "floor_source": task.floor_source,
        "passed": None if score is None else score >= task.floor,
        "command": recorded(TOOL, args, {str(tokenizer): model_id or str(tokenizer), str(out): out.name})[:2000],
        "output_tail": None if score is not None else f"exit {code}: {tail}"[-2000:],
    }
