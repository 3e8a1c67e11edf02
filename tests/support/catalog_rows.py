"""A large synthetic catalog for the page's scale test and benchmark, drawn (seeded) in columns with numpy and Arrow.

Every task (half text-generation, a fifth image-text-to-text, the rest sentence-embeddings and text-to-image with
their own metrics), passes, failures and infrastructure errors, sizes from 100M to 400B parameters, a history with
an older toolchain for a third of the models, rankings per task and view, exclusions, and a short run.py per model.
The versions and hardware are the sample record's (:func:`tests.support.records.sample_record`). 100,000 rows
take about a second: the columns are drawn as arrays and turned into rows by Arrow, not row by row in Python.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa

from tests.support.records import sample_record

#: Task of row i by i % 20: 10 text-generation, 4 image-text-to-text, 3 sentence-embeddings, 3 text-to-image.
TASK_MIX = (
    ("text-generation",) * 10 + ("image-text-to-text",) * 4 + ("sentence-embeddings",) * 3 + ("text-to-image",) * 3
)
_FAMILIES = ("llama", "qwen", "gemma", "mistral", "phi")
_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Gemma2ForCausalLM", "MistralForCausalLM", "PhiForCausalLM")


def model_ids(n: int) -> list[str]:
    """The ids of a catalog of ``n`` rows, row by row (``org7/qwen-model-000007``; unique, in no sorted order)."""
    return [f"org{i % 97}/{_FAMILIES[i % 5]}-model-{i:06d}" for i in range(n)]


def _where(mask: np.ndarray, values: np.ndarray) -> pa.Array:
    """``values`` where ``mask``, else null."""
    return pa.array(values, mask=~mask)


def _columns(n: int, rng: np.random.Generator) -> dict[str, Any]:
    task = np.array(TASK_MIX)[np.arange(n) % len(TASK_MIX)]
    status = rng.choice(np.array(["pass", "fail", "error"]), n, p=[0.8, 0.15, 0.05])
    ok = status == "pass"
    params = (10 ** rng.uniform(8, 11.6, n)).astype(np.int64)
    cores = np.clip(2 ** np.round(np.sqrt(params * 2 / 20e9)), 1, 64).astype(np.int64)
    generation = np.isin(task, ["text-generation", "image-text-to-text"])
    embed, image = task == "sentence-embeddings", task == "text-to-image"
    finished = np.datetime64("2026-11-01T00:00:00", "us") + np.arange(n) * np.timedelta64(60, "s")
    p32 = rng.uniform(0.01, 0.5, n)
    columns: dict[str, Any] = {
        "model_id": model_ids(n),
        "task": task,
        "status": status,
        "params": params,
        "cores": cores,
        "plan_cores": cores,
        "plan_tp_degree": cores,
        "plan_fits": np.ones(n, dtype=bool),
        "plan_advice": np.where(cores > 1, "shard over the cores", "fits on one NeuronCore"),
        "compile_s": _where(ok, rng.uniform(20, 3000, n)),
        "wall_s": rng.uniform(3000, 4000, n),
        "warm_start_s": _where(ok, rng.uniform(5, 60, n)),
        "ttft_s": _where(ok & generation, rng.uniform(0.01, 2, n)),
        "decode_tokens_per_s": _where(ok & generation, rng.uniform(2, 300, n)),
        "agreement_logits_cosine": _where(ok & generation, rng.uniform(0.99, 1, n)),
        "sentences_per_s": _where(ok & embed, 32 / p32),
        "embedding_dim": _where(embed, rng.choice(np.array([384, 768, 1024]), n)),
        "agreement_embedding_cosine": _where(ok & embed, rng.uniform(0.99, 1, n)),
        "seconds_per_image": _where(ok & image, rng.uniform(0.5, 20, n)),
        "steps_per_s": _where(ok & image, rng.uniform(1, 30, n)),
        "vae_decode_s": _where(ok & image, rng.uniform(0.05, 1, n)),
        "image_size": _where(image, rng.choice(np.array([512, 768, 1024]), n)),
        "steps": _where(image, rng.choice(np.array([4, 28, 50]), n)),
        "agreement_denoiser_cosine": _where(ok & image, rng.uniform(0.98, 1, n)),
        "peak_device_memory_bytes": _where(ok, params * 2 + rng.integers(0, 10**9, n)),
        "architecture": np.array(_ARCHITECTURES)[np.arange(n) % 5],
        "model_type": np.array(_FAMILIES)[np.arange(n) % 5],
        "failure_stage": _where(~ok, rng.choice(np.array(["compile", "run", "oom", "load"]), n)),
        "failure_code": _where(~ok, rng.choice(np.array(["NCC_EOOM001", "NCC_EVRF001", "unsupported_op", "oom"]), n)),
        "failure_message": _where(~ok, np.char.add("error: ", np.char.multiply("x", rng.integers(20, 300, n)))),
        "finished_at": pa.array(finished, pa.timestamp("us", tz="UTC")),
    }
    return columns


def catalog_rows(n: int, *, seed: int = 0) -> dict[str, Any]:
    """:func:`pipeline.page.render_site`'s data arguments for ``n`` latest rows (one per model).

    Returns:
        ``latest``, ``history`` (the latest rows and, for every third model, an older passing run with an older
        compiler), ``rankings`` (per task: 300 selected, 1,000 trending, 5,000 downloaded, scaled by the task's
        share), ``exclusions`` (200 gated models, every task) and ``scripts`` (a short run.py and requirements.txt
        per model).
    """
    rng = np.random.default_rng(seed)
    columns = _columns(n, rng)
    table = pa.table(columns)
    for name, value in _sample_columns().items():
        table = table.append_column(name, pa.array([value] * n))
    latest = table.to_pylist()
    older = table.filter(pa.array(np.arange(n) % 3 == 0)).to_pylist()
    for row in older:
        row.update(status="pass", neuronx_cc_version="2.20.0", finished_at=row["finished_at"] - dt.timedelta(days=20))
    ids, tasks = columns["model_id"], columns["task"]
    rankings: list[dict[str, Any]] = []
    for task in dict.fromkeys(TASK_MIX):
        members = [ids[i] for i in np.flatnonzero(tasks == task)]
        share = TASK_MIX.count(task) / TASK_MIX.count("text-generation")
        for view, size in (("selected", 300), ("trending", 1000), ("downloads", 5000)):
            picked = rng.choice(len(members), min(len(members), int(size * share)), replace=False)
            rankings += [
                {"date": "2026-11-28", "task": task, "view": view, "rank": rank, "model_id": members[k]}
                for rank, k in enumerate(picked.tolist(), 1)
            ]
    exclusions = [
        {"model_id": f"gated/model-{i}", "task": None, "reason": "gated on the Hub", "kind": "gated"}
        for i in range(200)
    ]
    requirements = "torch-neuronx==2.14.0\nneuronx-cc==2.21.0\ntransformers==5.0.0\n"
    scripts = {m: {"run.py": f"MODEL_ID = {m!r}\n", "requirements.txt": requirements} for m in ids}
    return {
        "latest": latest,
        "history": latest + older,
        "rankings": rankings,
        "exclusions": exclusions,
        "scripts": scripts,
    }


def _sample_columns() -> dict[str, Any]:
    """The sample record's values that every synthetic row keeps: device, hardware, versions, source, threshold."""
    record = sample_record()
    versions, hardware = record["versions"], record["hardware"]
    return {
        "device": record["device"],
        "hardware": hardware["name"],
        "instance_type": hardware["instance_type"],
        "source": record["run"]["source"],
        "neuronx_cc_version": versions["neuronx_cc"],
        "torch_neuronx_version": versions["torch_neuronx"],
        "transformers_version": versions["transformers"],
        "agreement_threshold": record["agreement"]["threshold"],
    }
