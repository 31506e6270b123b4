"""The OpenAPI document's integer bounds as integers, exactly the server's.

FastAPI's schema models hold ``minimum``/``maximum`` as floats, so the document said
``"maximum": 9.223372036854775e+18`` for a seed whose limit is 9223372036854774784
(exactly a double, but a decimal reader takes it as 9223372036854775000) and
``"maximum": 1024.0`` for ``pool``.  An integer field's integral bounds are written
back as the integers they are; and the bounds pydantic leaves under its own names
(``ge``, ``le``: a ``JsonInt | None`` field's, app/schemas/json_int.py) under JSON
Schema's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
JSON_SCHEMA_NAMES = {
    "ge": "minimum",
    "le": "maximum",
    "gt": "exclusiveMinimum",
    "lt": "exclusiveMaximum",
}


def integer_bounds(node: Any) -> Any:
    """``node`` (a JSON document) with every integer schema's whole bounds as ints; in place."""
    if isinstance(node, dict):
        if node.get("type") == "integer":
            for short, key in JSON_SCHEMA_NAMES.items():
                if short in node:
                    node[key] = node.pop(short)
            for key in BOUNDS:
                value = node.get(key)
                if isinstance(value, float) and value.is_integer():
                    node[key] = int(value)
        for value in node.values():
            integer_bounds(value)
    elif isinstance(node, list):
        for value in node:
            integer_bounds(value)
    return node


def with_integer_bounds(openapi: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """An app's ``openapi`` method whose document has integer bounds (``integer_bounds``)."""

    def document() -> dict[str, Any]:
        return integer_bounds(openapi())  # type: ignore[no-any-return]

    return document
