"""Every command has help with an example and is documented in the README; errors are one line."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.cli import build_parser, main
from pipeline.cli.registry import COMMANDS
from pipeline.types import (
    DEVICES,
    DTYPES,
    EVAL_TASK_NAMES,
    FLAG_FEATURES,
    LNCS,
    LOAD_GENERATOR_NAMES,
    PRICE_KINDS,
    SERVING_WORKLOADS,
    SOURCES,
    TASKS,
    VIEWS,
)
from tests import FIXTURES, ROOT

README = ROOT / "README.md"
NAMES = sorted(entry.name for entry in COMMANDS)


@pytest.mark.parametrize("name", NAMES)
def test_every_command_has_help_with_an_example(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out and f"trncat {name}" in out


@pytest.mark.parametrize("name", NAMES)
def test_every_command_is_documented_in_the_readme(name: str) -> None:
    assert f"trncat {name}" in README.read_text(), f"README.md does not document `trncat {name}`"


def test_design_command_names_exist() -> None:
    for name in ("demo", "bench", "validate", "build", "plan"):
        assert name in NAMES


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run([sys.executable, "-m", "pipeline", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("trncat ")


def test_errors_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "missing.json")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {tmp_path / 'missing.json'}: no such file or folder"]


def _options(parser: argparse.ArgumentParser, command: str = "") -> Iterator[tuple[str, argparse.Action]]:
    """Every option and positional of every command (and subcommand), as (command, action)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{command} {name}".strip())
        else:
            yield command, action


#: The value sets of pipeline/types.py, by the option that takes one: wherever a command has such an option, its
#: choices are exactly the Literal's (plus ``all`` where a command runs every one).
CHOSEN_FROM = {
    "task": TASKS,
    "device": DEVICES,
    "dtype": DTYPES,
    "source": SOURCES,
    "view": VIEWS,
    "price_option": PRICE_KINDS,
    "lnc": LNCS,
    "eval": EVAL_TASK_NAMES,
    "serving": SERVING_WORKLOADS,
    "workload": SERVING_WORKLOADS,
    "load_generator": LOAD_GENERATOR_NAMES,
    "feature": FLAG_FEATURES,
}
#: Options named like one of the above that take something else, and the one positional verb: (command, dest).
NOT_A_CHOICE = {("bench", "workload"), ("release-watch", "source"), ("localhub", "action")}


def test_every_command_s_choices_come_from_the_literal_types() -> None:
    seen = set()
    for command, action in _options(build_parser()):
        if (command, action.dest) in NOT_A_CHOICE:
            continue
        if action.dest in CHOSEN_FROM:
            expected = CHOSEN_FROM[action.dest]
            assert action.choices is not None, f"trncat {command} --{action.dest} takes any value"
            assert tuple(action.choices) in (expected, (*expected, "all")), f"trncat {command} --{action.dest}"
            seen.add(action.dest)
        else:
            assert action.choices is None, f"trncat {command} --{action.dest}: choices from no Literal of types.py"
    assert seen == set(CHOSEN_FROM)


def test_the_serving_literals_name_the_serving_tables() -> None:
    from pipeline.serve import EVAL_TASKS, WORKLOADS

    assert tuple(WORKLOADS) == SERVING_WORKLOADS
    assert tuple(EVAL_TASKS) == EVAL_TASK_NAMES


