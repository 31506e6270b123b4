"""Where a model's weights live and its passes run (``cpu``, or ``cuda`` when torch has it).

Results always come back to the CPU (``to_cpu``): the API, the caches and the
payload code read them as CPU tensors, whatever device computed them.  While a
model runs, ``running_on`` makes torch's factory functions (``torch.tensor``,
``torch.zeros`` ...) create on the model's device, so the code that builds
inputs, caches and masks needs no device argument.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any, TypeVar

import torch

DEVICES: tuple[str, ...] = ("cpu", "cuda")
CPU = torch.device("cpu")

T = TypeVar("T")


def check_device(name: str) -> torch.device:
    """The device called ``name``; a ``ValueError`` that says why when it cannot be used."""
    if name not in DEVICES:
        raise ValueError(f"device {name!r} is not one of {', '.join(DEVICES)}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "ATTENTION_VIZ_DEVICE is 'cuda' but this torch sees no CUDA GPU "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'}): "
            "unset it or set it to 'cpu'"
        )
    return torch.device(name)


@contextlib.contextmanager
def running_on(device: torch.device) -> Iterator[None]:
    """New tensors on ``device`` within the block (nothing changes on the CPU)."""
    if device.type == "cpu":
        yield
        return
    with device:
        yield


def move(value: T, device: torch.device, dtype: torch.dtype | None = None) -> T:
    """``value`` with every tensor in it on ``device`` (floating ones as ``dtype`` when
    given): tensors, tuples, lists, dicts and dataclasses (rebuilt, so frozen ones work)
    are walked; anything else is kept."""
    moved: Any
    if isinstance(value, torch.Tensor):
        cast = dtype is not None and value.dtype.is_floating_point
        moved = value.to(device, dtype) if cast else value.to(device)
    elif isinstance(value, tuple) and not hasattr(value, "_fields"):
        items = tuple(move(v, device, dtype) for v in value)
        moved = value if all(a is b for a, b in zip(items, value, strict=True)) else items
    elif isinstance(value, list):
        moved = [move(v, device, dtype) for v in value]
    elif isinstance(value, dict):
        moved = {k: move(v, device, dtype) for k, v in value.items()}
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: move(getattr(value, f.name), device, dtype) for f in dataclasses.fields(value)
        }
        changed = any(changes[name] is not getattr(value, name) for name in changes)
        moved = dataclasses.replace(value, **changes) if changed else value
    else:
        moved = value
    return moved  # type: ignore[no-any-return]


def to_cpu(value: T) -> T:
    """``move(value, cpu)``: the same objects when every tensor is on the CPU already."""
    return move(value, CPU)
