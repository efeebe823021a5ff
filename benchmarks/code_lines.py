"""Count the core's code lines: vibe_agent/*.py without docstrings, comments and blank lines.

    python benchmarks/code_lines.py [files...]

A code line is a line that holds at least one token other than a comment, a newline or
indentation, and is not part of a docstring (the first string statement of a module,
class or function). Found with `ast` (the docstrings) and `tokenize` (the rest), so a
"#" inside a string or a line continued in brackets is counted as Python reads it.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "vibe_agent"
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENCODING, tokenize.ENDMARKER}


def docstring_lines(tree: ast.Module) -> set[int]:
    """The line numbers every docstring in `tree` spans."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                end = body[0].end_lineno or body[0].lineno
                lines.update(range(body[0].lineno, end + 1))
    return lines


def code_lines(source: str) -> int:
    """How many lines of `source` hold code (not a docstring, a comment or a blank)."""
    skip = docstring_lines(ast.parse(source))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in skip)
    return len(lines)


def core_counts() -> dict[str, int]:
    """Code lines of each vibe_agent/*.py, by file name."""
    return {path.name: code_lines(path.read_text(encoding="utf-8"))
            for path in sorted(CORE.glob("*.py"))}


def main(argv: list[str]) -> None:
    counts = ({Path(name).name: code_lines(Path(name).read_text(encoding="utf-8")) for name in argv}
              if argv else core_counts())
    for name, count in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"{count:6}  {name}")
    print(f"{sum(counts.values()):6}  total")


if __name__ == "__main__":
    main(sys.argv[1:])
