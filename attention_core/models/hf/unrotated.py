"""q and k before RoPE, for a transformers attention module that projects them separately.

The captured query and key are what attention received: after the family's q/k
norms (Qwen3, OLMo 2, Gemma 3) and after RoPE.  The step-by-step view shows the
projections before the rotation too, as it does for the hand-written Llama: here
they are the outputs of ``q_norm``/``k_norm`` when the module has them, else of
``q_proj``/``k_proj``, reshaped to (B, H, T, D).  Fused projections (GPT-NeoX's
``query_key_value``, Phi-3's ``qkv_proj``) give none.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


def uses_rope(config: Any) -> bool:
    """The text config places tokens by rotary positions (RoPE)."""
    text = config.get_text_config()
    return any(
        getattr(text, name, None) is not None
        for name in ("rope_parameters", "rope_theta", "rotary_pct", "partial_rotary_factor")
    )


@dataclass
class Unrotated:
    """What the hooks grabbed: the (B, T, ...) outputs by name ("q", "k"), and whether
    they come from a per-head norm (``normed``)."""

    normed: bool = False
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)

    def heads(self, name: str, head_dim: int) -> torch.Tensor | None:
        """The grabbed output as (B, H, T, D), or None when nothing was grabbed."""
        out = self.outputs.get(name)
        if out is None:
            return None
        return out.reshape(out.shape[0], out.shape[1], -1, head_dim).transpose(1, 2)


def _source(module: nn.Module, name: str) -> nn.Module | None:
    """The submodule whose output is ``name`` (q or k) before the rotation."""
    for attribute in (f"{name}_norm", f"{name}_proj"):
        found = getattr(module, attribute, None)
        if isinstance(found, nn.Module):
            return found
    return None


@contextmanager
def grabbing_unrotated(module: nn.Module) -> Iterator[Unrotated]:
    """Hooks on ``module``'s q and k sources for the block, which keep what this thread's
    forward passes give them (the modules are shared: another thread's are left alone)."""
    owner = threading.get_ident()
    grabbed = Unrotated(normed=isinstance(getattr(module, "q_norm", None), nn.Module))
    sources = {name: _source(module, name) for name in ("q", "k")}
    if not isinstance(getattr(module, "q_proj", None), nn.Module) or None in sources.values():
        yield grabbed
        return
    handles = []
    for name, source in sources.items():

        def grab(_m: nn.Module, _args: Any, output: Any, name: str = name) -> None:
            if threading.get_ident() == owner and isinstance(output, torch.Tensor):
                grabbed.outputs[name] = output

        assert source is not None
        handles.append(source.register_forward_hook(grab))
    try:
        yield grabbed
    finally:
        for handle in handles:
            handle.remove()
