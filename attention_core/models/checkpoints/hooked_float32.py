"""16-bit layers spread by accelerate, computed in float32 on the CPU.

A model spread over memory and disk (``base.placement``) cannot take
``weight_dtype``'s parametrization: accelerate's hooks set each module's
weights by name before it runs (read from disk, or moved between devices)
and put them back after.  So the float32 step goes inside the hook: every
module holding 16-bit parameters runs, once accelerate has put its weights
in place, with them read as float32 for that call only.  A plain
``nn.Linear`` reads its weight block by block (``float32_linear``); any
other module (norms, biases: a few kB) sees float32 copies of its own
parameters while its forward runs.  Embeddings are looked up as stored and
their output cast (exact).  The weights themselves stay as stored.

Only the modules that compute on the CPU are changed: where accelerate runs
a module is its hook's ``execution_device`` (its own hook's, else its nearest
hooked ancestor's), not where its weights are kept.  On a map with a GPU,
accelerate runs the layers it keeps in CPU memory or on disk on the map's
first GPU (``dispatch_model``: CPU and disk are offload there), whose 16-bit
arithmetic is fast: those stay 16-bit.  On a CPU-only map every layer
computes on the CPU, in float32.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .float32_linear import float32_linear
from .weight_dtype import SIXTEEN_BIT, cast_embedding_output

# Set on a module whose forward this module wrapped (the wrapping is done once).
WRAPPED = "_attention_viz_float32"


def hook_device(module: nn.Module) -> torch.device | None:
    """The ``execution_device`` of ``module``'s own accelerate hook (None: no hook says)."""
    hook = getattr(module, "_hf_hook", None)
    for one in getattr(hook, "hooks", (hook,)):  # a SequentialHook holds several
        device = getattr(one, "execution_device", None)
        if isinstance(device, int):
            return torch.device("cuda", device)
        if device is not None:
            return torch.device(device)
    return None


def computing_on_cpu(model: nn.Module) -> list[nn.Module]:
    """The modules of ``model`` that compute on the CPU (the module doc): by the nearest
    accelerate hook's execution device, else (no hook above) by their parameters'."""
    found: list[nn.Module] = []
    stack: list[tuple[nn.Module, torch.device | None]] = [(model, None)]
    while stack:
        module, inherited = stack.pop()
        device = hook_device(module) or inherited
        own = [p.device for p in module._parameters.values() if p is not None]
        if (device or (own[0] if own else torch.device("cpu"))).type == "cpu":
            found.append(module)
        stack.extend((child, device) for child in module.children())
    return found


def compute_hooked_in_float32(model: nn.Module) -> None:
    """Make every module of ``model`` that computes on the CPU and holds 16-bit parameters
    compute in float32, inside accelerate's hooks where it has them (the module doc).
    Idempotent."""
    for module in computing_on_cpu(model):
        if isinstance(module, nn.Embedding):
            cast_embedding_output(module)
            continue
        own = [p for p in module._parameters.values() if p is not None]
        if getattr(module, WRAPPED, False) or not any(p.dtype in SIXTEEN_BIT for p in own):
            continue
        hooked = hasattr(module, "_hf_hook") and hasattr(module, "_old_forward")
        name = "_old_forward" if hooked else "forward"
        inner: Callable[..., Any] = getattr(module, name)
        setattr(module, name, functools.update_wrapper(_float32_call(module, inner), inner))
        setattr(module, WRAPPED, True)


def _float32_call(module: nn.Module, forward: Callable[..., Any]) -> Callable[..., Any]:
    if isinstance(module, nn.Linear) and type(module).forward is nn.Linear.forward:
        linear = module

        def run_linear(*args: Any, **kwargs: Any) -> Any:
            x = args[0] if args else kwargs["input"]
            return float32_linear(x, linear.weight, linear.bias)

        return run_linear
    lock = threading.Lock()  # the float32 copies are swapped in for one call at a time

    def run(*args: Any, **kwargs: Any) -> Any:
        with lock:
            held = {
                name: p
                for name, p in module._parameters.items()
                if p is not None and p.dtype in SIXTEEN_BIT
            }
            for name, p in held.items():
                module._parameters[name] = p.float()  # type: ignore[assignment]
            try:
                return forward(*args, **kwargs)
            finally:
                module._parameters.update(held)

    return run
