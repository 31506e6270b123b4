"""Training events as Server-Sent Events: ``event: <name>`` and one line of JSON data.

The child process (``worker.py``) writes these frames and the route relays
them unchanged, so the server's event loop never touches a tensor.
"""

from __future__ import annotations

from dataclasses import asdict, is_dataclass

import orjson
import torch
from pydantic import BaseModel

from attention_core.models.maps.transport import encode_compact
from attention_core.training import Done, Event, Progress, Sample, Snapshot, Start

from ..schemas.attention import ErrorItem
from ..schemas.model import CompactTensorOut
from ..schemas.train_events import (
    TrainDoneEvent,
    TrainErrorEvent,
    TrainProgressEvent,
    TrainSampleEvent,
    TrainSnapshotEvent,
    TrainStartEvent,
)


def frame(name: str, payload: object) -> bytes:
    """One SSE message; orjson escapes newlines, so the data is a single line.  An event
    (one of ``app.schemas.train_events``) is written as the fields it was given."""
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(exclude_unset=True)
    elif is_dataclass(payload) and not isinstance(payload, type):
        payload = asdict(payload)
    data = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
    return b"event: " + name.encode("ascii") + b"\ndata: " + data + b"\n\n"


def error_frame(loc: list[str | int], msg: str, kind: str) -> bytes:
    return frame("error", TrainErrorEvent(detail=[ErrorItem(loc=loc, msg=msg, type=kind)]))


def model_url(name: str) -> str:
    return f"/model?model={name}"


def event_frame(event: Event, name: str) -> bytes:
    """The frame of one core event; ``name`` is the model's name once saved."""
    if isinstance(event, Progress):
        return frame("progress", TrainProgressEvent(**asdict(event)))
    if isinstance(event, Snapshot):
        return frame("snapshot", _snapshot(event))
    if isinstance(event, Sample):
        return frame("sample", TrainSampleEvent(**asdict(event)))
    if isinstance(event, Start):
        return frame("start", _start(event, name))
    if isinstance(event, Done):
        return frame("done", _done(event, name))
    raise TypeError(f"not a training event: {event!r}")


def _snapshot(event: Snapshot) -> TrainSnapshotEvent:
    attention = None
    if event.attentions:
        stacked = torch.stack(event.attentions)  # (L, H, T, T)
        attention = CompactTensorOut.model_validate(encode_compact(stacked, "uint8").describe())
    scores = {k: v.tolist() for k, v in (event.scores or {}).items()}
    return TrainSnapshotEvent(step=event.step, attention=attention, scores=scores)


def _start(event: Start, name: str) -> TrainStartEvent:
    return TrainStartEvent(
        name=name,
        config=event.config.to_dict(),
        n_layer=event.config.n_layer,
        n_head=event.config.n_head,
        vocab_size=event.vocab_size,
        parameters=event.parameters,
        trainable_parameters=event.trainable_parameters,
        fixed_at_zero=list(event.frozen),
        train_chars=event.train_chars,
        val_chars=event.val_chars,
        corpus_sha256=event.corpus_sha256,
        baseline_val_loss=event.baseline_val_loss,
        probe_tokens=list(event.probe_tokens),
    )


def _done(event: Done, name: str) -> TrainDoneEvent:
    return TrainDoneEvent(
        step=event.step,
        name=name,
        model_url=model_url(name),
        val_loss=event.val_loss,
        train_loss=event.eval_train_loss,
        untrained_val_loss=event.untrained_val_loss,
        baseline_val_loss=event.baseline_val_loss,
        elapsed_s=event.elapsed_s,
    )
