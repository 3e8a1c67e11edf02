"""Sample result records that satisfy the contract, to build fixtures and benchmarks from."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from pipeline.records import COLUMNS

_BASE: dict[str, Any] = {
    "schema_version": "2.0",
    "model_id": "trncat-demo/tiny-llama",
    "revision": "0123456789abcdef0123456789abcdef01234567",
    "task": "text-generation",
    "status": "pass",
    "failure": None,
    "device": "neuron",
    "hardware": {
        "name": "trn2.48xlarge",
        "instance_type": "trn2.48xlarge",
        "accelerator": "Trainium2",
        "core_config": "lnc=2",
        "memory_per_core_bytes": 24 * 1024**3,
        "cores_available": 64,
    },
    "cores": 1,
    "dtype": "bfloat16",
    "workload": {"batch_size": 1, "input_tokens": 128, "output_tokens": 64, "image_size": None},
    "metrics": {
        "params": 1_235_814_400,
        "weights_bytes": 2_471_628_800,
        "load_s": 4.2,
        "compile_s": 61.5,
        "ttft_s": 0.031,
        "latency_s": {"p50": 0.83, "p90": 0.86},
        "decode_tokens_per_s": 77.1,
        "wall_s": 72.9,
        "peak_device_memory_bytes": 3_100_000_000,
        "peak_host_memory_bytes": 5_900_000_000,
        "roofline_fraction": 0.26,
        "iterations": 5,
        "compile_cache_hit": True,
        "warm_start_s": 9.8,
        "cpu_fallback_ops": [],
        "recompiles_during_timed": 0,
    },
    "versions": {
        "pipeline": "0.1.0",
        "python": "3.11.7",
        "torch": "2.9.0",
        "transformers": "5.0.0",
        "torch_neuronx": "2.14.0",
        "neuronx_cc": "2.21.0",
        "runtime": "2.28.0",
        "driver": "2.24.0",
        "sdk": "2.27.0",
        "container_image": None,
        "cuda": None,
        "torchvision": None,
    },
    "run": {
        "started_at": "2026-11-28T10:00:00+00:00",
        "finished_at": "2026-11-28T10:01:13+00:00",
        "runner": "trn2-runner-1",
        "github_run_id": "1234567890",
        "github_sha": "89abcdef0123456789abcdef0123456789abcdef",
        "source": "ci",
    },
    "attempts": [],
    "plan": {
        "cores": 1,
        "fits": True,
        "advice": "fits on one NeuronCore",
        "instance": "trn2.48xlarge",
        "tp_degree": 1,
        "total_bytes": 3_000_000_000,
    },
    "agreement": {
        "reference": "cpu-float32",
        "logits_cosine": 0.9993,
        "prefix_tokens": 64,
        "compared_tokens": 64,
        "threshold": 0.98,
        "skipped": None,
    },
    "notes": [],
}


def sample_record(**overrides: Any) -> dict[str, Any]:
    """A valid neuron pass record; ``overrides`` replace top-level keys (dicts are merged one level deep)."""
    record = copy.deepcopy(_BASE)
    return _override(record, overrides)


def _override(record: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``overrides`` in place of its top-level keys (dicts merged one level deep)."""
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(record.get(key), dict):
            record[key].update(value)
        else:
            record[key] = value
    return record


def sample_failure(
    *,
    stage: str = "compile",
    code: str = "ncc_evrf001",
    message: str = "compile failed",
    status: str = "fail",
    **overrides: Any,
) -> dict[str, Any]:
    """A valid fail (or error) record."""
    record = sample_record(status=status, failure={"stage": stage, "code": code, "message": message}, **overrides)
    record["metrics"].update(
        ttft_s=None,
        latency_s=None,
        decode_tokens_per_s=None,
        roofline_fraction=None,
        peak_device_memory_bytes=None,
        compile_s=None,
        iterations=None,
        warm_start_s=None,
        compile_cache_hit=None,
    )
    if "agreement" not in overrides:  # a failed run has no answer to check, unless the answer was the failure
        record["agreement"] = None
    return record


#: The ``run`` fields of a community submission: no CI-only provenance (the validator refuses a forged one).
COMMUNITY_RUN = {"runner": None, "github_run_id": None, "github_sha": None, "source": "community"}


