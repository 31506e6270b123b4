"""An integer as JSON Schema has it: a number with no fractional part.

The OpenAPI document calls these fields ``integer``, which JSON Schema satisfies
with ``413.0`` as with ``413``: the server takes both (as 413).  ``413.5``, ``true``
and ``"413"`` stay refused (pydantic's strict int).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Strict


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_whole), Strict()]
