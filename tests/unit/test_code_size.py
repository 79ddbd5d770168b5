"""Classes and functions a reader can hold (issue #54): no class in src/ over 400 lines and no
function over 100, docstrings included. A piece that grows past them is split along its stages
(checked, started, finished, stopped; validate, expand, adapt), as TfTask, HostRun and
build_plan were."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "dtfbench"
MAX_CLASS, MAX_FUNCTION = 400, 100


def test_no_class_or_function_is_too_long_to_hold():
    too_long = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            limit = {ast.ClassDef: MAX_CLASS, ast.FunctionDef: MAX_FUNCTION, ast.AsyncFunctionDef: MAX_FUNCTION}.get(
                type(node)
            )
            if limit is not None and node.end_lineno - node.lineno + 1 > limit:
                lines = node.end_lineno - node.lineno + 1
                too_long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {lines} lines (at most {limit})")
    assert too_long == [], too_long
