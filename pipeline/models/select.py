"""Which files of a repo a benchmark fetches, by exact path, and the bytes they may take.

huggingface_hub matches ``allow_patterns`` with ``fnmatch``, whose ``*`` crosses ``/``: ``*.json`` also takes
``junk/a/b.json``, and a repo with nested junk filled 24 MiB for a 0.5 MiB model. So the files are chosen here
from the repo's listing, each pattern anchored to one folder (``*`` never crosses ``/``), and only the weights
the library loads are taken: the shards a ``*.safetensors.index.json`` lists, else the one ``model.safetensors``
(``diffusion_pytorch_model.safetensors`` for a diffusers component). A sentence-transformers model adds its
modules' folders (``modules.json``), a diffusers pipeline its components' (``model_index.json``). Then the
listing's sizes are compared with what the plan says the checkpoint holds, and with the free disk, before
anything is downloaded (:func:`size_problem`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: Files beside the weights a benchmark needs, in each folder it fetches (code files, ``*.py``, never).
SIDE_FILES = ("*.json", "*.model", "*.txt", "*.jinja", "*.tiktoken")
#: The base names of the weights a library loads: transformers' ``model``, diffusers' ``diffusion_pytorch_model``.
_WEIGHT_NAMES = ("model", "diffusion_pytorch_model")
#: How far a checkpoint may outgrow the plan's checkpoint bytes: a config may say bfloat16 of weights stored in
#: float32 (twice the bytes), and headers and tied copies add a little; beyond that the repo holds weights the
#: model does not load.
WEIGHT_SLACK = 2.5
#: A checkpoint smaller than this is never refused for its size (headers, a tiny test model's rounding).
WEIGHT_FLOOR_BYTES = 1 << 20
#: Everything beside the weights, together: configs and tokenizers are a few MB (a large vocabulary's
#: tokenizer.json tens of MB).
MAX_SIDE_BYTES = 64 << 20
#: Free disk left beside a download: the compile cache, the reference answers and the logs of the run.
DISK_RESERVE_BYTES = 1 << 30


def matches(path: str, pattern: str) -> bool:
    """``fnmatch`` per path segment: ``*`` never crosses ``/`` (``*.json`` is a file of the root only)."""
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(parts, wanted, strict=True))


def _in(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _plain(name: object) -> bool:
    return isinstance(name, str) and bool(name) and "/" not in name and name not in {".", ".."}


def weight_files(sizes: Mapping[str, int], folder: str, read_json: Callable[[str], Any]) -> list[str]:
    """The weights a library loads from ``folder`` of the repo: an index's shards, else its one file; a folder
    without safetensors falls back to PyTorch pickles the same way (transformers loads them weights-only)."""
    for suffix, bases in (("safetensors", _WEIGHT_NAMES), ("bin", (*_WEIGHT_NAMES, "pytorch_model"))):
        for base in bases:
            index = _in(folder, f"{base}.{suffix}.index.json")
            if index in sizes:
                weight_map = (read_json(index) or {}).get("weight_map") or {}
                names = weight_map.values() if isinstance(weight_map, dict) else ()
                return sorted({_in(folder, n) for n in names if _plain(n)} & set(sizes))
            if _in(folder, f"{base}.{suffix}") in sizes:
                return [_in(folder, f"{base}.{suffix}")]
        # no file of a known name: every safetensors file of the folder, as before
        found = [p for p in sizes if suffix == "safetensors" and matches(p, _in(folder, "*.safetensors"))]
        if found:
            return sorted(found)
    return []


def side_files(sizes: Mapping[str, int], folder: str) -> list[str]:
    """The configs, tokenizer and templates of ``folder`` (anchored: nothing of a folder below it)."""
    return sorted(p for p in sizes if any(matches(p, _in(folder, pattern)) for pattern in SIDE_FILES))


def module_folders(sizes: Mapping[str, int], read_json: Callable[[str], Any]) -> list[str]:
    """The folders of a sentence-transformers model's modules (``modules.json``), plain relative paths only."""
    if "modules.json" not in sizes:
        return []
    modules = read_json("modules.json")
    paths = [m.get("path") for m in modules if isinstance(m, dict)] if isinstance(modules, list) else []
    return sorted({p.strip("/") for p in paths if isinstance(p, str) and p.strip("/") and all(
        _plain(part) for part in p.strip("/").split("/"))})  # fmt: skip


def choose(
    sizes: Mapping[str, int], folders: Sequence[str], read_json: Callable[[str], Any]
) -> tuple[list[str], list[str]]:
    """(every file to fetch, the weights among them) from ``folders`` of the repo (``""`` is its root)."""
    weights = {path for folder in folders for path in weight_files(sizes, folder, read_json)}
    files = {path for folder in folders for path in side_files(sizes, folder)}
    return sorted(files | weights), sorted(weights)


def size_problem(
    sizes: Mapping[str, int], files: list[str], weights: list[str], *, expected_bytes: int | None, free_bytes: int
) -> str | None:
    """Why the chosen files must not be downloaded (more weight than the plan's checkpoint, more beside them
    than configs take, more than the free disk), or None."""
    weight = sum(sizes[p] for p in weights)
    side = sum(sizes[p] for p in files) - weight
    if expected_bytes is not None and weight > max(WEIGHT_FLOOR_BYTES, WEIGHT_SLACK * expected_bytes):
        return (f"the listing's weights are {weight} bytes, more than {WEIGHT_SLACK:g} times the {expected_bytes} "
                f"bytes the plan counts for the checkpoint")  # fmt: skip
    if side > MAX_SIDE_BYTES:
        return f"the files beside the weights are {side} bytes, more than {MAX_SIDE_BYTES}"
    if weight + side + DISK_RESERVE_BYTES > free_bytes:
        return f"{weight + side} bytes to download and {DISK_RESERVE_BYTES} to keep free, but {free_bytes} are free"
    return None
