"""Serving jobs: a text-generation model whose batch-1 row passed on the queue's device gets a serving job (the
sweep of ``trncat serve``) on the same runner class, unless the dataset already holds its serving row at this
harness version and workload; on the GPU class the same rule makes each Trainium2 serving row's GPU twin (the
Selected list's ``gpu: true`` models, whose batch-1 GPU rows passed), with the same harness and workload.

An image-text-to-text row that passed gets one too, with the image workload, when its architecture is one vLLM
Neuron documents serving with image input (:data:`VLLM_NEURON_IMAGE_ARCHITECTURES`); its GPU twin follows the same
gate, so a twin exists only beside a Trainium2 serving row it can be compared with.

Every job serves with the stage matrix's flag-only features on (``features``: ``trncat serve --feature``, issue 49):
a flag on the job the model gets anyway, not a job of its own, because the engine's start (its compile) is most of
a job's cost, prefix caching is on by default in vLLM and vLLM Neuron (the flags state it, the sweep is the same),
and the dataset keeps one serving record per model, hardware and workload (a second job's record would replace the
first). What the feature adds is its probe after the sweep, :data:`PRIOR_FEATURE_S` a feature.

A job's seconds are a prior until serving history exists: the engine's start (its compile, on Trainium2) plus,
per point, each stream's requests one after another at :data:`PRIOR_TPOT_S` a token, plus the features' probes.
The estimate counts these jobs with the others (``trncat queue --serving 1k/1k --estimate``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pipeline
from pipeline.errors import ConfigError
from pipeline.hardware import DEFAULT_INSTANCE, INSTANCE_NAMES, get_instance
from pipeline.types import FLAG_FEATURES

if TYPE_CHECKING:  # typing only: the queue reads a serving workload's contract, and never imports serve
    from pipeline.serve import ServingWorkload

#: The prior: seconds an engine takes to be ready (vLLM Neuron compiles its buckets at start), and per token.
PRIOR_START_S = {"neuron": 1800.0, "cuda": 300.0, "cpu": 60.0}
PRIOR_TPOT_S = 0.03
#: A feature's probe (pipeline/serve/features.py): 8 requests of one output token, each a prefill of up to the
#: context, one after another; a minute bounds it on the prior.
PRIOR_FEATURE_S = 60.0
#: The image-text-to-text architectures vLLM Neuron documents serving with image input: its "Feature and model
#: compatibility matrix" marks "Multimodal (image input)" for Qwen3-VL alone (GPT-OSS: no), and its Qwen3-VL
#: (Dense) recipe names the Qwen3-VL-8B/32B Instruct/Thinking checkpoints on Trn2 and Trn3; the class is
#: transformers' for model_type qwen3_vl (docs/neuron-facts.md, "vLLM Neuron", the image-text-to-text row).
VLLM_NEURON_IMAGE_ARCHITECTURES: frozenset[str] = frozenset({"Qwen3VLForConditionalGeneration"})


def serving_seconds(workload: ServingWorkload, *, device: str) -> float:
    """The prior's seconds of one serving job."""
    per_point = (workload.warmup_per_stream + workload.measured_per_stream) * workload.output_tokens * PRIOR_TPOT_S
    probes = PRIOR_FEATURE_S * len(FLAG_FEATURES)
    return PRIOR_START_S.get(device, 300.0) + per_point * len(workload.concurrencies) + probes


def servable(row: Mapping[str, Any]) -> bool:
    """Whether a passing batch-1 row's model gets a serving job: a text-generation one, or an image-text-to-text one
    of an architecture vLLM Neuron serves with images."""
    if row.get("task") == "text-generation":
        return True
    return row.get("task") == "image-text-to-text" and row.get("architecture") in VLLM_NEURON_IMAGE_ARCHITECTURES


