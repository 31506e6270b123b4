"""Every error `type` the code can answer is a row of the docs' error table (docs/api.md).

The types are read from the source with ``ast``: a ``kind="..."`` argument, a
``kind = "..."`` assignment, the type argument of ``error_response`` / ``_refuse`` /
``error_frame``, a constant of ``attention_core/errors.py`` named there.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TYPE = re.compile(r"^[a-z]+(_[a-z]+)+$")
# The position of the error type among each helper's positional arguments.
TYPE_ARGUMENT = {"error_response": 3, "_refuse": 4, "error_frame": 2}
CONSTANTS = {
    target.id: node.value.value
    for node in ast.parse((ROOT / "attention_core/errors.py").read_text()).body
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
    for target in node.targets
    if isinstance(target, ast.Name) and isinstance(node.value.value, str)
}


def _strings(node: ast.AST | None) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        if name in CONSTANTS:
            yield CONSTANTS[name]
    elif isinstance(node, ast.IfExp):
        yield from _strings(node.body)
        yield from _strings(node.orelse)


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def error_types(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "kind":
                    yield from _strings(keyword.value)
            position = TYPE_ARGUMENT.get(_name(node.func))
            if position is not None and len(node.args) > position:
                yield from _strings(node.args[position])
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "kind" for t in node.targets
        ):
            yield from _strings(node.value)


def test_every_error_type_is_in_the_error_table() -> None:
    found: set[str] = set()
    for path in [*(ROOT / "app").rglob("*.py"), *(ROOT / "attention_core").rglob("*.py")]:
        found.update(t for t in error_types(ast.parse(path.read_text())) if TYPE.match(t))
    assert {"spec_error", "limit_exceeded", "host_not_allowed", "empty_input"} <= found
    table = (ROOT / "docs/api.md").read_text(encoding="utf-8")
    rows = {
        name
        for line in table.splitlines()
        if line.startswith("| ")
        for name in re.findall(r"`([a-z_]+)`", line.split(" | ")[0])
    }
    assert sorted(found - rows) == []
