"""The Server-Sent Events of the streamed model requests, as models for the OpenAPI document.

``POST /api/model/attention/stream`` and ``POST /api/model/generate/stream`` send
``progress`` events, then one ``result`` (the plain POST's body) or one ``error``
(the plain POST's error body and status); ``app/work_stream.py`` writes them.
One ``*StreamMessage`` per SSE message, as ``TrainEventMessage`` for training.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, RootModel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from .attention import ErrorItem
from .model import GenerateResponse, ModelAttentionResponse


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkProgressEvent(_Event):
    """`progress`: ``done`` of ``total`` units of ``stage`` are finished."""

    stage: str = Field(
        description="`load`: parts of a model's weights read in as it loads (the layers, "
        "and the embeddings and head as one more part); "
        "`forward`: layers of the forward pass (an encoder-decoder: the "
        "encoder's layers then the decoder's); `generate`: tokens written; `maps`: "
        "layers whose maps are built from a long input's kept pass; `value_norm`: "
        "layers whose value-weighted maps are done (one forward each); `queued`: "
        "waiting for a model thread (done and total 0)"
    )
    done: int = Field(ge=0)
    total: int = Field(ge=0)
    elapsed_s: float = Field(description="seconds since the work started")
    eta_s: float | None = Field(
        description="the stage's remaining seconds at its pace so far (null before its "
        "first unit); the answer's assembly after the last stage is not included"
    )


class WorkErrorEvent(_Event):
    """`error`: the answer the plain POST would give: its ``status`` and its body."""

    status: int = Field(description="the plain POST's HTTP status (404, 422, 500)")
    detail: list[ErrorItem]


class _Message(BaseModel):
    """One message; in the OpenAPI document ``data`` is what the wire carries: a string of
    JSON (``contentMediaType``) whose ``contentSchema`` is the event's model, so that a
    client or a fuzzer (schemathesis) checks the decoded event."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        target["properties"]["data"] = {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": target["properties"]["data"],
        }
        return schema


class WorkProgressMessage(_Message):
    event: Literal["progress"]
    data: WorkProgressEvent


class WorkErrorMessage(_Message):
    event: Literal["error"]
    data: WorkErrorEvent


class AttentionResultMessage(_Message):
    event: Literal["result"]
    data: ModelAttentionResponse


class GenerateResultMessage(_Message):
    event: Literal["result"]
    data: GenerateResponse


class AttentionStreamMessage(
    RootModel[
        Annotated[
            WorkProgressMessage | AttentionResultMessage | WorkErrorMessage,
            Field(discriminator="event"),
        ]
    ]
):
    """One SSE message of the attention stream: ``event: <event>``, ``data: <JSON>``."""


class GenerateStreamMessage(
    RootModel[
        Annotated[
            WorkProgressMessage | GenerateResultMessage | WorkErrorMessage,
            Field(discriminator="event"),
        ]
    ]
):
    """One SSE message of the generation stream: ``event: <event>``, ``data: <JSON>``."""


STREAM_DOCS = """\
`text/event-stream`, one event per message (`event: <name>` then `data: <JSON>`); the
schema below is that of one message:

- `progress`: `stage`, `done` of `total` (`load`: parts of the weights read as the
  model loads; `forward`: layers, after each one),
  `elapsed_s`, `eta_s` (the stage's remaining seconds at its pace so far).
- `result`, once, last: exactly the body the plain POST answers.
- `error`, once, last, instead of `result`: the plain POST's error body and its `status`.

A body that fails validation is answered as by the plain POST (422 JSON, no stream).
Closing the connection cancels the work within one layer (a page aborting an older
request when a newer one starts).
"""
