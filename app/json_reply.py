"""The API's JSON replies, below the routes (``routes.common`` and ``work_stream`` send them)."""

from __future__ import annotations

import orjson
from fastapi import Response
from pydantic import BaseModel


def json_bytes(payload: object) -> bytes:
    """JSON via orjson: float32 arrays as shortest exact decimals, -inf as null.  A typed
    answer (a pydantic model, ``app.schemas.tensors``) writes the fields it was given."""
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(exclude_unset=True)
    return orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)


def json_response(payload: object) -> Response:
    """``payload`` as an application/json answer (``json_bytes``)."""
    return Response(json_bytes(payload), media_type="application/json")
