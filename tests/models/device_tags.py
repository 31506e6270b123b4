"""A second device on a machine without one: which tensors would live on the GPU, and
which op would mix them with CPU tensors there.

On a GPU, an op whose tensor arguments sit on two devices fails ("Expected all tensors
to be on the same device"), unless the CPU one is a 0-dim scalar or an index.  CI has no
GPU, so ``DeviceTags`` plays one on the CPU: the model's weights are *tagged* (they
would be on the device), tags flow to every op's outputs, a factory makes a tagged
tensor when it is told ``device=`` a tagged tensor's device (``cpu:0`` here: a tagged
tensor's ``.device`` answers ``cpu:0``, which torch accepts and the CPU ignores) or runs
inside ``on_device()`` (``running_on``'s ``with device:`` on a GPU), ``.cpu()`` or
``.to("cpu")`` untags.  An op given both a tagged tensor and an untagged one of more
than one element is recorded in ``mixed``, with the line of our code that made it.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakTensorKeyDictionary

DEVICE = torch.device("cpu", 0)  # the played GPU: a CPU device torch tells apart
_DEVICE = torch.Tensor.device  # the getter ``tensor.device`` calls
# Ops whose index arguments may stay on the CPU for a GPU tensor (torch moves them).
_INDEXING = {torch.Tensor.__getitem__}
_FACTORIES = {
    torch.ones,
    torch.zeros,
    torch.empty,
    torch.full,
    torch.arange,
    torch.tensor,
    torch.rand,
    torch.randn,
    torch.linspace,
    torch.eye,
    torch.as_tensor,
}


def _is_device(value: Any) -> bool:
    return isinstance(value, torch.device) and value == DEVICE and value.index == 0


class DeviceTags(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.tags = WeakTensorKeyDictionary()
        self.default_on_device = False
        self.mixed: list[str] = []

    def tag(self, *tensors: torch.Tensor) -> None:
        for t in tensors:
            self.tags[t] = True

    def tagged(self, t: torch.Tensor) -> bool:
        return t in self.tags

    @contextlib.contextmanager
    def on_device(self) -> Iterator[None]:
        """New tensors on the played device within the block, as ``with device:``."""
        before, self.default_on_device = self.default_on_device, True
        try:
            yield
        finally:
            self.default_on_device = before

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__self__", None) is _DEVICE and func.__name__ == "__get__":
            tensor = args[0]
            return DEVICE if self.tagged(tensor) else func(*args)
        out = func(*args, **kwargs)
        if self._leaves(func, args, kwargs) and out is args[0]:
            out = out.clone()  # a real transfer makes a new tensor: the original stays tagged
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if func in _FACTORIES:
            device = kwargs.get("device")
            on = _is_device(device) or (device is None and self.default_on_device)
        elif func is torch.Tensor.numpy:
            if self.tagged(args[0]):
                self._record(func, inputs)  # a GPU tensor has no numpy view
            on = False
        elif self._leaves(func, args, kwargs):
            on = False
        elif getattr(func, "__name__", "") == "to":
            on = self._to_target(args, kwargs)
        else:
            checked = inputs[:1] if func in _INDEXING else inputs
            on = any(self.tagged(t) for t in checked)
            if on and any(not self.tagged(t) and t.dim() > 0 for t in checked):
                self._record(func, checked)
        if on:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.tag(t)
        return out

    def _leaves(self, func: Any, args: Any, kwargs: Any) -> bool:
        """Whether ``func`` moves a tagged tensor to the CPU (``.cpu()``, ``.to("cpu")``)."""
        name = getattr(func, "__name__", "")
        if not args or not isinstance(args[0], torch.Tensor) or not self.tagged(args[0]):
            return False
        return name == "cpu" or (name == "to" and not self._to_target(args, kwargs))

    def _to_target(self, args: Any, kwargs: Any) -> bool:
        """Whether ``tensor.to(...)`` lands on the played device (dtype alone: stays)."""
        for a in list(args[1:]) + [kwargs.get("device")]:
            if isinstance(a, torch.Tensor):
                return self.tagged(a)
            if isinstance(a, (str, torch.device)):
                return _is_device(torch.device(a))
        return self.tagged(args[0])

    def _record(self, func: Any, inputs: list[torch.Tensor]) -> None:
        where = [
            f"{f.filename.split('/work/')[-1]}:{f.lineno} {f.name}"
            for f in traceback.extract_stack()
            if "attention_core" in f.filename or "/app/" in f.filename
        ]
        shapes = [(tuple(t.shape), self.tagged(t)) for t in inputs]
        self.mixed.append(f"{getattr(func, '__name__', func)} {shapes} at {where[-1:]}")
