"""The diffusers pipeline gate: a model_index.json naming code outside diffusers/transformers is refused first.

diffusers loads each component ``[library, class]`` of model_index.json from ``diffusers.pipelines.<library>``
when diffusers has that pipeline module, and otherwise with ``importlib.import_module(library)``; a
``_class_name`` of ``[file, class]`` is a custom pipeline from the repo. The gate reads the JSON only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import RemoteCodeRefused
from pipeline.models.gates import check_pipeline_classes
from pipeline.testing import tiny
from tests import FIXTURES
from tests.support import hostile

PIPELINES = FIXTURES / "pipelines"
#: diffusers' pipeline modules these tests name (what ``hasattr(diffusers.pipelines, name)`` answers).
KNOWN_MODULES = {"stable_diffusion"}


def _folder(tmp_path: Path, index: object, name: str = "pipe") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "model_index.json").write_text(json.dumps(index), encoding="utf-8")
    return folder


def _gate(folder: Path) -> None:
    check_pipeline_classes(folder, pipeline_module=KNOWN_MODULES.__contains__)


def test_stable_diffusion_1_5_passes(tmp_path: Path) -> None:
    folder = tmp_path / "sd15"
    folder.mkdir()
    shutil.copy(PIPELINES / "stable-diffusion-v1-5.model_index.json", folder / "model_index.json")
    _gate(folder)  # its safety checker comes from diffusers' own stable_diffusion pipeline module


def test_a_folder_without_model_index_is_no_pipeline_and_passes(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _gate(empty)


def test_an_export_of_another_library_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ov"
    folder.mkdir()
    shutil.copy(PIPELINES / "optimum-openvino-lcm.model_index.json", folder / "model_index.json")
    with pytest.raises(RemoteCodeRefused, match="'optimum', which is neither diffusers, transformers nor"):
        _gate(folder)


SD = json.loads((PIPELINES / "stable-diffusion-v1-5.model_index.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"unet": ["unet_hostile", "HostileUNet"]}, "comes from 'unet_hostile'"),
        ({"unet": ["os", "system"]}, "comes from 'os'"),
        ({"_class_name": ["pipeline_hostile", "HostilePipeline"]}, "custom pipeline"),
        ({"_class_name": None}, "pipeline class 'None'"),
        ({"unet": ["diffusers.models", "UNet2DConditionModel"]}, "not [library, class] of plain names"),
        ({"unet": ["diffusers", "UNet2DConditionModel", "extra"]}, "not [library, class]"),
        ({"unet": ["diffusers", "../../evil"]}, "not [library, class]"),
        ({"unet": [None, "UNet2DConditionModel"]}, "not [library, class]"),
    ],
)
def test_components_outside_diffusers_and_transformers_are_refused(
    tmp_path: Path, change: dict[str, object], words: str
) -> None:
    with pytest.raises(RemoteCodeRefused, match=words.replace("[", r"\[").replace("(", r"\(")):
        _gate(_folder(tmp_path, {**SD, **change}))


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '"StableDiffusionPipeline"'])
def test_an_unreadable_model_index_is_refused(tmp_path: Path, text: str) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "model_index.json").write_text(text, encoding="utf-8")
    with pytest.raises(RemoteCodeRefused, match="model_index.json"):
        _gate(folder)


def test_the_gate_refuses_before_any_import(tmp_path: Path) -> None:
    """In a fresh interpreter with the folder on sys.path: refused, the repo's module never ran, nothing heavy."""
    sentinel = tmp_path / "hostile-code-ran"
    folder = hostile.add_hostile_pipeline_index(tmp_path / "hostile", sentinel=sentinel)
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(folder)!r})\n"
        "from pathlib import Path\n"
        "from pipeline.models.gates import check_pipeline_classes\n"
        "from pipeline.errors import RemoteCodeRefused\n"
        "try:\n"
        f"    check_pipeline_classes(Path({str(folder)!r}))\n"
        "except RemoteCodeRefused as exc:\n"
        "    print('refused:', exc)\n"
        "heavy = sorted({'torch', 'transformers', 'unet_hostile'} & set(sys.modules))\n"
        "print('imported:', heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "refused: model_index.json: component 'unet' comes from 'unet_hostile'" in done.stdout, done.stdout
    assert "imported: []" in done.stdout
    assert not sentinel.exists()


def test_the_benchmark_records_a_hostile_pipeline_as_a_load_failure(tmp_path: Path) -> None:
    """The harness runs the gate before the child: the record says fail at load (remote_code)."""
    from pipeline.backends import get_backend
    from pipeline.bench.run import BenchOptions, bench_model
    from pipeline.records import validate_record
    from pipeline.workload import Workload

    sentinel = tmp_path / "hostile-code-ran"
    folder = tmp_path / "hostile"
    tiny.build_tiny_llama(folder)
    hostile.add_hostile_pipeline_index(folder, sentinel=sentinel)
    record = bench_model(
        str(folder),
        task="text-generation",
        backend=get_backend("cpu"),
        out=tmp_path / "record.json",
        options=BenchOptions(workload=Workload(batch_size=1, input_tokens=8, output_tokens=4), iterations=1),
    )
    assert validate_record(record) == []
    assert (record["status"], record["failure"]["stage"], record["failure"]["code"]) == ("fail", "load", "remote_code")
    assert "unet_hostile" in record["failure"]["message"]
    assert not sentinel.exists()
