"""What ``trncat check`` answers: the JSON it prints (:meth:`Answer.to_dict`, exactly its keys) and the few lines a
person reads (:meth:`Answer.text`): verdict, evidence and plan; the ``run.py`` to try is written to a file or printed
on request."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pipeline.check.neuron_cache import CachedConfig

#: The exit code of ``trncat check`` when the Hub has no such model, or no such revision of it.
NOT_FOUND_EXIT = 3

#: What a terminal would act on (C0 and C1 controls, DEL): never printed as it is from a config, card or listing.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character written as its ``\\xNN`` escape (a newline too: one line stays one)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


#: The keys of ``trncat check --json``, in order.
JSON_KEYS = ("model_id", "revision", "task", "verdict", "reason", "evidence", "plan", "run_py", "matrix")


@dataclass
class Answer:
    """The answer on one model. ``planned`` is the model the plan and ``run_py`` are of (the checked one, or the
    base it is an adapter or quantization of); ``plan_note`` says why there is no plan; ``routes`` are the
    precompiled configurations optimum-neuron's cache holds."""

    model_id: str
    revision: str | None
    task: str
    verdict: str
    reason: str
    evidence: list[dict[str, Any]]
    plan: dict[str, Any] | None
    run_py: str | None
    planned: str | None = None
    plan_note: str | None = None
    routes: list[CachedConfig] = field(default_factory=list)
    catalog: str = ""
    #: Why the Hub has no such model (or no such revision of it); None when it has. ``trncat check`` exits
    #: :data:`NOT_FOUND_EXIT` then.
    missing: str | None = None
    #: The stage matrix's rows of this model and task (``data/matrix.parquet``'s, as the page reads them).
    matrix: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """``{"model_id", "revision", "task", "verdict", "reason", "evidence", "plan", "run_py"}``."""
        return {key: getattr(self, key) for key in JSON_KEYS}

    def text(self, *, show_run_py: bool = False, run_py_file: str | None = None) -> str:
        """The answer for a person: verdict, why, the evidence, the plan, and where the run.py to try is
        (``run_py_file``, where it was written), or the run.py itself (``show_run_py``)."""
        revision = f" @ {self.revision[:7]}" if self.revision else ""
        lines = [f"{self.model_id}{revision} ({self.task}): {self.verdict}", f"  {self.reason}"]
        for item in self.evidence[:8]:
            code = f" ({item['failure_code']})" if item.get("failure_code") else ""
            cores = f", {item['cores']} core(s)" if item.get("cores") else ""
            lines.append(f"  - {item['kind']}: {item['model_id']} {item['status']}{code}{cores}, {item['toolchain']}")
        if len(self.evidence) > 8:
            lines.append(f"  - ... and {len(self.evidence) - 8} more (--json lists them all)")
        if self.plan is not None:
            of = "" if self.planned in (None, self.model_id) else f" (planned from {self.planned})"
            fits = "fits" if self.plan["fits"] else "does not fit"
            lines.append(f"  plan{of}: {self.plan['cores']} NeuronCore(s) on {self.plan['instance']} ({fits}): "
                         f"{self.plan['advice']}")  # fmt: skip
        elif self.plan_note:
            lines.append(f"  plan: none ({self.plan_note})")
        for cls in dict.fromkeys(r["device_class"] for r in self.matrix):
            cells = [f"{r['item']} {r['state']}" for r in self.matrix if r["device_class"] == cls and
                     r["state"] != "untested"] or ["all untested"]  # fmt: skip
            said = {r["documented"] for r in self.matrix if r["device_class"] == cls and r["item"] == "plan"}
            lines.append(f"  matrix {cls}: {', '.join(cells)} (vLLM Neuron docs: {said.pop() or 'silent'})")
        lines.append(f"  read from {self.catalog}")
        lines = [printable(line) for line in lines]  # the text came from repos' files: escaped for the terminal
        if self.run_py is None:
            lines.append("  no run.py: trncat has nothing it would run for this model")
        elif run_py_file is not None:
            lines.append(f"  run.py to try ({self.planned}, {self._cores} core(s)) written to {run_py_file}")
        else:
            lines.append(f"  run.py to try ({self.planned}, {self._cores} core(s)): --run-py FILE writes it, "
                         "--show-run-py prints it")  # fmt: skip
        if show_run_py and self.run_py is not None:
            lines.append("")
            lines.append(self.run_py.rstrip("\n"))
        return "\n".join(lines)

    @property
    def _cores(self) -> int:
        return int(self.plan["cores"]) if self.plan else 1
