"""The result record: schema loading, JSON-Schema + semantic validation.

One JSON object per benchmark or serving run (``schemas/result.schema.json``, ``schema_version`` "2.0", the one
version). Validation is the JSON Schema (compiled once with jsonschema-rs, which names the field) plus the
semantic checks that a schema cannot express. A bad record is reported with its file and field and set aside; it
never stops the good ones.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema_rs

from pipeline.constants import REPO_ROOT
from pipeline.errors import RecordError
from pipeline.ids import model_id_problem
from pipeline.records.bundles import compiled_cache_problems
from pipeline.records.columns import EARLIEST_YEAR, LATEST_YEAR, parse_time
from pipeline.records.serving_checks import serving_problems
from pipeline.records.task_checks import agreement_problems, task_metric_problems, with_tasks

SCHEMA_VERSION = "2.0"
MAX_RECORD_BYTES = 1 << 20  # a record is a few KB; a megabyte is a broken or hostile file
#: The schema's rule for a version string (PEP 440, dpkg and image references fit), and its rule for free text:
#: no C0 control but tab, newline and carriage return (issue 22.8: a control character made feed.xml unreadable).
VERSION_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!~:@/_-]*")
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def printable(text: str) -> str:
    """``text`` without the control characters a record's free text may not hold (for makers of records)."""
    return _CONTROLS.sub("", text)


def _schema_dir() -> Path:
    for candidate in (REPO_ROOT / "schemas", Path(__file__).resolve().parent.parent / "_schemas"):
        if (candidate / "result.schema.json").is_file():
            return candidate
    raise RecordError("schemas/result.schema.json not found next to the package")


@functools.cache
def load_schema(name: str = "result") -> dict[str, Any]:
    """The parsed JSON Schema ``schemas/<name>.schema.json`` (the result's with every task: :func:`with_tasks`)."""
    return with_tasks(json.loads((_schema_dir() / f"{name}.schema.json").read_text(encoding="utf-8")))


@functools.cache
def schema_validator(name: str = "result") -> Any:
    """The compiled validator of ``schemas/<name>.schema.json`` (:func:`load_schema`), made once."""
    return jsonschema_rs.Draft202012Validator(load_schema(name))


@dataclass(frozen=True)
class Problem:
    """One reason a record is invalid: the file, the dotted field path and what is wrong."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "field": self.field, "message": self.message}


def _path(parts: Iterable[Any]) -> str:
    return ".".join(str(p) for p in parts) or "(record)"


def _bad_value(value: Any) -> str | None:
    """Why a leaf cannot be stored (NaN, Infinity, a lone surrogate), or None."""
    if value.__class__ is float and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if value.__class__ is str and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "text holds a lone surrogate, which is not valid Unicode"
    return None


def _non_finite(value: Any) -> list[tuple[str, str]]:
    """Every leaf JSON cannot hold faithfully, with its dotted path (iterative: no recursion limit)."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            stack.extend(((*path, key), inner) for key, inner in item.items())
        elif isinstance(item, list):
            stack.extend(((*path, index), inner) for index, inner in enumerate(item))
        else:
            problem = _bad_value(item)
            if problem:
                out.append((_path(path), problem))
    return sorted(out)


_EARLIEST, _LATEST = f"{EARLIEST_YEAR:04d}", f"{LATEST_YEAR:04d}"
_NOT_A_TIME = f"not a real ISO 8601 time with a timezone between the years {EARLIEST_YEAR} and {LATEST_YEAR}"


def _times_problems(started_text: str, finished_text: str) -> list[tuple[str, str]]:
    """run.started_at / finished_at: real times (the schema's pattern already fixed their shape) of the years
    :data:`EARLIEST_YEAR` to :data:`LATEST_YEAR`, in order."""
    # Fast path: a day <= 28 exists in every month of every year, and two stamps of the same length and offset
    # compare as text. Everything else is parsed. The years are bounded here too (issue 22.6: a year-0001 stamp
    # passed this path, then crashed every build that converted it to UTC).
    if (
        _EARLIEST <= started_text[:4] <= _LATEST
        and _EARLIEST <= finished_text[:4] <= _LATEST
        and started_text[8:10] <= "28"
        and finished_text[8:10] <= "28"
        and len(started_text) == len(finished_text)
        and started_text[19:][-6:] == finished_text[19:][-6:]
        and (started_text.endswith("Z") or started_text[-6] in "+-")
    ):
        return [("run.finished_at", "earlier than run.started_at")] if finished_text < started_text else []
    out = []
    started, finished = parse_time(started_text), parse_time(finished_text)
    if started is None:
        out.append(("run.started_at", _NOT_A_TIME))
    if finished is None:
        out.append(("run.finished_at", _NOT_A_TIME))
    if started is not None and finished is not None and finished < started:
        out.append(("run.finished_at", "earlier than run.started_at"))
    return out