def test_plan_prints_advice_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    fixtures = FIXTURES / "configs"
    folder = tmp_path / "mixtral"
    folder.mkdir()
    (folder / "config.json").write_text((fixtures / "mixtral-8x7b-v0.1.json").read_text())
    assert main(["plan", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "NeuronCores" in text and "tensor parallelism" in text
    assert main(["plan", str(folder), "--json", "--dtype", "bfloat16"]) == 0
    plan = json.loads(capsys.readouterr().out)
    for key in (
        "params",
        "active_params",
        "weights_bytes",
        "kv_cache_bytes",
        "total_bytes",
        "cores",
        "instance",
        "fits",
        "advice",
        "source",
    ):
        assert key in plan
    assert plan["active_params"] < plan["params"] and plan["fits"] and plan["cores"] > 1


def test_plan_of_a_folder_without_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "config.json" in err[0]


# -- issue 37: what a new user hits first ---------------------------------------------------------------


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in captured.err, captured.err
    return err[0]


def test_page_from_a_missing_or_empty_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "site"
    args = ["page", "--dataset-repo", "trncat/results", "--out", str(out), "--from-folder"]
    assert main([*args, str(tmp_path / "nope")]) == 2
    assert "no such dataset folder" in _one_error_line(capsys)
    (tmp_path / "empty").mkdir()
    assert main([*args, str(tmp_path / "empty")]) == 2
    assert "holds no dataset" in _one_error_line(capsys)
    assert not out.exists()  # never an empty catalog


@pytest.mark.parametrize("name", ["./does-not-exist", "../nowhere/model", "/no/such/model"])
def test_bench_and_plan_of_a_missing_folder_say_the_folder_is_missing(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    assert main(["bench", name, "--task", "text-generation", "--device", "cpu", "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert f"{name}: no such folder" in line and "model id" not in line
    assert main(["plan", name]) == 2
    assert f"{name}: no such folder" in _one_error_line(capsys)
    assert not out.exists()


def test_localhub_serve_mistakes_are_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["localhub", "serve", "--root", str(afile)]) == 2
    assert "a file, not a folder" in _one_error_line(capsys)
    missing = tmp_path / "tokens.txt"
    assert main(["localhub", "serve", "--root", str(tmp_path / "hub"), "--tokens-file", str(missing)]) == 2
    assert f"--tokens-file {missing}: cannot read it" in _one_error_line(capsys)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["localhub", "serve", "--root", str(tmp_path / "hub"), "--port", str(port)]) == 2
        assert f"--port {port}: already in use" in _one_error_line(capsys)


def test_the_readme_says_up_front_that_nothing_is_measured_on_hardware_yet() -> None:
    """Issue 37: the first screen says where the project stands, and that stays true while docs/neuron-facts.md has
    no fact seen on hardware (the first hardware run changes both)."""
    facts = (ROOT / "docs" / "neuron-facts.md").read_text(encoding="utf-8")
    seen = [cells[-2].strip() for line in facts.splitlines() if (cells := line.split("|")) and len(cells) > 5]
    seen = [s for s in seen if s not in ("seen on hardware", "---", "n/a")]
    assert seen and set(seen) == {"no"}, "a fact was seen on hardware: update the README's first screen"
    first_screen = README.read_text(encoding="utf-8").split("## Two commands", 1)[0]
    assert "no row has yet been measured on Trainium2 hardware" in first_screen
    assert "tested against an emulator of its" in first_screen and "documentation" in first_screen
    assert "a third party's, each with its source and date" in first_screen and "not live" in first_screen


def test_the_readme_tells_how_to_check_the_demos_models_after_it_ends() -> None:
    from pipeline.cli.demo import DATASET_REPO, FINE_TUNE

    text = README.read_text(encoding="utf-8")
    assert "trncat demo --out demo-out --work demo-work" in text
    assert "trncat localhub serve --root demo-work/hub --port 8999 &" in text
    assert f"HF_ENDPOINT=http://127.0.0.1:8999 .venv/bin/trncat check {FINE_TUNE} --dataset {DATASET_REPO}" in text


def test_the_readme_paragraph_after_the_pandas_example_is_short_sections() -> None:
    text = README.read_text(encoding="utf-8")
    after = text.split('ds["train"].features["attempts"]', 1)[1].split("## Commands", 1)[0]
    paragraphs = [p for p in after.split("\n\n") if p.strip() and not p.startswith(("#", "```"))]
    assert len(re.findall(r"^### ", after, flags=re.M)) >= 5
    assert max(len(p.splitlines()) for p in paragraphs) <= 9
