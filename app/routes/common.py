"""What every API router shares: the settings dependency, error docs, JSON replies."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import Depends, Response

from ..schemas.attention import ErrorBody
from ..settings import Settings, get_settings

SettingsDep = Annotated[Settings, Depends(get_settings)]

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Body not UTF-8 JSON, or nested too deeply"},
    404: {"model": ErrorBody, "description": "No such item"},
    413: {"model": ErrorBody, "description": "Body larger than the limit"},
    422: {"model": ErrorBody, "description": "Invalid input or over a size limit"},
}


def json_response(payload: object) -> Response:
    """JSON via orjson: float32 arrays as shortest exact decimals, -inf as null."""
    return Response(
        orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json"
    )
