"""Count the lines of a folder's Python that hold code: not blank, not a comment, not a docstring.

Issue 51 sets a budget on ``pipeline/``'s size in these lines, so that shortening prose earns nothing::

    python3 tests/code_lines.py pipeline        # the total
    python3 tests/code_lines.py pipeline -v     # and each package's share, largest first

A line holds code when a token other than a comment, an indent or a line end starts, ends or runs through it; the lines
of a module's, a class's or a function's docstring do not count.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def code_lines(path: Path) -> int:
    """The lines of ``path`` that hold code."""
    source = path.read_text(encoding="utf-8")
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, _DOCUMENTED) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docstrings)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python3 tests/code_lines.py FOLDER [-v]", file=sys.stderr)
        return 2
    root = Path(argv[0])
    by_part: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        part = path.relative_to(root).parts[0]
        by_part[part] = by_part.get(part, 0) + code_lines(path)
    if "-v" in argv:
        for part, count in sorted(by_part.items(), key=lambda item: -item[1]):
            print(f"{count:7,d}  {part}")
    print(f"{sum(by_part.values()):,d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
