"""Serving jobs in the queue: a passing text-generation row without its serving row gets one (its GPU twin on
the GPU class), and the estimate counts their hours and dollars."""

from __future__ import annotations

from pathlib import Path

import pipeline
from pipeline.dataset import build, read_latest
from pipeline.prices import load_prices
from pipeline.queue import estimate_sweep, format_estimate, serving_jobs, serving_seconds
from pipeline.serve import serving_workload
from pipeline.testing.records import sample_failure, sample_record, sample_serving

WORKLOAD = serving_workload("1k/1k")


def test_a_passing_row_without_its_serving_row_gets_a_serving_job(tmp_path: Path) -> None:
    passing = sample_record(model_id="acme/served-not-yet", cores=2)
    failing = sample_failure(model_id="acme/fails")
    embeds = sample_record(model_id="acme/done")  # its serving row exists at this harness version
    done = sample_serving(device="neuron", model_id="acme/done")
    done["versions"]["pipeline"] = pipeline.__version__
    build([passing, failing, embeds, done], tmp_path)
    latest = read_latest(tmp_path)
    jobs = serving_jobs(latest, [done], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge")
    assert [j["model_id"] for j in jobs] == ["acme/served-not-yet"]
    (job,) = jobs
    # 2 NeuronCores round up to one whole chip (4 cores at LNC=2)
    assert (job["mode"], job["workload"], job["chips"], job["runner"]) == ("serving", "1k/1k", 1, "trn2-4c")
    assert job["artifact"].endswith("--serving--" + passing["revision"][:12])
    # the prior: the engine's start, then 9 points of 8 requests per stream x 1024 tokens at 30 ms
    assert job["predicted_s"] == round(1800 + 9 * 8 * 1024 * 0.03) == round(serving_seconds(WORKLOAD, device="neuron"))
    # an older harness's serving row does not count as done
    done["versions"]["pipeline"] = "0.0.1"
    again = serving_jobs(latest, [done], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge")
    assert {j["model_id"] for j in again} == {"acme/served-not-yet", "acme/done"}


def test_the_gpu_twin_comes_from_the_passing_gpu_row() -> None:
    gpu_row = {"model_id": "acme/both", "revision": "a" * 40, "task": "text-generation", "status": "pass",
               "device": "cuda", "hardware": "nvidia-l40s", "cores": 1}  # fmt: skip
    trn_row = {**gpu_row, "device": "neuron", "hardware": "trn2.48xlarge"}
    (twin,) = serving_jobs([gpu_row, trn_row], [], device="cuda", workload=WORKLOAD, instance="g6e.xlarge")
    assert (twin["runner"], twin["device"], twin["workload"]) == ("gpu-1g", "cuda", "1k/1k")
    assert twin["artifact"].endswith("--cuda")


def test_the_estimate_counts_serving_hours_and_dollars() -> None:
    row = {"model_id": "acme/x", "revision": "b" * 40, "task": "text-generation", "status": "pass",
           "device": "neuron", "hardware": "trn2.48xlarge", "cores": 4}  # fmt: skip
    jobs = serving_jobs([row], [], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge")
    bench = {"model_id": "acme/y", "task": "text-generation", "runner": "trn2-1c", "predicted_s": 600}
    estimate = estimate_sweep([*jobs, bench], prices=load_prices())
    serving = estimate.to_dict()["serving"]
    hours = 4 * jobs[0]["predicted_s"] / 3600
    assert serving["jobs"] == 1 and serving["core_hours"] == round(hours, 2)
    # $85.964 per trn2.48xlarge-hour over its 64 NeuronCores, for the job's core-hours
    assert serving["cost_usd"] == round(85.964 * hours / 64, 2)
    assert "Serving: 1 job(s)" in format_estimate(estimate)
