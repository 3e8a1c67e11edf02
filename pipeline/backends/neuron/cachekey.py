"""The compiled-cache bundle's key manifest: what its NEFFs are keyed by, so a warm start can be checked first.

vLLM Neuron documents its compile cache's key (docs/neuron-facts.md, "Compile cache keys"): the FX graph
structure, the input tensors' metadata (dtype, shape, stride), the torch_neuronx, neuronx-cc and NKI versions,
the compiler arguments, the platform target and the collective replica groups. TorchNeuron's own persistent
cache documents no key; trncat records those same parts for every bundle (:func:`build_key`), in the record
(``compiled_cache_key``) and inside the bundle (:data:`KEY_FILE`), with the LNC and the core count beside them.

trncat cannot read a graph's input signature from TorchNeuron (docs silent), so the manifest records what fixes
every graph's input shapes and dtypes instead: the model's config shape fields (:func:`config_shapes`), the dtype,
the task and its workload. Under ``torch.compile`` the module's parameters are lifted as graph inputs, so a
graph's key holds their shapes and dtypes, never their values: a fine-tune with its base's config, dtype,
workload and toolchain has its base's key (an inference from the docs; the emulated end-to-end test plays it).

The generated ``run.py`` carries :func:`key_rule` (the fields, as data) and checks the key against the model it
loads before it uses a bundle; :func:`key_differences` is the same comparison here (``trncat check``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.backends.base import CompiledRun

#: The manifest's file inside the bundle (at its root, beside the cache's ``ab/`` folders): JSON, data only.
KEY_FILE = "trncat-cache-key.json"
#: The manifest's own layout version.
KEY_VERSION = 1
#: The key's parts in the order they are compared and reported. ``graphs`` is the cache's own entry names (what
#: the NEFFs are stored under); it is recorded but never compared (a changed graph shows as a miss).
KEY_PARTS = (
    "architecture",
    "config_shapes",
    "dtype",
    "task",
    "workload",
    "torch_neuronx",
    "neuronx_cc",
    "nki",
    "compiler_args",
    "target",
    "lnc",
    "cores",
    "replica_groups",
)
#: Config fields that size a graph's inputs (integers, or lists of integers), looked up at the top level and in
#: the nested configs of :data:`SUBCONFIGS` (``text_config.hidden_size``).
SHAPE_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "image_size",
    "patch_size",
    "num_channels",
    "projection_dim",
    "sample_size",
    "in_channels",
    "out_channels",
    "cross_attention_dim",
    "block_out_channels",
    "layers_per_block",
    "attention_head_dim",
)
SUBCONFIGS = ("text_config", "vision_config")
#: Where a task's model keeps the config that sizes its compiled graph (the first that exists): a diffusers
#: pipeline compiles its denoiser.
CONFIG_FILES: dict[str, tuple[str, ...]] = {
    "text-to-image": ("unet/config.json", "transformer/config.json"),
}
DEFAULT_CONFIG_FILES = ("config.json",)


def _shape_value(value: Any) -> bool:
    """An integer, or a list of them that is not empty (a bool is none)."""
    values = value if isinstance(value, list) and value else [value]
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def config_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """The shape fields of a config (``{"hidden_size": 64, "text_config.vocab_size": 300, ...}``), sorted."""
    out: dict[str, Any] = {}
    for prefix, part in [("", config)] + [(f"{name}.", config.get(name)) for name in SUBCONFIGS]:
        if not isinstance(part, dict):
            continue
        for name in SHAPE_FIELDS:
            if _shape_value(part.get(name)):
                out[prefix + name] = part[name]
    return dict(sorted(out.items()))


def architecture(config: dict[str, Any]) -> str | None:
    """The config's first architecture (``LlamaForCausalLM``), or for a pipeline component its class name."""
    names = config.get("architectures")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    name = config.get("_class_name")
    return name if isinstance(name, str) else None


def read_config(folder: Path, task: str) -> dict[str, Any]:
    """The config that sizes the task's compiled graph, from a model folder ({} when it has none or it is bad)."""
    for name in CONFIG_FILES.get(task, DEFAULT_CONFIG_FILES):
        path = folder / name
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError):
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def build_key(
    run: CompiledRun, *, cache_dir: Path, versions: dict[str, Any], compiler_args: str, target: str, lnc: int
) -> dict[str, Any]:
    """The key manifest of the bundle packed from ``cache_dir``, the compile cache of ``run`` (see the module's
    docstring; the config is the one :func:`read_config` finds in the run's model folder).

    ``target`` is the instance family (vLLM Neuron's example of the part: ``trn2``). ``replica_groups`` is the one
    group of the run's ranks (tensor parallelism over its ``cores`` processes), or empty for one core: trncat runs no
    other process-group layout.
    """
    config = read_config(run.model_dir, run.task)
    return {
        "key_version": KEY_VERSION,
        "graphs": sorted(p.name.removesuffix(".neff") for p in cache_dir.rglob("*.neff") if p.is_file()),
        "architecture": architecture(config),
        "config_shapes": config_shapes(config),
        "dtype": run.dtype,
        "task": run.task,
        "workload": dict(sorted(run.workload.items())),
        "torch_neuronx": versions.get("torch_neuronx"),
        "neuronx_cc": versions.get("neuronx_cc"),
        "nki": versions.get("nki"),
        "compiler_args": " ".join(compiler_args.split()),
        "target": target,
        "lnc": lnc,
        "cores": run.cores,
        "replica_groups": [list(range(run.cores))] if run.cores > 1 else [],
    }


def key_differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Each key part where ``actual`` differs from ``expected``, named with both values (``[]``: the same key).

    A part ``actual`` does not state (absent) is not compared; ``config_shapes`` names each field that differs.
    """
    out = []
    for part in KEY_PARTS:
        if part not in actual:
            continue
        want, have = expected.get(part), actual[part]
        if want == have:
            continue
        if part == "config_shapes" and isinstance(want, dict) and isinstance(have, dict):
            fields = sorted(set(want) | set(have))
            changed = [f"{f} {want.get(f)} -> {have.get(f)}" for f in fields if want.get(f) != have.get(f)]
            out.append(f"config_shapes ({', '.join(changed)})")
        else:
            out.append(f"{part} ({want!r} -> {have!r})")
    return out


def key_rule() -> dict[str, Any]:
    """What the generated run.py needs to build the same key from the model it loads (it cannot import trncat)."""
    return {
        "file": KEY_FILE,
        "parts": list(KEY_PARTS),
        "shape_fields": list(SHAPE_FIELDS),
        "subconfigs": list(SUBCONFIGS),
        "config_files": {task: list(files) for task, files in CONFIG_FILES.items()},
        "default_config_files": list(DEFAULT_CONFIG_FILES),
    }
