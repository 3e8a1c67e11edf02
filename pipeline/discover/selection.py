"""The hand-kept inputs of discovery: ``dataset/selected.yaml`` and ``dataset/exclusions.yaml``, and the model
requests a maintainer accepted (:func:`load_requests`).

Both files are changed by pull request and validated on load against ``schemas/selection.schema.json`` and
``schemas/exclusion.schema.json`` (JSON Schema 2020-12), plus the checks a schema cannot express (the Hub's
id rules, duplicates). A bad file raises one :class:`~pipeline.errors.ConfigError` naming the file and entry.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from pipeline.constants import REPO_ROOT
from pipeline.errors import ConfigError
from pipeline.ids import model_id_problem
from pipeline.records import schema_validator
from pipeline.types import TASKS

logger = logging.getLogger(__name__)

DEFAULT_SELECTED = REPO_ROOT / "dataset" / "selected.yaml"
DEFAULT_EXCLUSIONS = REPO_ROOT / "dataset" / "exclusions.yaml"
MAX_FILE_BYTES = 1 << 20  # hand-kept lists are a few KB

ExclusionKind = Literal["low_priority", "incompatible"]


@dataclass(frozen=True)
class Selection:
    """One entry of selected.yaml: a model the catalog always covers under ``task``; ``gpu``: also benchmarked
    on the GPU runner class, for the page's Compare view (``trncat queue --device cuda`` queues these only)."""

    model_id: str
    task: str
    note: str | None = None
    gpu: bool = False


@dataclass(frozen=True)
class Exclusion:
    """One entry of exclusions.yaml. ``task`` None excludes the model under every task."""

    model_id: str
    kind: ExclusionKind
    reason: str
    task: str | None = None


def _entry_label(doc: Any, key: str, index: int) -> str:
    entry = doc[key][index] if isinstance(doc, dict) and isinstance(doc.get(key), list) else None
    model = entry.get("model_id") if isinstance(entry, dict) else None
    return f"{key}[{index}]" + (f" ({model})" if isinstance(model, str) else "")


def _load(path: Path, schema: str, key: str) -> list[dict[str, Any]]:
    """Entries of a hand-kept YAML file, validated; raises one ConfigError naming the file and the entry."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable: {exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ConfigError(f"{path}: not valid YAML{line}: {getattr(exc, 'problem', None) or exc}") from None
    errors = list(schema_validator(schema).iter_errors(doc))
    if errors:
        first = errors[0]
        parts = list(first.instance_path)
        if len(parts) >= 2 and parts[0] == key and isinstance(parts[1], int):
            where = _entry_label(doc, key, parts[1])
            field = ".".join(str(p) for p in parts[2:])
            where += f": {field}" if field else ""
        else:
            where = ".".join(str(p) for p in parts) or "top level"
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        raise ConfigError(f"{path}: {where}: {first.message}{more}")
    entries: list[dict[str, Any]] = doc[key]
    seen: dict[tuple[str, str | None], int] = {}
    for index, entry in enumerate(entries):
        if problem := model_id_problem(entry["model_id"]):
            raise ConfigError(f"{path}: {_entry_label(doc, key, index)}: model_id: {problem}")
        ident = (entry["model_id"].casefold(), entry.get("task"))
        if ident in seen:
            raise ConfigError(f"{path}: {_entry_label(doc, key, index)}: duplicates {key}[{seen[ident]}]")
        seen[ident] = index
    return entries


def load_selected(path: Path | None = None) -> list[Selection]:
    """The Selected list, in file order.

    Args:
        path: The YAML file; None for ``dataset/selected.yaml`` of this checkout.

    Returns:
        One :class:`Selection` per entry.

    Raises:
        ConfigError: missing, unparsable or invalid file (the message names the file and the entry).
    """
    path = DEFAULT_SELECTED if path is None else Path(path)
    entries = _load(path, "selection", "models")
    return [Selection(e["model_id"], e["task"], e.get("note"), bool(e.get("gpu", False))) for e in entries]


def load_exclusions(path: Path | None = None) -> list[Exclusion]:
    """The hand-kept exclusions, in file order.

    Args:
        path: The YAML file; None for ``dataset/exclusions.yaml`` of this checkout.

    Returns:
        One :class:`Exclusion` per entry.

    Raises:
        ConfigError: missing, unparsable or invalid file (the message names the file and the entry).
    """
    path = DEFAULT_EXCLUSIONS if path is None else Path(path)
    return [
        Exclusion(e["model_id"], e["kind"], e["reason"], e.get("task")) for e in _load(path, "exclusion", "exclusions")
    ]


#: The labels of a request (``.github/ISSUE_TEMPLATE/ask-for-a-model.yml`` sets the first; only a maintainer can add the
#: second, which makes it join the Selected list).
REQUEST_LABELS = frozenset({"model-request", "accepted"})
#: An issue form's answer: all the text between its field's heading and the next heading (the first such heading counts:
#: the form's own fields come before the free text, where a copy of a heading could be typed).
_ANSWER = re.compile(r"^### (Hub model id|Task)[ \t]*$(.*?)(?=^### |\Z)", re.M | re.S)


def load_requests(path: Path, selected: list[Selection]) -> list[Selection]:
    """The Selected list with the accepted model requests after it (those it lacks).

    An issue's text is untrusted: only its two answers are read, each must be a valid Hub id
    (:func:`pipeline.ids.model_id_problem`) and a task name, and a request that is not is skipped with a warning;
    nothing of it is run or reaches a shell.

    Args:
        path: the issues as ``gh issue list --json number,labels,body`` writes them.
        selected: the hand-kept Selected list (:func:`load_selected`).

    Raises:
        ConfigError: the file is unreadable or not a list.
    """
    try:
        if path.stat().st_size > 16 * MAX_FILE_BYTES:
            raise ConfigError(f"{path}: larger than {16 * MAX_FILE_BYTES} bytes")
        issues = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable: {exc}") from None
    if not isinstance(issues, list) or not all(isinstance(i, dict) for i in issues):
        raise ConfigError(f"{path}: not a list of issues")
    out, seen = list(selected), {(s.model_id.casefold(), s.task) for s in selected}
    for issue in issues:
        labels = {label.get("name") for label in issue.get("labels") or () if isinstance(label, dict)}
        number = issue.get("number")
        if not REQUEST_LABELS <= labels or type(number) is not int:
            continue
        answers: dict[str, str] = {}
        for field, answer in _ANSWER.findall(str(issue.get("body") or "")):
            answers.setdefault(field, answer.strip())
        model_id, task = answers.get("Hub model id"), answers.get("Task")
        if problem := model_id_problem(model_id) or (None if task in TASKS else f"task: not one of {', '.join(TASKS)}"):
            logger.warning("model request #%d skipped: %s", number, problem)
        elif (str(model_id).casefold(), task) not in seen:
            seen.add((str(model_id).casefold(), str(task)))
            out.append(Selection(str(model_id), str(task), f"asked for in issue #{number}"))
    return out