#: How far in the future a record may say it finished (clock skew), and the run fields only CI may fill.
MAX_FUTURE = dt.timedelta(days=1)
CI_ONLY_RUN_FIELDS = ("runner", "github_run_id", "github_sha", "machine")


def _provenance_problems(run: dict[str, Any]) -> list[tuple[str, str]]:
    """A finish time past tomorrow pins "latest" forever; a non-CI record naming a CI run forges provenance."""
    out = []
    finished_text = run["finished_at"]
    now = dt.datetime.now(dt.UTC)
    # Text first (a stamp's date is within a day of its UTC date): parse only the few near or past today.
    if finished_text[:10] >= (now - dt.timedelta(days=1)).strftime("%Y-%m-%d"):
        finished = parse_time(finished_text)
        if finished is not None and finished > now + MAX_FUTURE:
            out.append(("run.finished_at", f"{finished_text} is more than a day in the future"))
    if run["source"] != "ci":
        out.extend(
            (f"run.{name}", f"a {run['source']} record must not carry the CI-only field {name} (set it to null)")
            for name in CI_ONLY_RUN_FIELDS
            if run.get(name) is not None
        )
    return out


def _semantic(record: dict[str, Any]) -> list[tuple[str, str]]:
    """Checks beyond the schema; ``record`` already satisfies the schema (so the lookups cannot fail)."""
    # The rules the schema can say (a pass has no failure, neuron versions, model id characters, ...) are in
    # its allOf and patterns, checked in Rust; these are the ones that compare fields.
    out: list[tuple[str, str]] = []
    metrics = record["metrics"]
    wall = metrics["wall_s"]
    if wall is not None:
        limit = wall * 1.000001 + 1e-9
        for name in ("compile_s", "load_s", "ttft_s", "seconds_per_image"):
            value = metrics.get(name)
            if value is not None and value > limit:
                out.append((f"metrics.{name}", f"{value} s exceeds wall_s {wall} s"))
    latency = metrics["latency_s"]
    if latency is not None and latency["p50"] > latency["p90"]:
        out.append(("metrics.latency_s.p50", "p50 exceeds p90"))
    out.extend(task_metric_problems(record))
    run = record["run"]
    out.extend(_times_problems(run["started_at"], run["finished_at"]))
    out.extend(_provenance_problems(run))
    hardware, cores = record["hardware"], record["cores"]
    per_core, peak = hardware["memory_per_core_bytes"], metrics["peak_device_memory_bytes"]
    if per_core is not None and peak is not None and peak > per_core * cores:
        out.append(("metrics.peak_device_memory_bytes", f"{peak} B does not fit {cores} core(s) of {per_core} B"))
    available = hardware["cores_available"]
    if available is not None and cores > available:
        out.append(("cores", f"{cores} cores used but the hardware has {available}"))
    if hardware.get("emulated") is True and record["device"] != "neuron":
        out.append(("hardware.emulated", "only the neuron device is emulated"))
    out.extend(agreement_problems(record))
    out.extend(compiled_cache_problems(record))
    out.extend(serving_problems(record))
    return out


def _message(error: Any, record: Any) -> str:
    """A schema error in words: the allOf rules carry their own sentence; the model id says what is wrong."""
    schema_path = list(error.schema_path)
    if len(schema_path) > 1 and schema_path[0] == "allOf":
        rule = load_schema()["allOf"][schema_path[1]]["$comment"]
        return f"{rule} ({error.message[:200]})"
    if schema_path[-2:] == ["model_id", "pattern"] and isinstance(record, dict):
        return model_id_problem(record.get("model_id")) or error.message
    return error.message


#: Why an emulated record never enters the dataset.
EMULATED = (
    "made on trncat's Neuron emulator, not on a Trainium device: an emulated run is never a result "
    "(docs/methodology.md, the Neuron emulator)"
)


