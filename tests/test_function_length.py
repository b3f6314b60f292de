"""No function of the package is longer than 80 lines: a longer one holds
more than one step of the flow, and each step deserves its own name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "turbospark_ffi"
LIMIT = 80


def long_functions(source: str) -> list[str]:
    return [f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > LIMIT]


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PACKAGE)) for p in SOURCES])
def test_no_function_over_80_lines(path):
    assert long_functions(path.read_text()) == []


def test_the_check_counts_a_functions_lines():
    body = "".join(f"    x = {k}\n" for k in range(LIMIT - 1))
    assert long_functions("def f():\n" + body) == []
    assert long_functions("def f():\n" + body + "    return x\n") == ["f (line 1): 81 lines"]
