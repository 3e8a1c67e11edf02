"""The registries of backends and tasks, the Literal types, the schema enums and the workloads agree."""

from __future__ import annotations

import pytest

from pipeline.backends import get_backend
from pipeline.backends.base import REGISTRY as BACKENDS
from pipeline.bench.tasks import TaskRunner, get_task
from pipeline.records import load_schema
from pipeline.taskspec import REGISTRY as TASK_REGISTRY
from pipeline.types import DEVICES, DTYPES, FLAG_FEATURES, MATRIX_FEATURES, SOURCES, STAGES, STATUSES, TASKS


def test_registries_match_the_types() -> None:
    assert tuple(BACKENDS) == DEVICES
    assert tuple(TASK_REGISTRY) == TASKS
    assert all(name == spec.name for name, spec in TASK_REGISTRY.items())


def test_schema_enums_match_the_types() -> None:
    props = load_schema()["properties"]
    assert tuple(props["task"]["enum"]) == TASKS
    assert tuple(props["device"]["enum"]) == DEVICES
    assert tuple(props["status"]["enum"]) == STATUSES
    assert tuple(props["dtype"]["enum"]) == DTYPES
    assert tuple(props["run"]["properties"]["source"]["enum"]) == SOURCES
    assert tuple(props["failure"]["properties"]["stage"]["enum"]) == STAGES
    feature = props["serving"]["properties"]["features"]["items"]["properties"]["name"]
    assert tuple(feature["enum"]) == FLAG_FEATURES


def test_the_flag_only_features_are_matrix_features_each_with_its_flags() -> None:
    from pipeline.serve import FEATURE_FLAGS

    assert tuple(FEATURE_FLAGS) == FLAG_FEATURES and set(FLAG_FEATURES) <= set(MATRIX_FEATURES)


def test_every_registered_task_loads_and_every_backend_with_its_name() -> None:
    for name in TASKS:
        runner = get_task(name)  # the class its spec names, not another task's
        assert isinstance(runner, TaskRunner)
        assert f"{type(runner).__module__}:{type(runner).__name__}" == TASK_REGISTRY[name].runner
    for name in DEVICES:
        assert get_backend(name).name == name


def test_importing_backends_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from pipeline.backends import get_backend\n"
        "[get_backend(n) for n in ('cpu', 'cuda', 'neuron')]\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_new_tasks_have_their_workloads_and_hub_sources() -> None:
    import pytest

    from pipeline.errors import ConfigError
    from pipeline.taskspec import TASK_SOURCES, default_workload
    from pipeline.workload import Workload

    assert tuple(TASK_SOURCES) == TASKS
    embeddings, image = default_workload("sentence-embeddings"), default_workload("text-to-image")
    assert (embeddings.input_tokens, embeddings.batch_sizes, embeddings.batch_size) == (128, (1, 32), 32)
    assert (image.steps, image.batch_size, image.image_size, image.output_tokens) == (20, 1, 512, 0)
    assert embeddings.to_dict()["batch_sizes"] == [1, 32] and "steps" not in embeddings.to_dict()
    # a generation workload is the object it was under schema 1.1
    assert set(default_workload("text-generation").to_dict()) == {
        "batch_size", "input_tokens", "output_tokens", "image_size"
    }  # fmt: skip
    assert TASK_SOURCES["sentence-embeddings"].pipeline_tags == ("sentence-similarity", "feature-extraction")
    assert TASK_SOURCES["text-to-image"].library == "diffusers"
    for bad in ({"steps": 0}, {"batch_sizes": (2, 8)}, {"batch_sizes": ()}, {"output_tokens": -1}):
        with pytest.raises(ConfigError):
            Workload(**bad)  # type: ignore[arg-type]


def test_a_bench_spec_round_trips_the_workloads_of_every_task() -> None:
    from pipeline.bench.spec import BenchSpec
    from pipeline.workload import Workload

    defaults = [(name, spec.workload) for name, spec in TASK_REGISTRY.items()]
    workloads = [*defaults, ("text-to-image", Workload(steps=4, guidance_scale=0.0, image_size=64))]
    for task, workload in workloads:
        spec = BenchSpec(path="/m", task=task, device="cpu", dtype="float32", workload=workload)
        assert BenchSpec.from_json(spec.to_json()) == spec


def test_each_task_metric_set_is_the_schema_s() -> None:
    """The metrics only one task carries (its spec's) are those the schema requires of that task."""
    from pipeline.bench.harness import metric_fields
    from pipeline.taskspec import REGISTRY

    rules = load_schema()["allOf"]
    for task, spec in REGISTRY.items():
        record_rules = [r for r in rules if "status" not in r["if"]["properties"]]
        own = [
            rule["then"]["properties"]["metrics"].get("required", [])
            for rule in record_rules
            if rule["if"]["properties"].get("task", {}).get("const") == task
        ]
        assert (tuple(own[0]) if own else ()) == spec.metric_fields, task
        fields = metric_fields(task)
        assert set(spec.metric_fields) <= set(fields) and "params" in fields
        others = {m for other in REGISTRY.values() if other is not spec for m in other.metric_fields}
        assert not others & set(fields), task


def test_an_unknown_task_gets_one_message_wherever_it_comes_in() -> None:
    from pipeline.bench.spec import BenchSpec
    from pipeline.discover import check_task_view
    from pipeline.errors import ConfigError
    from pipeline.taskspec import default_workload, task_source

    message = f"unknown task 'text-to-video'; choose from {', '.join(TASKS)}"
    for call in (
        lambda: task_source("text-to-video"),
        lambda: default_workload("text-to-video"),
        lambda: check_task_view("text-to-video", "trending"),
        lambda: BenchSpec(path="x", task="text-to-video", device="cpu", dtype="float32"),
    ):
        with pytest.raises(ConfigError) as caught:
            call()
        assert str(caught.value) == message