def validate_record(
    record: Any, *, from_strict_json: bool = False, allow_emulated: bool = False
) -> list[tuple[str, str]]:
    """All problems of one record as ``(field, message)`` pairs; empty when valid. Never raises.

    Args:
        record: the parsed record.
        from_strict_json: the record came from :func:`parse_record`, which already refuses NaN, Infinity and
            overflowing numbers, so the walk that looks for them is skipped.
        allow_emulated: accept a record made on trncat's Neuron emulator (``hardware.emulated``): the harness
            checks what it writes with it; ``trncat validate``, the submission check and publish never do.
    """
    validator = schema_validator()
    try:
        if validator.is_valid(record):
            if from_strict_json or _all_finite(record):
                problems = _semantic(record)
                if record["hardware"].get("emulated") is True and not allow_emulated:
                    problems.append(("hardware.emulated", EMULATED))
                return problems
            return _non_finite(record)
        non_finite = [] if from_strict_json or _all_finite(record) else _non_finite(record)
        # jsonschema-rs reads NaN/Infinity as null: its message about them would only confuse.
        hidden = {path for path, _ in non_finite}
        problems = [
            (path, _message(error, record))
            for error in validator.iter_errors(record)
            if (path := _path(error.instance_path)) not in hidden
        ]
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # objects JSON cannot hold
        return [("(record)", f"not a JSON value: {type(exc).__name__}: {exc}")]
    problems.extend(non_finite)
    return problems or [("(record)", "does not match the schema")]


def _all_finite(value: Any) -> bool:
    # jsonschema-rs reads NaN and +-Infinity as null, which nullable fields accept, and lets lone surrogates
    # through: look for both ourselves.
    stack = [value]
    while stack:
        item = stack.pop()
        cls = item.__class__
        if cls is dict:
            stack.extend(item.values())
        elif cls is float:
            if item != item or item in (math.inf, -math.inf):
                return False
        elif cls is str:
            if not item.isascii() and _bad_value(item):
                return False
        elif cls is list:
            stack.extend(item)
    return True


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON (NaN and Infinity are not numbers here)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a 64-bit float")
    return value


def parse_record(text: str | bytes) -> Any:
    """Parse JSON strictly: NaN, Infinity, numbers that overflow and duplicate keys are errors, and bytes that
    are not UTF-8.

    Raises:
        ValueError: not strict JSON (UnicodeDecodeError: bytes that are not UTF-8).
    """

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    # Bytes are UTF-8 or refused: json.loads would take UTF-16 and UTF-32 too, and bytes of a lone surrogate.
    raw = text if isinstance(text, str) else text.decode("utf-8")
    record = json.loads(
        raw, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=no_duplicates
    )
    if "\\u" in raw:  # only an escape can make a lone surrogate: look only then
        bad = _non_finite(record)
        if bad:
            raise ValueError(f"{bad[0][0]}: {bad[0][1]}")
    return record


def dump_record(record: dict[str, Any]) -> str:
    """Canonical JSON text of a record (sorted keys, no NaN), ending in a newline."""
    return json.dumps(record, indent=2, sort_keys=True, allow_nan=False) + "\n"


@dataclass
class Report:
    """What validating a set of files found: the good records (with their file) and every problem."""

    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and self.files > 0

    @property
    def bad_files(self) -> list[str]:
        return sorted({p.file for p in self.problems})


def record_files(paths: Iterable[str | Path]) -> list[Path]:
    """Every ``*.json`` file named or under a folder named, sorted, each once.

    Raises:
        RecordError: a path does not exist.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.json") if p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            raise RecordError(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))


def check_file(path: Path) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Read and validate one record file; returns the record (None when invalid) and its problems."""
    name = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, [Problem(name, "(file)", f"unreadable: {exc.strerror or exc}")]
    if len(data) > MAX_RECORD_BYTES:
        return None, [Problem(name, "(file)", f"larger than {MAX_RECORD_BYTES} bytes")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Problem(name, "(json)", f"not UTF-8: byte {exc.start} ({exc.reason})")]
    try:
        record = parse_record(text)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, [Problem(name, "(json)", f"not valid JSON: {exc}")]
    except RecursionError:
        return None, [Problem(name, "(json)", "not valid JSON: nested too deeply")]
    problems = [Problem(name, f, m) for f, m in validate_record(record, from_strict_json=True)]
    return (None, problems) if problems else (record, [])


def validate_paths(paths: Iterable[str | Path]) -> Report:
    """Validate every record file under ``paths``; every file is checked even when some are bad.

    Raises:
        RecordError: a path does not exist.
    """
    report = Report()
    for path in record_files(paths):
        report.files += 1
        record, problems = check_file(path)
        if record is not None:
            report.records.append((str(path), record))
        report.problems.extend(problems)
    return report
