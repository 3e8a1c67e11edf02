"""The record classes and their JSON schemas cannot drift: each class is compared with its schema field by field."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import pytest

from pipeline.records import OPTIONAL_METRICS, ResultRecord, RunInfo, Serving, WarmCheck, load_schema, validate_record
from pipeline.records.types import has_default
from tests.support.records import sample_record, sample_serving

#: Which class each schema, and each section of it, is.
SCHEMA_CLASSES: dict[tuple[str, tuple[str, ...]], type] = {
    ("result", ()): ResultRecord,
    ("result", ("run",)): RunInfo,
    ("result", ("serving",)): Serving,
    ("warm_check", ()): WarmCheck,
}


def _node(schema: str, path: tuple[str, ...]) -> dict[str, Any]:
    node = load_schema(schema)
    for key in path:
        node = node["properties"][key]
    return node


def _nullable(annotation: Any) -> bool:
    return type(None) in typing.get_args(annotation) if isinstance(annotation, types.UnionType) else False


@pytest.mark.parametrize(
    ("schema", "path"), list(SCHEMA_CLASSES), ids=lambda v: v if isinstance(v, str) else ".".join(v)
)
def test_each_record_class_has_its_schemas_fields_required_and_nullable_alike(
    schema: str, path: tuple[str, ...]
) -> None:
    cls = SCHEMA_CLASSES[schema, path]
    node = _node(schema, path)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    assert list(fields) == list(node["properties"]), f"{cls.__name__} and {schema} {path} name other fields"
    required = [name for name, f in fields.items() if not has_default(f)]
    assert required == node["required"], f"{cls.__name__}: a field without a default is one the schema requires"
    for name in required:
        kind = node["properties"][name].get("type")
        if kind is not None:  # a $ref, enum or const node says its nulls otherwise
            null = "null" in kind if isinstance(kind, list) else kind == "null"
            assert _nullable(hints[name]) == null, f"{cls.__name__}.{name}: None allowed in one and not the other"


def test_the_optional_metrics_are_metrics_the_schema_does_not_require() -> None:
    metrics = load_schema()["properties"]["metrics"]
    assert OPTIONAL_METRICS <= set(metrics["properties"])
    assert not OPTIONAL_METRICS & set(metrics["required"])


def test_a_record_built_from_the_classes_is_the_json_the_schema_describes() -> None:
    """Required fields are written even when None; an optional field is left out while it is None."""
    data = sample_serving()
    serving = Serving(**data.pop("serving"))
    run = RunInfo(**data.pop("run"))
    built = ResultRecord(**data, run=run, serving=serving).to_dict()
    assert validate_record(built) == []
    assert built == {k: v for k, v in sample_serving().items() if k not in ("plan", "agreement")}  # None: left out
    bare = ResultRecord(**{**sample_record(), "run": RunInfo(**sample_record()["run"]), "plan": None}).to_dict()
    assert "plan" not in bare and "serving" not in bare and bare["failure"] is None
    assert validate_record(bare) == []
