"""The templates' environment: jinja2 with StrictUndefined and the filters that make untrusted text safe.

Text that came from the Hub or from an error message is never inserted raw: into Python it goes through
:func:`py_literal` (a ``repr`` of plain JSON values, which cannot break out of a literal), into Markdown through
:func:`md_cell`, into YAML through :func:`yaml_scalar`. The HTML page's environment (:mod:`pipeline.page.html`)
autoescapes.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import jinja2

from pipeline.errors import PipelineError


def py_literal(value: Any) -> str:
    """A Python literal for a JSON-like value (str, int, float, bool, None, list, dict of those).

    Raises:
        PipelineError: any other type (so a template never receives an object whose repr is arbitrary).
    """
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise PipelineError("non-finite float in a generated script")
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        if bad := [key for key in value if not isinstance(key, str)]:
            raise PipelineError(f"dict key {bad[0]!r} is not a string")
        return "{" + ", ".join(f"{py_literal(key)}: {py_literal(item)}" for key, item in value.items()) + "}"
    raise PipelineError(f"cannot render {type(value).__name__} as a Python literal")


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def md_cell(value: Any) -> str:
    """Text safe inside a Markdown table cell: one line, Markdown and HTML characters escaped."""
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    return _MD_SPECIAL.sub(r"\\\1", text)


def yaml_scalar(value: Any) -> str:
    """A YAML scalar: JSON strings are valid YAML double-quoted scalars, so json.dumps quotes safely."""
    return json.dumps("" if value is None else str(value), ensure_ascii=True)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pipeline.render", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,  # package files: no stat of the template on every render (a build renders hundreds)
    )
    env.filters["py"] = py_literal
    env.filters["md"] = md_cell
    env.filters["yaml"] = yaml_scalar
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
