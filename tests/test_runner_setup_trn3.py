"""runners/setup-runner.sh --class trn3: a trn3.48xlarge's runners carry trn3 labels, the class benchmark.yml and the
queue request for Trainium3 jobs; a class never takes the other's instances."""

from __future__ import annotations

import re

import pytest
import yaml

from pipeline.hardware import get_instance
from pipeline.plan import plan_config, runner_label
from tests import ROOT
from tests.test_runner_setup import dry_run, written


def test_a_trn3_48xlarge_is_partitioned_and_labelled_trn3() -> None:
    out = dry_run("install", "--repo", "a/b", "--token-file", "/dev/null", "--class", "trn3",
                  "--instance", "trn3.48xlarge", "--runners", "4")  # fmt: skip
    assert out.returncode == 0, out.stderr
    files = written(out.stdout)
    envs = [files[f"/etc/trncat-runner/runner-{i}.env"] for i in range(4)]
    assert [re.search(r"^NEURON_RT_VISIBLE_CORES=(\S+)$", e, re.M)[1] for e in envs] == [  # type: ignore[index]
        "0-15", "16-31", "32-47", "48-63"
    ]  # fmt: skip
    for env in envs:
        labels = re.search(r"^RUNNER_LABELS=(\S+)$", env, re.M)[1]  # type: ignore[index]
        assert labels == "self-hosted,linux,x64,trn3,trn3.48xlarge,trn3-16c"
    # The label is the one the queue asks for on that instance: the planner's runner label of a Trainium3 plan.
    assert get_instance("trn3.48xlarge").cores == 64


def test_every_trn3_label_the_queue_can_ask_for_has_a_runner() -> None:
    labels = set()
    for n in (1, 2, 4, 8, 16, 32, 64):
        out = dry_run("install", "--repo", "a/b", "--token-file", "/dev/null", "--class", "trn3",
                      "--instance", "trn3.48xlarge", "--runners", str(n))  # fmt: skip
        labels |= set(re.findall(r"RUNNER_LABELS=\S*,(trn3-\d+c)$", out.stdout, re.M))
    assert labels == {f"trn3-{c}c" for c in (1, 2, 4, 8, 16, 32, 64)}
    options = yaml.safe_load((ROOT / ".github/workflows/benchmark.yml").read_text())[True]["workflow_dispatch"]
    assert labels == {o for o in options["inputs"]["runner"]["options"] if o.startswith("trn3-")}
    plan = plan_config({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 128},
                       instance="trn3.48xlarge")  # fmt: skip
    assert runner_label(plan) in labels


@pytest.mark.parametrize(
    ("runner_class", "instance"), [("trn3", "trn2.48xlarge"), ("trn2", "trn3.48xlarge"), ("trn3", "trn3.3xlarge")]
)
def test_a_class_never_takes_the_other_s_instances(runner_class: str, instance: str) -> None:
    out = dry_run("install", "--repo", "a/b", "--token-file", "/dev/null", "--class", runner_class,
                  "--instance", instance)  # fmt: skip
    assert out.returncode != 0 and "unsupported instance type" in out.stderr


def test_the_dry_run_of_a_trn3_class_assumes_a_trn3_48xlarge() -> None:
    out = dry_run("install", "--repo", "a/b", "--token-file", "/dev/null", "--class", "trn3")
    assert out.returncode == 0, out.stderr
    assert "assuming trn3.48xlarge" in out.stdout + out.stderr and "trn3-64c" in out.stdout
