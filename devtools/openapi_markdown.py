"""The API reference page: the app's OpenAPI document written as Markdown.

Rendered at build time from ``create_app().openapi()`` (the same document ``/docs``
and ``/openapi.json`` serve), so the reference can never drift from the code and
the site needs no Swagger UI or network to show it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

Schema = Mapping[str, Any]
REF = "#/components/schemas/"


def anchor(name: str) -> str:
    """The heading id Python-Markdown's toc gives ``### `Name` `` (lower case)."""
    return name.lower()


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def _words(text: str) -> str:
    """Free text in a cell: brackets escaped, so ``[layer, head]`` is no link."""
    return _cell(text.replace("[", "\\[").replace("]", "\\]"))


def _literal(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False).replace("`", "'") + "`"


def type_of(schema: Schema) -> str:
    """A schema's type in a few words: `string`, `integer ≥ 1`, a link to a model, ..."""
    if "$ref" in schema:
        name = str(schema["$ref"]).removeprefix(REF)
        return f"[{name}](#{anchor(name)})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(type_of(part) for part in schema[key])
    if "enum" in schema:
        return " \\| ".join(_literal(value) for value in schema["enum"])
    if "const" in schema:
        return _literal(schema["const"])
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("items")
        return f"array of {type_of(items)}" if items else "array"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {type_of(schema['additionalProperties'])}"
    return f"{kind}{_bounds(schema)}"


def _bounds(schema: Schema) -> str:
    marks = {
        "minimum": "≥",
        "exclusiveMinimum": ">",
        "maximum": "≤",
        "exclusiveMaximum": "<",
        "minLength": "length ≥",
        "maxLength": "length ≤",
        "minItems": "items ≥",
        "maxItems": "items ≤",
    }
    found = [f"{mark} {_number(schema[key])}" for key, mark in marks.items() if key in schema]
    return f" ({', '.join(found)})" if found else ""


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _description(schema: Schema) -> str:
    text = schema.get("description", "")
    if not text:
        for part in schema.get("anyOf", []):
            text = part.get("description", "") or text
    return str(text)


def _examples(schema: Schema) -> str:
    examples = schema.get("examples") or [
        example for part in schema.get("anyOf", []) for example in part.get("examples", [])
    ]
    return "; e.g. " + ", ".join(_literal(example) for example in examples) if examples else ""


def schema_section(name: str, schema: Schema) -> Iterator[str]:
    yield f"### `{name}`"
    yield ""
    if schema.get("description"):
        yield str(schema["description"]).strip()
        yield ""
    properties: Mapping[str, Schema] = schema.get("properties", {})
    if not properties:
        yield f"Type: {type_of(schema)}."
        yield ""
        return
    required = set(schema.get("required", []))
    yield "| field | type | required | default | description |"
    yield "| --- | --- | --- | --- | --- |"
    for field, prop in properties.items():
        default = _literal(prop["default"]) if "default" in prop else ""
        words = _description(prop) + _examples(prop)
        yield (
            f"| `{field}` | {_cell(type_of(prop))} | {'yes' if field in required else ''} "
            f"| {_cell(default)} | {_words(words)} |"
        )
    yield ""


def _body_type(operation: Schema) -> str:
    content: Mapping[str, Schema] = operation.get("requestBody", {}).get("content", {})
    kinds = [f"{type_of(body.get('schema', {}))} ({kind})" for kind, body in content.items()]
    return ", ".join(kinds)


def operation_section(method: str, path: str, operation: Schema) -> Iterator[str]:
    yield f"### `{method.upper()} {path}`"
    yield ""
    if operation.get("description"):
        yield str(operation["description"]).strip()
        yield ""
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        where, name = parameter["in"], parameter["name"]
        words = _words(parameter.get("description", ""))
        yield f"- {where} parameter `{name}`: {type_of(parameter.get('schema', {}))}. {words}"
    body = _body_type(operation)
    if body:
        yield f"- body: {body}"
    for status, response in operation.get("responses", {}).items():
        kinds = response.get("content", {})
        types = ", ".join(type_of(spec.get("schema", {})) for spec in kinds.values())
        yield f"- **{status}** {_words(response.get('description', ''))}" + (
            f": {types}" if types else ""
        )
    yield ""


def reference(document: Schema) -> str:
    """The whole reference: every operation, then every schema, as Markdown."""
    lines = ["## Endpoints", ""]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            lines.extend(operation_section(method, path, operation))
    lines.extend(["## Schemas", ""])
    for name, schema in document["components"]["schemas"].items():
        lines.extend(schema_section(name, schema))
    return "\n".join(lines)