def _served(records: Iterable[Mapping[str, Any]], workload: str) -> set[tuple[str, str]]:
    """(model id without case, hardware) of the serving rows of ``workload`` this harness version made."""
    return {
        (str(record["model_id"]).casefold(), str(record["hardware"]["name"]))
        for record in records
        if ((record.get("serving") or {}).get("workload") or {}).get("name") == workload
        and record.get("status") in ("pass", "fail")
        and (record.get("versions") or {}).get("pipeline") == pipeline.__version__
    }


def _cores_per_chip(instance: str, core_config: Any) -> int:
    """NeuronCores per chip of ``instance`` (the default trn2's when unknown) at the LNC of a row's ``core_config``
    (``lnc=N``; None: the family's default): 8 at LNC=1, 4 at LNC=2 on trn2 (docs/neuron-facts.md)."""
    text = str(core_config or "")
    lnc = int(text[4:]) if text.startswith("lnc=") and text[4:].isdigit() else None
    known = instance if instance in INSTANCE_NAMES else DEFAULT_INSTANCE
    try:
        return get_instance(known, lnc=lnc).cores_per_chip
    except ConfigError:  # an LNC the family does not have: its default's
        return get_instance(known).cores_per_chip


def serving_jobs(
    latest: Iterable[Mapping[str, Any]],
    serving: Iterable[Mapping[str, Any]],
    *,
    device: str,
    workload: ServingWorkload,
    instance: str,
    family: str = "trn2",
    image_workload: ServingWorkload | None = None,
) -> list[dict[str, Any]]:
    """The serving jobs of the queue's device: one per passing text-generation row without its serving row, and
    (with ``image_workload``) one per passing image-text-to-text row that :func:`servable` admits.

    Args:
        latest: The dataset's latest rows (flat).
        serving: The dataset's serving records (``data/serving.json``).
        device: ``neuron`` (the trn2 class) or ``cuda`` (the GPU class: the twins).
        workload: The serving workload the jobs run.
        instance: The instance the runners are on (recorded in the entry).
        family: The Trainium runner family (``trn2``) of a neuron job's label.
        image_workload: The image serving workload an image-text-to-text row's job runs (None: no such jobs).
    """
    serving = list(serving)
    contracts = {"text-generation": workload}
    if image_workload is not None:
        contracts["image-text-to-text"] = image_workload
    done = {task: _served(serving, c.name) for task, c in contracts.items()}
    jobs = []
    for row in latest:
        task = str(row.get("task"))
        if task not in contracts or not servable(row) or row.get("status") != "pass" or row.get("device") != device:
            continue
        contract = contracts[task]
        if (str(row["model_id"]).casefold(), str(row["hardware"])) in done[task]:
            continue
        cores = int(row.get("cores") or 1)
        if device == "neuron":  # whole chips: the row's cores at its LNC; the engine's at serve's (the default)
            chips = max(1, -(-cores // _cores_per_chip(instance, row.get("core_config"))))
            cores = chips * _cores_per_chip(instance, None)
            runner = f"{family}-{1 << (cores - 1).bit_length()}c"
        else:
            runner, chips = f"gpu-{cores}g", cores
        org, name = str(row["model_id"]).split("/")
        revision = str(row["revision"])
        jobs.append(
            {
                "model_id": row["model_id"],
                "revision": revision,
                "task": task,
                "device": device,
                "mode": "serving",
                "workload": contract.name,
                # the batch-1 row's weights dtype (the record's `dtype`, which publish matches with the entry's)
                "dtype": str(row.get("dtype") or "bfloat16"),
                "chips": chips,
                "cores": cores,
                "runner": runner,
                "instance": instance,
                "artifact": f"{org}--{name}--serving--{revision[:12]}" + ("--cuda" if device == "cuda" else ""),
                "features": list(FLAG_FEATURES),
                "note": f"serving sweep ({contract.name}) of a passing row; harness {pipeline.__version__}",
                "predicted_s": round(serving_seconds(contract, device=device)),
            }
        )
    return sorted(jobs, key=lambda j: (-j["cores"], j["model_id"]))
