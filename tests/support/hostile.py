"""Hostile and broken model folders for the gates' and the harness's tests: a config the library refuses, a model
type no release knows, remote code and a pipeline module that would run on import, corrupt weights, a missing
tokenizer. Each builder writes or changes files only; nothing here downloads anything."""

from __future__ import annotations

import json
from pathlib import Path


def break_config(folder: Path | str) -> Path:
    """Break a built model's config so that the library's own code refuses it at load: a hidden size its
    attention heads cannot divide (a transformers or sentence-transformers model), or a UNet whose block types
    do not match its block channels (a diffusers pipeline)."""
    folder = Path(folder)
    if (folder / "model_index.json").is_file():
        path = folder / "unet" / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        config["down_block_types"] = [*config["down_block_types"], "DownBlock2D"]
    else:
        path = folder / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        config["hidden_size"] = int(config.get("hidden_size", 32)) + 1
    path.write_text(json.dumps(config), encoding="utf-8")
    return folder


def build_unknown_architecture(folder: Path | str) -> Path:
    """A folder whose config names a model type no transformers release knows."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "trncat-nonexistent", "architectures": ["NonexistentForCausalLM"], "hidden_size": 8}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def build_remote_code_model(folder: Path | str, *, sentinel: Path | str) -> Path:
    """A folder that only loads with remote code; importing its code would create ``sentinel``.

    The test asserts the sentinel never appears: the harness must refuse before importing anything.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "model_type": "trncat-remote",
        "architectures": ["RemoteForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_remote.RemoteConfig",
            "AutoModelForCausalLM": "modeling_remote.RemoteForCausalLM",
        },
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    payload = f"import pathlib\npathlib.Path({str(sentinel)!r}).write_text('imported')\n"
    (folder / "configuration_remote.py").write_text(payload, encoding="utf-8")
    (folder / "modeling_remote.py").write_text(payload, encoding="utf-8")
    return folder


def add_hostile_pipeline_index(folder: Path | str, *, sentinel: Path | str) -> Path:
    """Give ``folder`` a diffusers ``model_index.json`` whose UNet comes from the repo's own module.

    diffusers would ``importlib.import_module("unet_hostile")`` for it; importing that module would create
    ``sentinel``. The test asserts the sentinel never appears: the harness must refuse before importing anything.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    index = {
        "_class_name": "StableDiffusionPipeline",
        "_diffusers_version": "0.35.0",
        "scheduler": ["diffusers", "PNDMScheduler"],
        "text_encoder": ["transformers", "CLIPTextModel"],
        "tokenizer": ["transformers", "CLIPTokenizer"],
        "unet": ["unet_hostile", "HostileUNet"],
        "vae": ["diffusers", "AutoencoderKL"],
    }
    (folder / "model_index.json").write_text(json.dumps(index), encoding="utf-8")
    payload = f"import pathlib\npathlib.Path({str(sentinel)!r}).write_text('imported')\n"
    (folder / "unet_hostile.py").write_text(payload, encoding="utf-8")
    return folder


def corrupt_weights(folder: Path | str) -> Path:
    """Overwrite the safetensors file of a built model with garbage of the same name."""
    folder = Path(folder)
    for weights in folder.glob("*.safetensors"):
        weights.write_bytes(b"\xff" * 64 + b"not a safetensors file")
    return folder


def remove_tokenizer(folder: Path | str) -> Path:
    """Delete the tokenizer files of a built model."""
    folder = Path(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        (folder / name).unlink(missing_ok=True)
    return folder
