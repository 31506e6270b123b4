"""The Server-Sent Events of ``POST /api/train``, as models for the OpenAPI document.

The worker process writes the frames (``app/training/sse.py``); these models say
what each event's ``data`` holds, appear in ``/openapi.json`` as the 200 answer of
``/api/train`` (one ``TrainEventMessage`` per SSE message), and are checked
against every frame a real run sends (tests/api/test_train_openapi.py).  They
forbid unknown fields, so a field added to a frame must be added here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel
from pydantic.dataclasses import dataclass as pydantic_dataclass

from attention_core.training.events import Progress, Sample

from .attention import ErrorItem
from .model import CompactTensorOut


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrainStartEvent(_Event):
    """`start`: once, before the first step: what is trained, and the line to beat."""

    name: str = Field(description="the model's name once saved (GET /api/models)")
    config: dict[str, Any] = Field(description="every setting of the run, defaults filled in")
    n_layer: int
    n_head: int
    vocab_size: int
    parameters: int
    trainable_parameters: int
    fixed_at_zero: list[str] = Field(description="parameters the architecture keeps at zero")
    train_chars: int
    val_chars: int
    corpus_sha256: str
    baseline_val_loss: float = Field(description="the count bigram's val loss")
    probe_tokens: list[str] = Field(description="the probe, one character per token")


# The frames of progress and samples are those events' fields (app/training/sse.py): their
# models are the core dataclasses, as pydantic dataclasses that forbid unknown fields.
@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class TrainProgressEvent(Progress):
    """`progress`: after ``step`` updates; the loss estimates only on evaluation steps."""

    train_loss: Annotated[float | None, Field(description="the last batch's loss (null at step 0)")]


class TrainSnapshotEvent(_Event):
    """`snapshot`: the probe's attention, (layers, heads, T, T) as compact uint8."""

    step: int
    attention: CompactTensorOut | None = Field(description="null for a model without attention")
    scores: dict[str, list[list[float]]] = Field(
        default_factory=dict,
        description="each head-type score (as POST /api/model/head-scores names them) of the "
        "model at this step, layers × heads; empty for a model without attention",
    )


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class TrainSampleEvent(Sample):
    """`sample`: text the model as it is at ``step`` writes after the prompt."""


class TrainDoneEvent(_Event):
    """`done`: the run finished and was saved under ``name``."""

    step: int
    name: str
    model_url: str = Field(description="the model's /model page")
    val_loss: float
    train_loss: float
    untrained_val_loss: float
    baseline_val_loss: float
    elapsed_s: float


class TrainErrorEvent(_Event):
    """`error`: the run stopped; ``detail`` as in every 4xx body."""

    detail: list[ErrorItem]


TRAIN_EVENTS: dict[str, type] = {
    "start": TrainStartEvent,
    "progress": TrainProgressEvent,
    "snapshot": TrainSnapshotEvent,
    "sample": TrainSampleEvent,
    "done": TrainDoneEvent,
    "error": TrainErrorEvent,
}


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrainStartMessage(_Message):
    event: Literal["start"]
    data: TrainStartEvent


class TrainProgressMessage(_Message):
    event: Literal["progress"]
    data: TrainProgressEvent


class TrainSnapshotMessage(_Message):
    event: Literal["snapshot"]
    data: TrainSnapshotEvent


class TrainSampleMessage(_Message):
    event: Literal["sample"]
    data: TrainSampleEvent


class TrainDoneMessage(_Message):
    event: Literal["done"]
    data: TrainDoneEvent


class TrainErrorMessage(_Message):
    event: Literal["error"]
    data: TrainErrorEvent


class TrainEventMessage(
    RootModel[
        Annotated[
            TrainStartMessage
            | TrainProgressMessage
            | TrainSnapshotMessage
            | TrainSampleMessage
            | TrainDoneMessage
            | TrainErrorMessage,
            Field(discriminator="event"),
        ]
    ]
):
    """One SSE message of the stream: ``event: <event>`` then ``data: <data as JSON>``."""
