"""What every API router shares: the settings dependency, error docs, JSON replies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, TypeGuard

from fastapi import Depends
from fastapi.responses import JSONResponse

from attention_core.models import TextModel

from ..json_reply import json_response as json_response
from ..schemas.attention import ErrorBody
from ..settings import Settings, get_settings

if TYPE_CHECKING:  # importing it imports transformers (the optional extra)
    from attention_core.models.hf.seq2seq import EncoderDecoder

SettingsDep = Annotated[Settings, Depends(get_settings)]


def reads_target(model: TextModel) -> TypeGuard[EncoderDecoder]:
    """Whether ``model`` reads a target beside its text (its stacks say so)."""
    return model.capabilities.reads_target


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Body not UTF-8 JSON, or nested too deeply"},
    404: {"model": ErrorBody, "description": "No such item"},
    413: {"model": ErrorBody, "description": "Body larger than the limit"},
    422: {"model": ErrorBody, "description": "Invalid input or over a size limit"},
}


def json_error(description: str) -> dict[str, Any]:
    """An error answer documented as JSON (``ErrorBody``), not as the route's event stream."""
    schema = {"$ref": f"#/components/schemas/{ErrorBody.__name__}"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


class EventStreamDocs(JSONResponse):
    """For the OpenAPI document only (a streaming route returns its own response): FastAPI
    documents the 200 "model" of a JSONResponse class as it is, under this media type;
    of any other class, as that schema *and* ``type: string``, which nothing matches."""

    media_type = "text/event-stream"
