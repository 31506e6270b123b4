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
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from torch import nn

from .float32_linear import float32_linear
from .weight_dtype import SIXTEEN_BIT, cast_embedding_output

# Set on a module whose forward this module wrapped (the wrapping is done once).
WRAPPED = "_attention_viz_float32"


def compute_hooked_in_float32(model: nn.Module) -> None:
    """Make every module of ``model`` that holds 16-bit parameters compute in float32,
    inside accelerate's hooks where it has them (the module doc).  Idempotent."""
    for module in model.modules():
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
