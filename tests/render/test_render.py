"""Generated files: golden files, escaping of untrusted text, and the generated run.py really runs."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import render
from pipeline.backends.neuron import KEY_FILE
from pipeline.dataset import build
from pipeline.errors import PipelineError
from tests import GOLDEN
from tests.support.records import sample_failure, sample_record

UPDATE = os.environ.get("TRNCAT_UPDATE_GOLDEN") == "1"


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text, f"{name} changed; rerun with TRNCAT_UPDATE_GOLDEN=1 if intended"


def test_golden_run_py_and_requirements() -> None:
    neuron = sample_record(cores=8)
    _golden("run_neuron_8_cores.py", render.run_script(neuron))
    _golden("requirements_neuron.txt", render.requirements(neuron))
    vlm = sample_record(
        task="image-text-to-text",
        model_id="acme/vlm",
        workload={"batch_size": 1, "input_tokens": 64, "output_tokens": 32, "image_size": 224},
    )
    _golden("requirements_neuron_vlm.txt", render.requirements(vlm))
    cpu = sample_record(
        device="cpu",
        versions={"torch": "2.13.0+cpu", "torch_neuronx": None, "neuronx_cc": None},
        hardware={"name": "cpu-x86_64", "memory_per_core_bytes": None, "cores_available": None},
    )
    _golden("requirements_cpu.txt", render.requirements(cpu))


def test_golden_dataset_card(tmp_path: Path) -> None:
    build([sample_record(), sample_failure(model_id="acme/broken")], tmp_path / "ds")
    _golden("dataset_card.md", (tmp_path / "ds" / "README.md").read_text())


@pytest.mark.parametrize(
    "hostile",
    ["'; import os; os.system('x') #", '"""\nimport os\n"""', "\\", "\x00", "{{ 7*7 }}", "</script>", "\u2028"],
)
def test_python_literals_never_break_out(hostile: str) -> None:
    source = f"VALUE = {render.py_literal({'a': [hostile, 1, None, True, 2.5]})}\n"
    tree = ast.parse(source)
    assert len(tree.body) == 1
    assert ast.literal_eval(tree.body[0].value) == {"a": [hostile, 1, None, True, 2.5]}


def test_py_literal_refuses_other_types() -> None:
    with pytest.raises(PipelineError):
        render.py_literal(object())
    with pytest.raises(PipelineError):
        render.py_literal(float("nan"))


def test_requirements_refuse_injected_versions() -> None:
    record = sample_record(versions={"transformers": "5.0.0 --index-url https://evil.example"})
    with pytest.raises(PipelineError, match="refusing"):
        render.requirements(record)
    record = sample_record(versions={"neuronx_cc": "2.21\n--extra-index-url http://evil"})
    with pytest.raises(PipelineError, match="refusing"):
        render.requirements(record)
    # `$` matched before a trailing newline (issue 11.15): one more line in requirements.txt
    with pytest.raises(PipelineError, match="refusing"):
        render.requirement_lines(sample_record(versions={"transformers": "5.0.0\n"}))


def test_markdown_and_yaml_escaping() -> None:
    assert render.md_cell("a|b <img src=x onerror=alert(1)>\nnext") == r"a\|b \<img src=x onerror=alert\(1\)\> next"
    import yaml

    for hostile in ["x\n- injected: true", "a: b", "'quote\"", "#comment"]:
        assert yaml.safe_load(f"key: {render.yaml_scalar(hostile)}") == {"key": hostile}


def test_torchvision_pairs_with_torch() -> None:
    assert render.torchvision_for("2.9.1") == "0.24.1"
    assert render.torchvision_for("2.14.1+cu128") == "0.29.1"
    assert render.torchvision_for("nonsense") is None


def _run_script(record: dict, model: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Render the record's run.py into ``tmp_path`` and run it on the CPU over ``model``, offline; it must succeed."""
    script = tmp_path / "run.py"
    script.write_text(render.run_script(record))
    compile(script.read_text(), str(script), "exec")
    done = subprocess.run(
        [sys.executable, str(script), "--device", "cpu", "--model", str(model), "--iterations", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.parametrize("task", ["text-generation", "image-text-to-text"])
def test_generated_run_py_runs_on_cpu(task: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = sample_record(
        task=task,
        model_id="acme/tiny",
        workload={
            "batch_size": 1,
            "input_tokens": 12,
            "output_tokens": 4,
            "image_size": 48 if task != "text-generation" else None,
        },
    )
    done = _run_script(record, tiny_models[task], tmp_path)
    assert "tokens_per_s" in done.stdout and "latency_s" in done.stdout
    assert str(tiny_models[task]) in done.stdout


NEW_TASK_WORKLOADS = {
    "sentence-embeddings": (
        {"batch_size": 2, "input_tokens": 12, "output_tokens": 0, "image_size": None, "batch_sizes": [1, 2]},
        ("batch 1", "batch 2", "sentences_per_s", "embedding_dim 32"),
    ),
    "text-to-image": (
        {"batch_size": 1, "input_tokens": 77, "output_tokens": 0, "image_size": 32, "steps": 3, "guidance_scale": 0.0},
        ("32 x 32, 3 steps -> image.png", "seconds_per_image"),
    ),
}


@pytest.mark.parametrize("task", sorted(NEW_TASK_WORKLOADS))
def test_generated_run_py_of_the_new_tasks_runs_on_cpu(task: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    """Issue 13: each task's run.py runs its model with its own library, as the benchmark did."""
    workload, expected = NEW_TASK_WORKLOADS[task]
    library = {"sentence-embeddings": "sentence_transformers", "text-to-image": "diffusers"}[task]
    record = sample_record(task=task, model_id="acme/tiny", workload=workload, versions={library: "9.9.9"})
    assert f"{library.replace('_', '-')}==9.9.9" in render.requirements(record)
    done = _run_script(record, tiny_models[task], tmp_path)
    assert all(line in done.stdout for line in expected), done.stdout
    assert "trust_remote_code=False" in (tmp_path / "run.py").read_text()
    if task == "text-to-image":
        assert (tmp_path / "image.png").stat().st_size > 0


def _fake_wheel(folder: Path, name: str, version: str) -> None:
    """A minimal wheel of ``name==version`` (pip only reads its metadata in a dry run)."""
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(
            f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{dist}.dist-info/RECORD", "")


def test_neuron_requirements_carry_both_indexes_and_pip_reads_them(tmp_path: Path) -> None:
    record = sample_record(
        task="image-text-to-text",
        model_id="acme/vlm",
        workload={"batch_size": 1, "input_tokens": 64, "output_tokens": 32, "image_size": 224},
        versions={"torchvision": "0.24.0"},
    )
    text = render.requirements(record)
    lines = text.splitlines()
    assert "--extra-index-url https://pip.repos.neuron.amazonaws.com" in lines
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    assert "torchvision==0.24.0" in lines  # the runner's own torchvision, from the record
    (tmp_path / "requirements.txt").write_text(text)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    pins = [line.split("==") for line in lines if "==" in line]
    for name, version in pins:
        _fake_wheel(wheels, name, version)
    _fake_wheel(wheels, "pillow", "11.0.0")
    _fake_wheel(wheels, "nki", "0.7.0")  # unpinned: a record from before versions.nki
    assert "nki" in lines
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", "--find-links", str(wheels),
         "--disable-pip-version-check", "-r", str(tmp_path / "requirements.txt")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    would = done.stdout.splitlines()[-1]
    assert would.startswith("Would install") and all(f"{n}-{v}" in would for n, v in pins)


EMULATED_WORKLOADS = {
    "text-generation": {"batch_size": 1, "input_tokens": 12, "output_tokens": 4, "image_size": None},
    "image-text-to-text": {"batch_size": 1, "input_tokens": 12, "output_tokens": 4, "image_size": 48},
    **{task: workload for task, (workload, _) in NEW_TASK_WORKLOADS.items()},
}


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("task", "cores"), [(t, 1) for t in sorted(EMULATED_WORKLOADS)] + [("text-generation", 2)])
def test_generated_run_py_runs_on_the_neuron_emulator(
    task: str, cores: int, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    """Each task's run.py on device "neuron" of the Neuron emulator (tests/support/neuron/), as a user runs it;
    tensor parallel under torchrun: each rank reserves its own core and starts the neuron group before sharding."""
    from tests.support.neuron import Machine, build, environment

    root = build(tmp_path / "trn2", Machine.of("trn2.3xlarge"))
    record = sample_record(task=task, model_id="acme/tiny", workload=EMULATED_WORKLOADS[task], cores=cores)
    script = tmp_path / "run.py"
    script.write_text(render.run_script(record))
    command = [sys.executable, str(script)]
    if cores > 1:  # as its docstring says: the run's cores, one process per core
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(cores),
                   str(script)]  # fmt: skip
    env = {**environment(root), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if cores > 1:
        env["NEURON_RT_VISIBLE_CORES"] = f"0-{cores - 1}"
    done = subprocess.run([*command, "--model", str(tiny_models[task]), "--iterations", "1"], capture_output=True,
                          text=True, timeout=800, cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on neuron" in done.stdout and "first_call_s" in done.stdout
    # Compiled as the benchmark compiles: NEFFs in TorchNeuron's default cache of the (emulated) /tmp.
    assert list((root / "tmp" / "neff_cache").rglob("*.neff"))


def test_a_row_with_a_compiled_cache_renders_its_bundle_and_toolchain() -> None:
    """Issue 25: run.py carries the row's bundle (repo, commit, path, digest) and the toolchain it needs, as Python
    literals; a row of another device has no warm start at all."""
    from pipeline.records import bundle_path

    record = sample_record()
    digest = "5e" * 32
    record["compiled_cache"] = {"repo_id": "trncat/trncat-compiled", "revision": "7" * 40, "sha256": digest,
                                "path": bundle_path(record, digest), "bytes": 1234, "files": 2}  # fmt: skip
    for task in ("text-generation", "sentence-embeddings", "text-to-image"):
        script = render.run_script({**record, "task": task})
        namespace: dict = {"__name__": "run"}
        exec(compile(script, "run.py", "exec"), namespace)  # noqa: S102 - the generated script, defining only
        assert namespace["COMPILED_CACHE"] == record["compiled_cache"], task
        assert namespace["COMPILED_WITH"] == {"torch-neuronx": "2.14.0", "neuronx-cc": "2.21.0"}
        assert '"--cold"' in script and '"--require-warm"' in script and "compile_report()" in script
        assert "start_warm(args.cold, model=args.model, revision=revision, require=args.require_warm)" in script
        assert "check_warm(args.require_warm, first)" in script and namespace["KEY_RULE"]["file"] == KEY_FILE
    cpu = render.run_script(sample_record(device="cpu"))
    assert "start_warm" not in cpu and "--cold" not in cpu and "COMPILED_CACHE" not in cpu
