"""The registries of backends and tasks, the Literal types, the schema enums and the workloads agree."""

from __future__ import annotations

from pipeline.bench.backends import REGISTRY as BACKENDS
from pipeline.bench.backends import get_backend
from pipeline.bench.tasks import REGISTRY as TASK_REGISTRY
from pipeline.bench.tasks import get_task
from pipeline.records import load_schema
from pipeline.types import DEVICES, DTYPES, SOURCES, STAGES, STATUSES, TASKS
from pipeline.workload import DEFAULT_WORKLOADS


def test_registries_match_the_types() -> None:
    assert tuple(BACKENDS) == DEVICES
    assert tuple(TASK_REGISTRY) == TASKS
    assert tuple(DEFAULT_WORKLOADS) == TASKS


def test_schema_enums_match_the_types() -> None:
    props = load_schema()["properties"]
    assert tuple(props["task"]["enum"]) == TASKS
    assert tuple(props["device"]["enum"]) == DEVICES
    assert tuple(props["status"]["enum"]) == STATUSES
    assert tuple(props["dtype"]["enum"]) == DTYPES
    assert tuple(props["run"]["properties"]["source"]["enum"]) == SOURCES
    assert tuple(props["failure"]["properties"]["stage"]["enum"]) == STAGES


def test_every_registered_task_and_backend_loads_with_its_name() -> None:
    for name in TASKS:
        assert get_task(name).name == name
    for name in DEVICES:
        assert get_backend(name).name == name


def test_importing_backends_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from pipeline.bench.backends import get_backend\n"
        "[get_backend(n) for n in ('cpu', 'cuda', 'neuron')]\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
