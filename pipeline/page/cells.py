"""What a cell of the catalog says: a cost, where it comes from, a compile time, the ops that fell back to the CPU, the
one command that runs a model (each kept in step with ``templates/format.js``, which draws the same cells)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.backends import FRESH_VENV
from pipeline.page import plots


def usd_text(value: float | None) -> str:
    """A cost as a cell shows it: ``$4.84``, ``$0.129``, ``< $0.01`` (keep in step with format.js ``usd``)."""
    if value is None:
        return "\u2014"
    if value >= 100:
        return f"${value:.0f}"
    if value >= 1:
        return f"${value:.2f}"
    return f"${value:.3f}" if value >= 0.01 else "< $0.01"


def _number_text(value: float) -> str:
    text = repr(float(value))  # as the script's String(number) writes it: 64 and 85.964, never 64.0
    return text[:-2] if text.endswith(".0") else text


def price_text(entry: Mapping[str, Any]) -> str:
    """Where a row's cost comes from, for its cost cell's title (keep in step with format.js ``priceText``)."""
    if entry.get("usd") is None:
        if entry.get("device") == "cpu":
            return "No cost: a CPU row names no instance, so it has no price"
        return "No cost: the price table has no price for this row's instance under the build's purchase option"
    where = entry.get("preg") or "region not stated"
    text = (
        f"At ${_number_text(entry['usd'])} per instance-hour ({entry.get('popt')}, {where}; {entry.get('psrc')}; "
        f"{entry.get('pdate') or 'undated'}), for the run's share of the instance"
    )
    if entry.get("st") != "pass":
        text += "; no cost: the run did not pass"
    return text


#: The compile cell of a CPU row: nothing is compiled there, so no time is shown (0 ms would read as a fast compile).
NOT_COMPILED = "\u2014, not compiled on CPU"


def compile_text(entry: Mapping[str, Any]) -> str:
    """A row's compile cell (keep in step with format.js ``compileText``)."""
    if entry.get("device") == "cpu":
        return NOT_COMPILED
    value = entry.get("compile")
    return "\u2014" if value is None else plots.fmt_seconds(value)


def fallback_text(fb: Sequence[Sequence[Any]]) -> str:
    """``aten::topk ×3, aten::nonzero ×1`` (keep in step with format.js fallbackText)."""
    return ", ".join(f"{op} \u00d7{count}" for op, count in fb)


def command(entry: Mapping[str, Any]) -> str:
    """The one command that runs a model from its downloaded ``run.py`` and ``requirements.txt``."""
    cores = entry.get("cores") or entry.get("pc") or 1
    run = f"torchrun --nproc-per-node {int(cores)} run.py" if cores > 1 else "python run.py"
    # run.py defaults to Trainium; a row measured elsewhere runs as it was measured (keep in step with the JS).
    device = entry.get("device")
    if device in ("cpu", "cuda"):
        run += f" --device {device}"
    return f"{FRESH_VENV} && {run}"
