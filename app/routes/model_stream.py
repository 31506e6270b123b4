"""``POST /api/model/attention/stream`` and ``/generate/stream``: the plain POSTs' answers
after their progress.

Same bodies, same answers (``app.attention_answer``, ``generate.generation_answer``),
sent as Server-Sent Events by ``app.work_stream``: ``progress`` per layer of the
forward pass (per token written for a generation), then ``result`` or ``error``.
The page uses it for every maps request and aborts the older one when a newer one
starts; the closed connection stops the pass within one layer.

No request names a "group" whose older requests the server should cancel: that
would be state shared between requests in one process (a second replica would
not know it), while a client that closes its older connection says the same
thing to whichever replica serves it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from ..attention_answer import attention_answer
from ..model_registry import get_registry
from ..schemas.model import GenerateRequest, ModelAttentionRequest
from ..schemas.model_events import STREAM_DOCS, AttentionStreamMessage, GenerateStreamMessage
from ..work_stream import WorkStreamResponse
from .common import ERRORS, EventStreamDocs, SettingsDep, json_error
from .generate import generation_answer

router = APIRouter(prefix="/api/model", tags=["model"])

STREAM_ERRORS = {k: json_error(v["description"]) for k, v in ERRORS.items() if k != 404}
F = TypeVar("F", bound=Callable[..., Any])


def stream_route(path: str, message: type[BaseModel]) -> Callable[[F], F]:
    """``router.post(path)`` answering ``text/event-stream``, its events typed as ``message``."""
    return router.post(
        path,
        response_class=EventStreamDocs,
        status_code=200,
        responses={200: {"model": message, "description": STREAM_DOCS}, **STREAM_ERRORS},
    )


@stream_route("/attention/stream", AttentionStreamMessage)
async def model_attention_stream(
    body: ModelAttentionRequest, request: Request, settings: SettingsDep
) -> Response:
    """``POST /api/model/attention``'s answer as events: `progress` per layer, then `result`
    (the POST's body) or `error` (the POST's error body and `status`)."""

    def work() -> object:  # on a model thread: the registry may scan or load a model
        return attention_answer(body, get_registry(request), settings)

    return WorkStreamResponse(work)


@stream_route("/generate/stream", GenerateStreamMessage)
async def generate_stream(
    body: GenerateRequest, request: Request, settings: SettingsDep
) -> Response:
    """``POST /api/model/generate``'s answer as events: `progress` (the prompt's layers,
    then `generate`: tokens written of `max_new_tokens`), then `result` or `error`."""

    def work() -> object:
        return generation_answer(body, get_registry(request), settings)

    return WorkStreamResponse(work)
