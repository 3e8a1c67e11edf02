"""The Compare view: per model and task, its Trainium2 row beside its GPU (cuda) row, and beside its Trainium3 row.

Each side is one latest row exactly as it was measured (speed, peak device memory, cost, its device badge and
its hardware, its source: ``ci`` or a community submission's); the ratio line divides the Trainium2 figure by the
other side's, only where both runs passed and both are of one source (issue 47.1: a community row never divided by a
CI one). Rows
are never merged, averaged or relabelled: a model with several GPU rows (an L40S, an H100) gets one pair per GPU,
and its Trainium3 row is its own pair (a Trainium3 row is never a Trainium2 side, nor a GPU one).
The offline demo, which has neither, gets :func:`demo_pairs`: its CPU rows shown in both places, badged "demo".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.page.cells import DASH, DEVICE_LABELS, bytes_text, metric_text, price_text, usd_text
from pipeline.page.task_columns import task_view
from pipeline.prices import DEMO_INSTANCE, TASK_COSTS
from pipeline.records import device_of, ratio_interval, representative

#: The devices a pair's sides come from (:func:`pipeline.records.device_of`): Trainium2 first, then the other.
SIDES = ("neuron", "cuda", "trainium3")

#: What the other side of a pair is, by its device: the ratio line's divisor.
OTHER = {"cuda": "GPU", "trainium3": "Trainium3"}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _figures(task: str, row: Mapping[str, Any]) -> dict[str, float | None]:
    speed = task_view(task).speed
    cost = TASK_COSTS.get(task)
    return {
        "speed": _number(row.get(speed.column)) if speed else None,
        "mem": _number(row.get("peak_device_memory_bytes")),
        "cost": _number(row.get(cost[0])) if cost else None,
    }


def _side(task: str, row: Mapping[str, Any]) -> dict[str, Any]:
    speed = task_view(task).speed
    figures = _figures(task, row)
    device = str(device_of(row))
    entry = {key: row.get(f"price_{column}") for key, column in _PRICE_KEYS}
    entry.update(st=row.get("status"), device=device)
    return {
        "device": device,
        "source": str(row.get("source")),
        "demo": None,
        "badge": DEVICE_LABELS.get(device, device),
        "hw": row.get("hardware"),
        "instance": row.get("instance_type"),
        "cores": row.get("cores"),
        "st": row.get("status"),
        "speed": metric_text({speed.key: figures["speed"]}, speed) if speed else DASH,
        "mem": bytes_text(figures["mem"]),
        "cost": usd_text(figures["cost"]),
        "price": price_text(entry),
    }


#: The keys :func:`pipeline.page.cells.price_text` reads, each with its row column (``price_`` + it).
_PRICE_KEYS = (("usd", "usd_per_hour"), ("popt", "option"), ("preg", "region"), ("psrc", "source"), ("pdate", "as_of"))


def _pair(model_id: str, task: str, sides: list[dict[str, Any]], other: str, ratios: dict[str, str]) -> dict[str, Any]:
    """One pair of the Compare view (:func:`compare_pairs`), a demo one where its sides say so."""
    view = task_view(task)
    speed = view.speed.label if view.speed else ""
    return {
        "id": model_id,
        "task": task,
        "label": view.label,
        "speed": speed,
        "sides": sides,
        "other": other,
        "ratios": ratios,
        "demo": sides[0]["demo"] is not None,
    }


def ratio_text(trn: float | None, gpu: float | None) -> str:
    """``×1.52``: ``trn`` ÷ ``gpu``, a dash unless both are positive figures."""
    return "\u2014" if trn is None or gpu is None or trn <= 0 or gpu <= 0 else f"\u00d7{trn / gpu:.2f}"


def speed_ratio(trn: Mapping[str, Any], other: Mapping[str, Any], text: str) -> str:
    """The speed ratio's text with its interval (:func:`pipeline.records.ratio_interval`): ``×1.52 (1.31–1.77)``,
    ``×1.04, too close to call`` where the interval spans 1; the bare ratio where a row has no interval."""
    span = ratio_interval(trn, other) if text != "\u2014" else None
    if span is None:
        return text
    return f"{text}, too close to call" if span[0] <= 1 <= span[1] else f"{text} ({span[0]:.2f}\u2013{span[1]:.2f})"


def compare_pairs(latest: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Compare view's pairs: every (model, task) with a Trainium2 row and a GPU or Trainium3 row in ``latest``.

    Args:
        latest: Latest rows (flat, :data:`pipeline.records.COLUMNS`).

    Returns:
        One pair per (model, task, GPU hardware) and per (model, task, Trainium3 hardware), in model order, the
        GPU pairs first: ``{"id", "task", "label", "speed", "sides", "other", "ratios"}``; ``sides`` are the
        Trainium2 row (the model's representative one) and the other row, each with its badge and its figures as
        text; ``other`` names the second side ("GPU", "Trainium3"); ``ratios`` Trainium2 ÷ the other of speed,
        memory and cost ("—" unless both passed).
    """
    by_key: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in latest:
        if device_of(row) in SIDES and not row.get("emulated"):  # an emulated row is no side
            by_key.setdefault((str(row["model_id"]), str(row["task"])), []).append(row)
    pairs: list[dict[str, Any]] = []
    # A pair needs two rows of the key (a Trainium2 one and another): a key of one row is passed over unsorted.
    for (model_id, task), rows in sorted(item for item in by_key.items() if len(item[1]) > 1):
        trainium = [r for r in rows if device_of(r) == "neuron"]  # a Trainium3 row is never the Trainium2 side
        others = sorted(
            (r for r in rows if device_of(r) in OTHER),
            key=lambda r: (device_of(r) != "cuda", str(r.get("hardware")), r.get("source") != "ci"),
        )
        if not trainium or not others:
            continue
        trn = representative([dict(r) for r in trainium])
        for other in others:
            both = trn.get("status") == other.get("status") == "pass" and trn.get("source") == other.get("source")
            a, b = _figures(task, trn), _figures(task, other)
            ratios = {k: ratio_text(a[k], b[k]) if both else "\u2014" for k in ("speed", "mem", "cost")}
            ratios["speed"] = speed_ratio(trn, other, ratios["speed"])  # issue 50
            sides = [_side(task, trn), _side(task, other)]
            pairs.append(_pair(model_id, task, sides, OTHER[str(device_of(other))], ratios))
    return pairs


