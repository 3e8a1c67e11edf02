"""``trncat serve``: one model folder served on this machine's device and swept, into one validated record.

The device's backend says the record's hardware and versions (as ``trncat bench`` records them); the engine is
the device's (``transformers serve`` on the CPU, ``vllm serve`` on cuda, vLLM with vllm-neuron on Trainium2).
Only a folder is served (the model's own files, fetched beforehand); nothing is downloaded here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.backends import get_backend, package_version
from pipeline.errors import ConfigError
from pipeline.prices import Pricing
from pipeline.records import dump_record, validate_record
from pipeline.serve.engine import EngineSpec, free_port, transformers_serve, vllm_serve
from pipeline.serve.script import serve_script
from pipeline.serve.sweep import ServingRun, serve_model
from pipeline.serve.workload import DEFAULT_SLO, ServiceLevel, ServingWorkload

#: Trainium2 chips hold 8 physical NeuronCores (4 logical at LNC=2; docs/neuron-facts.md, Trn2 architecture).
NEURONCORES_PER_CHIP = {2: 4, 1: 8}


def count_params(folder: Path) -> int | None:
    """Parameters in the folder's safetensors files, from their headers alone (no tensor is read)."""
    total = 0
    files = sorted(folder.glob("*.safetensors"))
    for path in files:
        with path.open("rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            if not 0 < size < 100 * 1024**2:
                return None
            header = json.loads(handle.read(size))
        for name, entry in header.items():
            if name != "__metadata__":
                count = 1
                for dim in entry["shape"]:
                    count *= int(dim)
                total += count
    return total if files else None


def engine_for(
    device: str, folder: Path, *, port: int, chips: int, dtype: str, lnc: int | None, max_model_len: int
) -> EngineSpec:
    """The device's engine command for ``folder``."""
    if device == "cpu":
        return transformers_serve(folder, port=port, device="cpu", dtype=dtype)
    if device == "cuda":
        return vllm_serve(
            folder, port=port, neuron=False, tensor_parallel=chips, dtype=dtype, max_model_len=max_model_len
        )
    if device == "neuron":
        cores = chips * NEURONCORES_PER_CHIP.get(lnc or 2, 4)
        return vllm_serve(
            folder,
            port=port,
            neuron=True,
            tensor_parallel=cores,
            dtype=dtype,
            lnc=lnc or 2,
            max_model_len=max_model_len,
        )
    raise ConfigError(f"no serving engine for device {device!r} (cpu, cuda, neuron)")


def serve_folder(
    folder: Path,
    *,
    device: str,
    workload: ServingWorkload,
    model_id: str,
    revision: str,
    out: Path,
    chips: int = 1,
    dtype: str | None = None,
    lnc: int | None = None,
    slo: ServiceLevel = DEFAULT_SLO,
    pricing: Pricing | None = None,
    instance_chips: int | None = None,
    instance_type: str | None = None,
    group: int | None = None,
    warm_restart: bool = True,
    source: str = "local",
    work: Path | None = None,
) -> dict[str, Any]:
    """Serve ``folder`` on ``device``, sweep it, write the record to ``out`` (and serve.sh beside it); the
    engine's logs and guidellm's scenarios and reports go to ``work`` (default ``<out>.serving/`` beside it).

    Raises:
        ConfigError: the folder is not a model folder, or the device has no engine.
    """
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{folder}: not a model folder (no config.json)")
    backend = get_backend(device)
    dtype = dtype or ("float32" if device == "cpu" else "bfloat16")
    max_model_len = workload.input_tokens + workload.output_tokens + 64
    port = free_port()
    spec = engine_for(device, folder, port=port, chips=chips, dtype=dtype, lnc=lnc, max_model_len=max_model_len)
    hardware = backend.hardware(cores=chips)
    if instance_type:
        hardware["instance_type"] = instance_type
    if hardware.get("accelerator") is None:
        hardware["accelerator"] = "cpu" if device == "cpu" else device
    run = ServingRun(
        model_id=model_id,
        revision=revision,
        tokenizer=folder,
        device=device,
        hardware=hardware,
        versions=backend.versions(),
        chips=chips,
        instance_chips=instance_chips,
        params=count_params(folder),
        weight_dtype=dtype,
        slo=slo,
        pricing=pricing,
        # on the CPU one guidellm run sweeps every point (its start-up dominates a tiny model's points)
        group=group or (len(workload.concurrencies) if device == "cpu" else 1),
        warm_restart=warm_restart,
        engine_versions={
            "vllm": package_version("vllm"),
            "vllm_neuron": package_version("vllm-neuron"),
            "libtorch_neuronx_lite": package_version("libtorch-neuronx-lite"),
        },
        source=source,
    )
    work = work or out.parent / f"{out.stem}.serving"

    def restart() -> EngineSpec:
        return engine_for(
            device, folder, port=free_port(), chips=chips, dtype=dtype, lnc=lnc, max_model_len=max_model_len
        )

    record = serve_model(spec, workload, run, work, restart=restart)
    problems = validate_record(record, allow_emulated=True)
    if problems:
        record.setdefault("notes", []).append("invalid: " + "; ".join(f"{f}: {m}" for f, m in problems)[:480])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_record(record), encoding="utf-8")
    if record.get("serving") and record["serving"]["points"]:
        (out.parent / f"{out.stem}.serve.sh").write_text(serve_script(record), encoding="utf-8")
    return record
