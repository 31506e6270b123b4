"""Pydantic fields read from one of the core's dataclasses, so that a fact the core declares
(a field's name, type, default and, in its metadata, its ``description``) is written once:
an answer built from that dataclass is documented by the same fields."""

from __future__ import annotations

import dataclasses
from typing import Any, get_type_hints

from pydantic import Field


def dataclass_fields(source: type, *, nullable: bool = False) -> dict[str, Any]:
    """``create_model``'s field definitions of the dataclass ``source``, in its order;
    ``nullable``: each field may also be null (a size that could not be read) and has no
    default."""
    hints = get_type_hints(source)
    found: dict[str, Any] = {}
    for item in dataclasses.fields(source):
        kind = hints[item.name]
        description = item.metadata.get("description")
        if nullable:
            found[item.name] = (kind | None, Field(description=description))
        elif item.default is dataclasses.MISSING:
            found[item.name] = (kind, Field(description=description))
        else:
            found[item.name] = (kind, Field(item.default, description=description))
    return found
