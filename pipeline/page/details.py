"""A model's details, shown under its row when opened, made here only (the page's script places them as they are):
its failure, its task's metrics, what its run did (CPU fallback, recompiles, the warm start, the answer check), the
planner's estimate, the command that runs it, the box for its files (filled by the script) and its history across
toolchains. Every text is escaped here."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pipeline.backends import FRESH_VENV
from pipeline.backends.neuron import dlami_venv
from pipeline.page.cells import (
    DASH,
    STATUS_LABELS,
    bytes_text,
    compile_text,
    fallback_text,
    metric_text,
    price_text,
    seconds_text,
    toolchain,
)
from pipeline.page.cells import escaped as _e
from pipeline.page.cells import number_text as _number_text
from pipeline.page.task_columns import Metric, task_view

#: Columns of one history line: the newest run per (hardware, toolchain); ``speed`` is the task's speed metric.
HISTORY_COLUMNS = ("date", "hw", "device", "cores", "st", "stage", "code", "cc", "tnx", "tf", "compile", "speed", "reg")


def command(entry: Mapping[str, Any]) -> str:
    """The one command that runs a model from its downloaded ``run.py`` and ``requirements.txt``."""
    cores = entry.get("cores") or entry.get("pc") or 1
    run = f"torchrun --nproc-per-node {int(cores)} run.py" if cores > 1 else "python run.py"
    device = entry.get("device")  # run.py defaults to Trainium; a row measured elsewhere runs as it was measured
    if device in ("cpu", "cuda"):
        run += f" --device {device}"
    return f"{FRESH_VENV} && {run}"


@functools.lru_cache(maxsize=1024)  # a catalog has few: 100,000 details ask for the same few blocks
def _commands(cores: Any, device: Any, tnx: Any) -> str:
    """The details' command blocks: the command, and on a Trainium2 row with a known torch-neuronx the same command
    in the Neuron DLAMI's own environment."""
    text = command({"cores": cores, "device": device})
    out = "<p>Run it: put run.py and requirements.txt in a folder, then</p>" + _command_block(text)
    venv = dlami_venv(tnx)
    if device == "neuron" and venv is not None:
        dlami = text.replace(FRESH_VENV, f"source {venv}/bin/activate && pip install -r requirements.txt")
        out += "<p>or, on the Neuron DLAMI, in its own environment:</p>" + _command_block(dlami)
    return out


def _grade_text(e: Mapping[str, Any], measure: str, compared: str) -> str:
    parts = []
    if e.get("tk"):
        groups = ", ".join(f"top-{k} {_number_text(err)} (tolerance {_number_text(tol)})" for k, err, tol in e["tk"])
        parts.append(f"largest relative error {groups}")
    if e.get("gm") is not None:
        gd = e.get("gd")
        parts.append(f"greedy tokens match at a rate of {_number_text(e['gm'])}" +
                     ("" if gd is None else f", first parting at step {gd}"))  # fmt: skip
    if e.get("cos") is not None and not e.get("tk"):
        parts.append(f"{measure} {_number_text(e['cos'])}")
    if e.get("sig") is not None:
        parts.append(f"\u03c3-ratio {_number_text(e['sig'])} and Bhattacharyya {_number_text(e.get('bc'))} "
                     "against a CPU bfloat16 run")  # fmt: skip
    step = f" at step {e.get('gst')}" if e["gr"] == "diverges" else ""
    return (f"Answer check: {e['gr']}{step}, {compared} against a CPU float32 reference of the same input" +
            (": " + "; ".join(parts) if parts else "") + ".")  # fmt: skip


