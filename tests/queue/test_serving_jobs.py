"""Serving jobs in the queue: a passing text-generation row without its serving row gets one (its GPU twin on
the GPU class), and the estimate counts their hours and dollars."""

from __future__ import annotations

from pathlib import Path

import pipeline
from pipeline.dataset import build, read_latest
from pipeline.prices import load_pricing
from pipeline.queue import estimate_sweep, format_estimate, serving_jobs, serving_seconds
from pipeline.serve import serving_workload
from tests.support.records import sample_failure, sample_record, sample_serving

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
    # the prior: the engine's start, then 9 points of 8 requests per stream x 1024 tokens at 30 ms, then the probe of
    # the flag-only feature it serves with (prefix caching: a flag on this job, not a job of its own; issue 49)
    assert job["features"] == ["prefix_caching"]
    expected = round(1800 + 9 * 8 * 1024 * 0.03 + 60)
    assert job["predicted_s"] == expected == round(serving_seconds(WORKLOAD, device="neuron"))
    # an older harness's serving row does not count as done
    done["versions"]["pipeline"] = "0.0.1"
    again = serving_jobs(latest, [done], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge")
    assert {j["model_id"] for j in again} == {"acme/served-not-yet", "acme/done"}


def test_a_serving_job_counts_chips_at_the_row_s_lnc(tmp_path: Path) -> None:
    """A row at LNC=1 has 8 NeuronCores a trn2 chip: its 128 cores are the 16 chips of a trn2.48xlarge, never 32
    (4 a chip whatever the LNC); at LNC=2 its 8 cores are 2 chips. The engine runs at serve's LNC (2): 4 a chip."""
    lnc1 = sample_record(model_id="acme/whole-instance", cores=128)
    lnc1["hardware"] |= {"core_config": "lnc=1", "cores_available": 128, "memory_per_core_bytes": 12 * 2**30}
    lnc2 = sample_record(model_id="acme/two-chips", cores=8)
    build([lnc1, lnc2], tmp_path)
    jobs = serving_jobs(read_latest(tmp_path), [], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge")
    got = {j["model_id"]: (j["chips"], j["cores"], j["runner"]) for j in jobs}
    assert got == {"acme/whole-instance": (16, 64, "trn2-64c"), "acme/two-chips": (2, 8, "trn2-8c")}


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
    estimate = estimate_sweep([*jobs, bench], pricing=load_pricing())
    serving = estimate.to_dict()["serving"]
    hours = 4 * jobs[0]["predicted_s"] / 3600
    assert serving["jobs"] == 1 and serving["core_hours"] == round(hours, 2)
    # $85.964 per trn2.48xlarge-hour over its 64 NeuronCores, for the job's core-hours
    assert serving["cost_usd"] == round(85.964 * hours / 64, 2)
    assert "Serving: 1 job(s)" in format_estimate(estimate)


IMAGES = serving_workload("1k/1k-image")


def _vlm_row(model_id: str, architecture: str | None, **extra: object) -> dict[str, object]:
    return {"model_id": model_id, "revision": "c" * 40, "task": "image-text-to-text", "status": "pass",
            "device": "neuron", "hardware": "trn2.48xlarge", "cores": 8, "architecture": architecture,
            **extra}  # fmt: skip


def test_an_image_row_gets_the_image_workload_only_for_an_architecture_vllm_neuron_serves() -> None:
    from pipeline.queue.serving import VLLM_NEURON_IMAGE_ARCHITECTURES

    assert VLLM_NEURON_IMAGE_ARCHITECTURES == {"Qwen3VLForConditionalGeneration"}  # docs/neuron-facts.md's row
    rows = [
        _vlm_row("qwen/qwen3-vl", "Qwen3VLForConditionalGeneration"),
        _vlm_row("llava-hf/llava", "LlavaForConditionalGeneration"),  # refused: vLLM Neuron documents no Llava
        _vlm_row("qwen/qwen3-vl-moe", "Qwen3VLMoeForConditionalGeneration"),  # refused: the recipe is the dense one
        _vlm_row("acme/no-family", None),  # refused: an unknown architecture is no documented one
        _vlm_row("qwen/qwen3-vl-failed", "Qwen3VLForConditionalGeneration", status="fail"),
    ]
    (job,) = serving_jobs(rows, [], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge", image_workload=IMAGES)
    assert (job["model_id"], job["task"], job["workload"], job["chips"]) == ("qwen/qwen3-vl", "image-text-to-text",
                                                                             "1k/1k-image", 2)  # fmt: skip
    assert job["predicted_s"] == round(serving_seconds(IMAGES, device="neuron"))
    # without an image workload the queue serves text-generation rows alone, as before
    assert serving_jobs(rows, [], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge") == []


def test_an_image_row_served_at_this_harness_is_done_and_its_gpu_twin_follows_the_same_gate() -> None:
    served = sample_serving(device="neuron", model_id="qwen/qwen3-vl", task="image-text-to-text")
    served["serving"]["workload"] = IMAGES.to_record()
    served["versions"]["pipeline"] = pipeline.__version__
    served["hardware"]["name"] = "trn2.48xlarge"
    row = _vlm_row("qwen/qwen3-vl", "Qwen3VLForConditionalGeneration")
    assert serving_jobs([row], [served], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge",
                        image_workload=IMAGES) == []  # fmt: skip
    # a text serving row of the same model does not count as its image serving row
    served["serving"]["workload"] = WORKLOAD.to_record()
    assert len(serving_jobs([row], [served], device="neuron", workload=WORKLOAD, instance="trn2.48xlarge",
                            image_workload=IMAGES)) == 1  # fmt: skip
    gpu = [{**_vlm_row("qwen/qwen3-vl", "Qwen3VLForConditionalGeneration"), "device": "cuda",
            "hardware": "nvidia-h200", "cores": 1},
           {**_vlm_row("llava-hf/llava", "LlavaForConditionalGeneration"), "device": "cuda", "hardware": "nvidia-h200",
            "cores": 1}]  # fmt: skip
    (twin,) = serving_jobs(gpu, [], device="cuda", workload=WORKLOAD, instance="p5en.48xlarge", image_workload=IMAGES)
    assert (twin["model_id"], twin["workload"], twin["runner"]) == ("qwen/qwen3-vl", "1k/1k-image", "gpu-1g")
