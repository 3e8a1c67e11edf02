"""Stage-matrix rows as the page takes them (the row contract, ``MATRIX_SCHEMA`` of pipeline/dataset/matrix.py: one per
model x task x device class x item), built here without that module, so the page's tests hold the contract and not its
writer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from pipeline.page.matrix import DEVICE_CLASSES, FEATURES, STAGES

DOCS = "https://docs.vllm.ai/projects/neuron/en/latest/models.html"
WHEN = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)


def matrix_row(model_id: str, task: str, device_class: str, item: str, state: str, **values: Any) -> dict[str, Any]:
    """One row of the contract, every column present; ``values`` sets the others (a passing or failing row gets a
    record, a source and a date unless given)."""
    decided = state in ("passing", "failing", "cpu", "emulated")
    row = {
        "model_id": model_id, "revision": "main", "task": task, "device_class": device_class,
        "kind": "stage" if item in STAGES else "feature", "item": item, "state": state,
        "documented": None, "documented_source": None, "documented_as_of": None, "documented_but_fails": False,
        "detail": None, "record_id": f"rec-{model_id}-{item}" if decided else None, "source": "ci" if decided else None,
        "decided_at": WHEN if decided else None, "params": None, "neuron_cores": None, "instance": None,
        "parallelism": None,
    }  # fmt: skip
    row.update(values)
    if row["documented"] and row["documented_source"] is None:
        row.update(documented_source=DOCS, documented_as_of="2.26")
    row["documented_but_fails"] = row["documented"] == "supported" and row["state"] == "failing"
    return row


def model_rows(model_id: str, task: str, states: dict[tuple[str, str], str] | None = None,
               documented: str | None = "supported", details: dict[tuple[str, str], str] | None = None,
               ) -> list[dict[str, Any]]:  # fmt: skip
    """A model's 33 rows (3 device classes x 11 items): the plan predicted (8 NeuronCores, tp=8, trn2.3xlarge; a GPU
    its own instance), the rest untested, but ``states`` ((device class, item) -> state) and ``details``; the docs'
    ``documented`` on trn2 and trn3 for every item, nothing on gpu."""
    states, details = states or {}, details or {}
    rows = []
    for device in DEVICE_CLASSES:
        for item in (*STAGES, *FEATURES):
            state = states.get((device, item), "predicted" if item == "plan" else "untested")
            extra: dict[str, Any] = {"documented": documented if device != "gpu" else None}
            if item == "plan":
                gpu = device == "gpu"
                extra.update(params=8_000_000_000, neuron_cores=None if gpu else 8, parallelism="tp=8",
                             instance="p5en.48xlarge" if gpu else f"{device}.3xlarge")  # fmt: skip
            if (device, item) in details:
                extra["detail"] = details[(device, item)]
            rows.append(matrix_row(model_id, task, device, item, state, **extra))
    return rows


def scale_rows(models: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """Every model's rows for a page at scale: most predicted and untested, every 7th with CPU stages, every 13th
    failing compile on Trainium2 though documented as supported, every 17th passing there."""
    rows = []
    for k, (model_id, task) in enumerate(models):
        states: dict[tuple[str, str], str] = {}
        if k % 7 == 0:
            states.update({("trn2", "compile"): "cpu", ("trn2", "answer_check"): "cpu", ("trn2", "serve"): "cpu"})
        if k % 13 == 0:
            states[("trn2", "compile")] = "failing"
        if k % 17 == 0:
            states.update({("trn2", "compile"): "passing", ("trn2", "serve"): "passing", ("trn2", "lora"): "passing"})
        rows += model_rows(model_id, task, states, "supported" if k % 2 else "not_listed",
                           {("trn2", "compile"): "NCC_EVRF009"} if k % 13 == 0 else None)  # fmt: skip
    return rows