def _notes(e: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """(class, text) lines of the details: CPU fallback, recompiles, the warm start, the answer check."""
    view = task_view(e["task"])
    out: list[tuple[str | None, str]] = []
    if e.get("fb"):
        out.append(("fallback-note", "These ops ran on the CPU instead of the device (TorchNeuron's eager fallback; "
                                     f"it still runs unmodified): {fallback_text(e['fb'])}."))  # fmt: skip
    if e.get("rc"):
        out.append(("fallback-note", f"{e['rc']} graph(s) compiled again during the timed calls: its speed figures "
                                     "include compilation."))  # fmt: skip
    compile_s = seconds_text(e.get("compile"))
    if e.get("warm") is not None:
        out.append((None, f"The first run compiles in {compile_s}; later runs start in {seconds_text(e['warm'])} "
                          "from the compile cache."))  # fmt: skip
    if e.get("ccb") is not None:  # the compiled-cache bundle run.py starts warm from (issue 25), or why there is none
        warm = (
            f"Its run.py starts warm: it downloads the {bytes_text(e['ccb'])} NEFF cache this project's CI compiled "
            f"(digest checked; --cold compiles instead) rather than compile for {compile_s}."
        )
        out.append((None, warm))
    elif e.get("ccs"):
        out.append((None, f"No compiled cache ships with this row: {e['ccs']}"))
    if e.get("pf") == "eager":
        out.append((None, "The prompt ran eagerly (op by op, not through the compiled forward): its TTFT and first "
                          "call include eager kernels."))  # fmt: skip
    if e.get("usd") is not None:
        out.append((None, f"Price: {price_text(e)}."))
    if e.get("gr"):
        out.append((None, _grade_text(e, view.measure, view.compared)))
    elif e.get("cos") is not None:
        threshold = "" if e.get("thr") is None else f" (a pass needs at least {_number_text(e['thr'])})"
        check = (
            f"Answer check: {view.measure} {_number_text(e['cos'])} between {view.compared} and a CPU float32 "
            f"reference of the same input{threshold}; an older record: its grade is unknown."
        )
        out.append((None, check))
    return out


def _command_block(text: str) -> str:
    return f'<div class="command"><code class="cmd">{_e(text)}</code>' \
           '<button type="button" class="copy js-only">Copy command</button></div>'  # fmt: skip


@functools.cache
def _history_head(task: str) -> tuple[str, Metric | None]:
    """A task's history table's head, and its speed column as a metric of the history line."""
    speed = task_view(task).speed
    heads = ["Date", "Hardware", "Cores", "Status", "Toolchain", "Compile", *([speed.label] if speed else [])]
    head = '<table class="history"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in heads) + "</tr></thead><tbody>"
    return head, Metric("speed", "", "", speed.fmt) if speed else None


def _history(e: Mapping[str, Any]) -> list[str]:
    """The history's table: its head (one per task) and each line as its first cells (:func:`_history_line`) and
    its figures."""
    head, speed = _history_head(e["task"])
    out = ["<h4>History across toolchains</h4>" + head]
    for line in e["hist"]:
        h = dict(zip(HISTORY_COLUMNS, line, strict=True))
        speed_cell = f'<td class="num">{metric_text(h, speed)}</td>' if speed else ""
        out += (_history_line(*line[:10], h["reg"]), f'<td class="num">{compile_text(h)}</td>{speed_cell}</tr>')
    return out


@functools.lru_cache(maxsize=4096)  # 100,000 models' history lines share a few: a date, hardware, verdict, toolchain
def _history_line(date: Any, hw: Any, device: Any, cores: Any, st: Any, stage: Any, code: Any, cc: Any, tnx: Any,
                  tf: Any, reg: Any) -> str:  # fmt: skip
    """A history line's cells up to its figures."""
    status = STATUS_LABELS.get(st, st)
    if code:
        status += " \u00b7 " + " \u00b7 ".join(str(p) for p in (stage, code) if p)
    badge = '<span class="badge b-reg">passed here, fails now</span>' if reg else ""
    hardware = f"{hw}" + (f" ({device})" if device else "")
    tools = " · ".join(toolchain({"cc": cc, "tnx": tnx, "device": device, "tf": tf}))
    return (
        f"<tr{REGRESSION if reg else ''}><td>{_e(date)}</td><td>{_e(hardware)}</td>"
        f'<td class="num">{cores}</td><td>{_e(status)}{badge}</td><td>{tools}</td>'
    )


REGRESSION = ' class="regression"'


@functools.cache
def _terms(task: str) -> tuple[tuple[Metric, str], ...]:
    """A task's metrics, each with its term in the details' list."""
    return tuple((m, f'<dt title="{_e(m.title)}">{_e(m.label)}</dt>') for m in task_view(task).metrics)


@functools.lru_cache(maxsize=4096)  # 100,000 details share a few: a task, a verdict, hardware and cores
def _verdict(task: str, status: str, stage: Any, code: Any, hardware: Any, device: Any, cores: Any) -> str:
    """The heading's task and the verdict's line: where it failed, or where it runs."""
    out = f" \u00b7 {_e(task)}</h3>"
    if status in ("fail", "error"):
        lead = (
            "Fails at stage "
            if status == "fail"
            else "Infrastructure error (retried, not an incompatibility) at stage "
        )
        code = f" ({code})" if code else ""
        return out + f"<p>{_e(lead)}{_e(stage or '?')}{_e(code)}{_e(f' on {hardware}' if hardware else '')}:</p>"
    if status == "pass":
        return out + f"<p>Runs unmodified on {_e(hardware or device)} over {_e(cores)} core(s).</p>"
    return out


def detail_parts(e: Mapping[str, Any]) -> list[str]:
    """An entry's details, shown under its row when opened, as their parts (the data files write each distinct part
    once): the failure, the task's metrics, the notes, the plan, the command and the files (their boxes filled by
    the script: ``.files``), the history."""
    model_id = _e(e["id"])  # a part of its own (twice in the details, written once)
    status = e["st"]
    verdict = _verdict(e["task"], status, e.get("stage"), e.get("code"), e.get("hw"), e.get("device"), e.get("cores"))
    out = ['<div class="detail-box"><h3>', model_id, verdict]
    if status in ("fail", "error") and e.get("msg"):
        out.append(f'<pre class="message">{_e(e["msg"])}</pre>')
    shown = [(m, term) for m, term in _terms(e["task"]) if e.get(m.key) is not None]
    if shown:
        out.append('<dl class="metrics">')
        for m, term in shown:
            out += (term, f"<dd>{metric_text(e, m)}</dd>")
        out.append("</dl>")
    out += (f'<p class="{cls}">{_e(text)}</p>' if cls else f"<p>{_e(text)}</p>" for cls, text in _notes(e))
    if e.get("reg"):
        out.append('<p class="regression-note">Regression: it passed with an older toolchain and fails with the '
                   "current one (see the history).</p>")  # fmt: skip
    if e.get("ek"):
        out.append(f'<p class="excluded-note">Excluded from the benchmark: {_e(e.get("er"))}</p>')
    if e.get("pc") is not None:
        plan = f"Planner: needs {e['pc']} NeuronCore" + ("s" if e["pc"] > 1 else "")
        if e.get("tp") and e["tp"] > 1:
            plan += f', tensor parallel degree {e["tp"]} (torchrun, tp_plan="auto")'
        if e.get("fits") is False:
            plan += "; does not fit the instance"
        if e.get("advice"):
            plan += f" {DASH} {e['advice']}"
        out.append(f'<p class="plan">{_e(plan)}</p>')
    if status == "unmeasured":
        why = ("It is kept out of the benchmark for that reason, so it has no measurement and no script."
               if e.get("ek") else "Not yet measured: no script yet.")  # fmt: skip
        return [*out, f"<p>{why}</p></div>"]
    out.append(_commands(e.get("cores") or e.get("pc"), e.get("device"), e.get("tnx")))
    out += ('<div class="files" data-id="', model_id, '" data-sc></div>' if e.get("sc") else '"></div>')
    if e["hist"]:
        out += _history(e)
    return [*out, "</tbody></table></div>" if e["hist"] else "</div>"]