def as_community(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` turned into a community submission (in place; returned for chaining)."""
    record["run"] |= COMMUNITY_RUN
    return record


def sample_community(**overrides: Any) -> dict[str, Any]:
    """A valid community pass record (:func:`sample_record` with a submission's provenance)."""
    return as_community(sample_record(**overrides))


def fake_revision(text: str) -> str:
    """A deterministic 40-hex revision derived from ``text``."""
    return hashlib.sha1(text.encode()).hexdigest()


def _serving_point(concurrency: int, per_chip: float, per_user: float, chips: int, usd_hour: float | None) -> dict:
    speed = per_chip * chips
    tpot = 1000.0 / per_user
    return {
        "concurrency": concurrency,
        "requests": 6 * concurrency,
        "success_rate": 1.0,
        "output_tok_s": speed,
        "tok_s_per_chip": per_chip,
        "tok_s_per_user": per_user,
        "ttft_s": {"p50": 0.05 * concurrency, "p90": 0.06 * concurrency, "p99": 0.08 * concurrency},
        "tpot_ms": {"p50": tpot, "p90": tpot * 1.1, "p99": tpot * 1.2},
        "itl_ms": {"p50": tpot, "p90": tpot * 1.1, "p99": tpot * 1.3},
        "e2e_s": {"p50": 1.0, "p90": 1.2, "p99": 1.4},
        "usd_per_million_tokens": (usd_hour / (speed * 3600) * 1e6) if usd_hour else None,
        "duration_s": 30.0,
    }


def sample_serving(*, device: str = "neuron", **overrides: Any) -> dict[str, Any]:
    """A valid serving record: a Trainium2 (``neuron``) or GPU (``cuda``) sweep of 1 ... 8."""
    neuron = device == "neuron"
    chips, usd = (1, 85.964 / 16) if neuron else (1, 10.0)
    curve = [(1, 40.0, 40.0), (2, 78.0, 39.0), (4, 150.0, 37.5), (8, 280.0, 35.0)]
    if not neuron:
        curve = [(c, x * 1.5, u * 1.4) for c, x, u in curve]
    points = [_serving_point(c, x, u, chips, usd) for c, x, u in curve]
    record = sample_record(
        device=device,
        cores=chips,
        agreement=None,
        plan=None,
        notes=["serving: fixture"],
    )
    if not neuron:
        record["hardware"] = {
            "name": "nvidia-l40s",
            "instance_type": "g6e.xlarge",
            "accelerator": "NVIDIA L40S",
            "core_config": None,
            "memory_per_core_bytes": None,
            "cores_available": 1,
        }
        record["versions"].update(torch_neuronx=None, neuronx_cc=None, runtime=None, driver=None, sdk=None, cuda="12.8")
        record["metrics"]["peak_device_memory_bytes"] = None
    for key in ("compile_cache_hit", "warm_start_s", "iterations", "cpu_fallback_ops", "recompiles_during_timed"):
        record["metrics"].pop(key, None)
    best = points[-1]
    record["serving"] = {
        "tool": {
            "name": "guidellm",
            "version": "0.8.1",
            "commands": ["guidellm run --scenario points-1.scenario.json"],
        },
        "engine": {
            "name": "vllm-neuron" if neuron else "vllm",
            "command": "vllm serve MODEL --port 8000 --tensor-parallel-size " + ("4" if neuron else "1"),
            "options": {"max_num_seqs": 256, "max_model_len": 2112, "tensor_parallel": 4 if neuron else 1},
            "ready_s": 300.0,
            "warm_ready_s": 60.0,
            "log_tail": None,
        },
        "workload": {
            "name": "1k/1k",
            "input_tokens": 1024,
            "output_tokens": 1024,
            "range_ratio": 0.8,
            "concurrencies": [1, 2, 4, 8],
            "measured_per_stream": 6,
            "warmup_per_stream": 2,
            "seed": 42,
            "dataset": "random (guidellm synthetic_text)",
            "ignore_eos": True,
            "warmups": "2 x concurrency",
        },
        "chips": chips,
        "weight_dtype": "bfloat16",
        "kv_dtype": "bfloat16",
        "versions": {"guidellm": "0.8.1", "vllm": None, "vllm_neuron": None, "libtorch_neuronx_lite": None},
        "points": points,
        "stopped": None,
        "slo": {
            "ttft_s": 2.0,
            "tok_s_per_user": 10.0,
            "percentile": "p99",
            "source": "MLPerf Inference Llama-3.1-8B server latency limits (the catalog's default)",
        },
        "headline": {
            "concurrency": best["concurrency"],
            "tok_s_per_chip": best["tok_s_per_chip"],
            "usd_per_million_tokens": best["usd_per_million_tokens"],
        },
        "price": {
            "instance_type": record["hardware"]["instance_type"],
            "option": "on_demand",
            "usd_per_hour": usd * (16 if neuron else 1),
            "source": "a fixture's price",
            "as_of": "2026-11",
            "region": "us-east-2",
            "share": (1 / 16) if neuron else 1.0,
        },
    }
    for key, value in overrides.items():
        record[key] = value
    return record


def sample_speech_record(**overrides: Any) -> dict[str, Any]:
    """A valid automatic-speech-recognition neuron pass: four clips, its metric set, its graded
    transcript check; ``overrides`` as :func:`sample_record`'s."""
    record = sample_record(
        model_id="acme/whisper-small",
        task="automatic-speech-recognition",
        workload={"batch_size": 1, "input_tokens": 1500, "output_tokens": 64, "image_size": None, "audio_clips": 4},
        agreement={
            "reference": "cpu-float32",
            "logits_cosine": None,
            "prefix_tokens": None,
            "compared_tokens": None,
            "threshold": 0.02,
            "skipped": None,
            "transcript_wer": 0.0,
            "grade": "exact",
            "noise_reference": "cpu-bfloat16",
            "noise_wer": 0.0179,
        },  # fmt: skip
    )
    record["metrics"].update(
        ttft_s=None, latency_s={"p50": 0.21, "p90": 0.25}, decode_tokens_per_s=71.4, roofline_fraction=None,
        real_time_factor=0.19, audio_seconds=17.765, wer=0.054,
    )  # fmt: skip
    return _override(record, overrides)


def sample_warm_check(**overrides: Any) -> dict[str, Any]:
    """A valid second-machine warm check (``trncat warm-check --out``) of :func:`sample_record`'s row, verified on a
    real runner; ``overrides`` replace fields."""
    check = {
        "model_id": _BASE["model_id"], "revision": _BASE["revision"], "sha256": "f" * 64, "status": "verified",
        "hits": 2, "misses": 0, "first_call_s": 0.41, "message": "2 of 2 graph(s) served by the cache",
        "runner": "trn2-runner-2", "emulated": False, "checked_at": "2026-11-29T08:00:00+00:00",
        "machine": "i-0123456789abcdef2",
    }  # fmt: skip
    check.update(overrides)
    return check


#: The columns the dataset build fills from the row and the price table: those without a record path (flatten
#: leaves them null), but the record's id and the layout version.
BUILD_COLUMNS: tuple[str, ...] = tuple(
    name for name, path, _ in COLUMNS if not path and name not in ("record_id", "layout_version")
)