#: The two places a demo pair's one CPU run is shown in, with what each badge says on hover.
DEMO_PLACES = (
    ("CPU run, in the Trainium2 place", "this machine's CPU run of a tiny model, where a Trainium2 row would be: "
     "not a Trainium2 result"),
    ("the same CPU run, cuda-labelled twin", "the same CPU run again, labelled as the GPU (cuda) side to fill its "
     "place: not a GPU result"),
)  # fmt: skip


def demo_pairs(latest: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Compare view's layout for the offline demo, which has no Trainium2 and no GPU row: each passing demo row
    (:data:`pipeline.prices.DEMO_INSTANCE`) beside its own twin, both sides badged "demo" with the place they fill,
    so the ratios are ×1.00 by construction. Never built from a row of a real runner."""
    pairs: list[dict[str, Any]] = []
    rows = [r for r in latest if r.get("instance_type") == DEMO_INSTANCE and r.get("status") == "pass"]
    for row in sorted(rows, key=lambda r: (str(r["model_id"]), str(r["task"]))):
        task = str(row["task"])
        figures = _figures(task, row)
        sides = [_side(task, row) | {"demo": text, "demo_title": title} for text, title in DEMO_PLACES]
        ratios = {k: ratio_text(figures[k], figures[k]) for k in ("speed", "mem", "cost")}
        pairs.append(_pair(str(row["model_id"]), task, sides, "GPU", ratios))
    return pairs
