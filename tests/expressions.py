"""A small evaluator of GitHub Actions expressions (the `if:` of a job), for tests of workflow guards.

It covers what guards are written with: literals ('text', numbers, true, false, null), context paths
(``github.event_name``), ``== != < <= > >= && || !``, parentheses and the functions ``format``, ``contains``,
``startsWith``, ``endsWith``, ``fromJSON``, ``success``, ``always``, ``cancelled`` and ``failure``. Semantics
follow GitHub's expressions page: string comparison ignores case, ``&&`` and ``||`` return an operand, and
"", 0, null and false are falsy. An expression outside that subset raises ``ValueError``: a guard the
evaluator cannot read fails its test instead of passing by accident.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+(?:\.\d+)?)|(?P<op>==|!=|<=|>=|&&|\|\||[!<>(),])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, position = [], 0
    text = text.strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    while position < len(text):
        if text[position:].isspace():
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"cannot read the expression at {text[position:]!r}")
        kind = match.lastgroup
        assert kind is not None
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


def _truthy(value: Any) -> bool:
    return value not in ("", 0, None, False)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()  # GitHub: "ignores case when comparing strings"
    return a == b


def _format(template: str, *args: Any) -> str:
    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        return {"{{": "{", "}}": "}"}.get(token) or str(args[int(match.group(1))])

    return re.sub(r"\{\{|\}\}|\{(\d+)\}", one, template)


_FUNCTIONS = {
    "format": _format,
    "contains": lambda hay, needle: (
        any(_equal(item, needle) for item in hay)
        if isinstance(hay, list)
        else str(needle).casefold() in str(hay).casefold()
    ),
    "startswith": lambda text, prefix: str(text).casefold().startswith(str(prefix).casefold()),
    "endswith": lambda text, suffix: str(text).casefold().endswith(str(suffix).casefold()),
    "fromjson": json.loads,
    "success": lambda: True,
    "always": lambda: True,
    "cancelled": lambda: False,
    "failure": lambda: False,
}


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], context: dict[str, Any]) -> None:
        self.tokens, self.context, self.at = tokens, context, 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise ValueError("the expression ends early")
        token = self.tokens[self.at]
        if expected is not None and token[1] != expected:
            raise ValueError(f"expected {expected!r}, got {token[1]!r}")
        self.at += 1
        return token

    def parse(self) -> Any:
        value = self.or_()
        if self.at != len(self.tokens):
            raise ValueError(f"unexpected {self.peek()!r}")
        return value

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == "||":
            self.take()
            right = self.and_()
            value = value if _truthy(value) else right
        return value

    def and_(self) -> Any:
        value = self.compare()
        while self.peek() == "&&":
            self.take()
            right = self.compare()
            value = right if _truthy(value) else value
        return value

    def compare(self) -> Any:
        value = self.unary()
        while self.peek() in {"==", "!=", "<", "<=", ">", ">="}:
            op = self.take()[1]
            right = self.unary()
            if op in {"==", "!="}:
                value = _equal(value, right) == (op == "==")
            else:
                value = {"<": value < right, "<=": value <= right, ">": value > right, ">=": value >= right}[op]
        return value

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not _truthy(self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, text = self.take()
        if text == "(":
            value = self.or_()
            self.take(")")
            return value
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "number":
            return float(text) if "." in text else int(text)
        if kind != "name":
            raise ValueError(f"unexpected {text!r}")
        if text in {"true", "false", "null"}:
            return {"true": True, "false": False, "null": None}[text]
        if self.peek() == "(":
            self.take("(")
            args = []
            while self.peek() != ")":
                args.append(self.or_())
                if self.peek() == ",":
                    self.take()
            self.take(")")
            function = _FUNCTIONS.get(text.casefold())
            if function is None:
                raise ValueError(f"unknown function {text}")
            return function(*args)
        value: Any = self.context
        for part in text.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """The value of ``expression`` (with or without ``${{ }}``) in ``context`` (``{"github": {...}, ...}``)."""
    return _Parser(_tokens(expression), context).parse()


def holds(expression: str | None, context: dict[str, Any]) -> bool:
    """Whether a job's ``if:`` lets it run in ``context`` (no ``if:``: always)."""
    return True if expression is None else _truthy(evaluate(str(expression), context))
