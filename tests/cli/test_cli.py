"""Every command has help with an example and is documented in the README; errors are one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import build_parser, commands, main
from tests import FIXTURES, ROOT

README = ROOT / "README.md"


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_has_help_with_an_example(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out and f"trncat {name}" in out


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_is_documented_in_the_readme(name: str) -> None:
    assert f"trncat {name}" in README.read_text(), f"README.md does not document `trncat {name}`"


def test_design_command_names_exist() -> None:
    for name in ("demo", "bench", "validate", "build", "plan"):
        assert name in commands()


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run([sys.executable, "-m", "pipeline", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("trncat ")


def test_errors_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "missing.json")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {tmp_path / 'missing.json'}: no such file or folder"]


def test_parser_choices_come_from_the_literal_types() -> None:
    from pipeline.types import DEVICES, TASKS

    bench = build_parser()._subparsers._group_actions[0].choices["bench"]  # type: ignore[union-attr]
    actions = {a.dest: a for a in bench._actions}
    assert tuple(actions["task"].choices) == TASKS
    assert tuple(actions["device"].choices) == DEVICES


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
