"""Training events as Server-Sent Events: ``event: <name>`` and one line of JSON data.

The child process (``worker.py``) writes these frames and the route relays
them unchanged, so the server's event loop never touches a tensor.
"""

from __future__ import annotations

from typing import Any

import orjson
import torch

from attention_core.models.maps.transport import encode_compact
from attention_core.training import Done, Event, Progress, Sample, Snapshot, Start


def frame(name: str, payload: object) -> bytes:
    """One SSE message; orjson escapes newlines, so the data is a single line."""
    data = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
    return b"event: " + name.encode("ascii") + b"\ndata: " + data + b"\n\n"


def error_frame(loc: list[str | int], msg: str, kind: str) -> bytes:
    return frame("error", {"detail": [{"loc": loc, "msg": msg, "type": kind}]})


def model_url(name: str) -> str:
    return f"/model?model={name}"


def event_frame(event: Event, name: str) -> bytes:
    """The frame of one core event; ``name`` is the model's name once saved."""
    payload: dict[str, Any]
    if isinstance(event, Progress):
        return frame("progress", _fields(event))
    if isinstance(event, Snapshot):
        if event.attentions:
            stacked = torch.stack(event.attentions)  # (L, H, T, T)
            attention: object = encode_compact(stacked, "uint8").describe()
        else:
            attention = None
        scores = {k: v.tolist() for k, v in (event.scores or {}).items()}
        return frame("snapshot", {"step": event.step, "attention": attention, "scores": scores})
    if isinstance(event, Sample):
        return frame("sample", _fields(event))
    if isinstance(event, Start):
        payload = _fields(event)
        payload["config"] = event.config.to_dict()
        payload["fixed_at_zero"] = list(payload.pop("frozen"))
        payload["probe_tokens"] = list(event.probe_tokens)
        payload["n_layer"] = event.config.n_layer
        payload["n_head"] = event.config.n_head
        payload["name"] = name
        return frame("start", payload)
    if isinstance(event, Done):
        payload = _fields(event)
        payload.pop("directory")
        payload["train_loss"] = payload.pop("eval_train_loss")
        payload.update(name=name, model_url=model_url(name))
        return frame("done", payload)
    raise TypeError(f"not a training event: {event!r}")


def _fields(event: object) -> dict[str, Any]:
    return dict(vars(event))
