"""Every ``vllm serve`` command trncat can build is parsed by the pinned vLLM's own argument parser
(``vllm.entrypoints.launchers.cli_args.make_arg_parser`` on ``vllm.utils.argparse_utils.FlexibleArgumentParser``,
then ``validate_parsed_serve_args``): a flag vLLM does not know, or a value it refuses, fails the test with the
flag and the command. Abbreviations are off (``allow_abbrev=False``): argparse would take ``--max-num-seq`` for
``--max-num-seqs``, and a later vLLM with a second flag of that prefix would refuse it, so only full names pass.
vLLM lives in its own environment (``vllm_commands.vllm_python``); one subprocess parses every command (vLLM
imports slowly). Without that environment the test is skipped, except under ``CI=true``,
where CI builds it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from typing import Any

import pytest

from tests.serve.vllm_commands import MODEL, every_vllm_command, neuron_layouts, serve_args, vllm_python

#: Run in the vLLM environment: reads [{name, args}] on stdin, prints one JSON line of verdicts after a marker.
PARSE = r"""
import contextlib, io, json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

verdicts = []
for case in json.load(sys.stdin):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve", allow_abbrev=False))
            args = parser.parse_args(case["args"])
            validate_parsed_serve_args(args)
    except SystemExit:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        verdicts.append({"ok": False, "error": lines[-1] if lines else "exited"})
    except Exception as exc:
        verdicts.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    else:
        verdicts.append({"ok": True, "model": args.model_tag or args.model,
                         "tensor_parallel": args.tensor_parallel_size, "data_parallel": args.data_parallel_size,
                         "max_num_seqs": args.max_num_seqs, "max_model_len": args.max_model_len,
                         "limit_mm_per_prompt": args.limit_mm_per_prompt, "api_key": args.api_key,
                         "prefix_caching": args.enable_prefix_caching, "block_size": args.block_size})
print("TRNCAT-VERDICTS " + json.dumps(verdicts, default=str))
"""


def _mutants(args: list[str]) -> dict[str, list[str]]:
    """What the parser must refuse: the command with a misspelled flag, or a value of the wrong type, added."""
    return {
        "mutant: --tensor-paralel-size": [*args, "--tensor-paralel-size", "4"],
        "mutant: --max-num-seqs many": [*args, "--max-num-seqs", "many"],
    }


@pytest.fixture(scope="module")
def parsed() -> dict[str, Any]:
    python = vllm_python()
    if python is None or not python.is_file():
        reason = f"no vLLM environment ({python or 'set TRNCAT_VLLM_PYTHON, or build .venv-vllm with make'})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: CI builds it, so the flag test must run there")
        pytest.skip(reason)
    specs = every_vllm_command()
    cases = {name: serve_args(spec.argv) for name, spec in specs.items()}
    cases |= _mutants(cases["neuron 1 chip(s) LNC=2, 1k/1k"])
    cases["api key: --api-key"] = [*cases["neuron 1 chip(s) LNC=2, 1k/1k"], "--api-key", "k"]
    payload = json.dumps([{"name": n, "args": a} for n, a in cases.items()])
    done = subprocess.run(  # noqa: S603 - the test's own script in the vLLM environment
        [str(python), "-c", PARSE], input=payload, capture_output=True, text=True, timeout=600, check=False
    )
    marked = [line for line in done.stdout.splitlines() if line.startswith("TRNCAT-VERDICTS ")]
    assert done.returncode == 0 and marked, f"vLLM's parser did not run: {done.stderr[-3000:]}"
    verdicts = json.loads(marked[-1].removeprefix("TRNCAT-VERDICTS "))
    return {"specs": specs, "cases": cases, "verdicts": dict(zip(cases, verdicts, strict=True))}


def test_vllm_refuses_a_mutated_flag_and_a_bad_value(parsed: dict[str, Any]) -> None:
    """The parse can fail: the same command with one flag misspelled, or one value of the wrong type, is refused."""
    verdicts = parsed["verdicts"]
    misspelled = verdicts["mutant: --tensor-paralel-size"]
    error = misspelled["error"]
    assert not misspelled["ok"] and "unrecognized arguments:" in error and "--tensor-paralel-size" in error
    bad = verdicts["mutant: --max-num-seqs many"]
    assert not bad["ok"] and "--max-num-seqs" in bad["error"]


def test_vllm_takes_an_api_key(parsed: dict[str, Any]) -> None:
    """vLLM 0.32 knows ``--api-key`` (the engine gets its key as ``VLLM_API_KEY``, the flag's environment twin, so
    that no argv holds it; docs/neuron-facts.md): the flag parses into the server's key list."""
    verdict = parsed["verdicts"]["api key: --api-key"]
    assert verdict["ok"] and verdict["api_key"] == ["k"], verdict


def test_every_vllm_command_trncat_builds_is_accepted_by_vllms_own_parser(parsed: dict[str, Any]) -> None:
    refused = [
        f"{name}: {verdict['error']}\n    {shlex.join(parsed['cases'][name])}"
        for name, verdict in parsed["verdicts"].items()
        if not name.startswith("mutant:") and not verdict["ok"]
    ]
    assert not refused, "vLLM refuses flags trncat builds:\n" + "\n".join(refused)


def test_vllm_reads_each_option_as_trncat_records_it(parsed: dict[str, Any]) -> None:
    """What vLLM parsed is what the record's engine options say (the model, the parallelism, the limits)."""
    for name, spec in parsed["specs"].items():
        got, options = parsed["verdicts"][name], spec.options
        assert got["model"] == str(MODEL), name
        # an option the record does not name is one the command leaves at vLLM's default
        parallel = (options.get("tensor_parallel", 1), options.get("data_parallel", 1))
        assert (got["tensor_parallel"], got["data_parallel"]) == parallel, name
        limits = (options.get("max_num_seqs"), options.get("max_model_len"))
        assert (got["max_num_seqs"], got["max_model_len"]) == limits, name
        images = options.get("limit_mm_per_prompt_image")
        assert (got["limit_mm_per_prompt"] or {}).get("image") == images, name
        # prefix caching (issue 49): stated with vLLM Neuron's block size where the record says so, else vLLM's default
        cache = (True, 32) if options.get("prefix_caching") else (None, None)
        assert (got["prefix_caching"], got["block_size"]) == cache, name


def test_the_commands_cover_every_layout_the_planner_and_queue_can_emit() -> None:
    """The derived sizes reach from one chip to a whole trn2.48xlarge at LNC=2 (4 to 64 NeuronCores), and the
    image workloads and data parallel are among the commands."""
    names = every_vllm_command()
    assert {(c, 2) for c in (1, 2, 4, 8, 16)} <= neuron_layouts()
    tps = {s.options["tensor_parallel"] for s in names.values() if s.engine == "vllm-neuron"}
    assert {4, 8, 16, 32, 64} <= tps
    assert any("--limit-mm-per-prompt" in s.argv for s in names.values())
    assert any("--data-parallel-size" in s.argv for s in names.values())
    assert any("VLLM_NEURON_DISABLE_WARMUP_COMPILE" in s.env for s in names.values())
