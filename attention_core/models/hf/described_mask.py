"""A decoder's plain causal mask described, not built, in a pass without full maps.

``capture.boolean_mask`` always materializes transformers' masks as booleans, a
(1, 1, T, S) tensor per mask type: at T = 32,768 a gigabyte, and a mask the GPU
overview's kernel (``maps.gpu_pooled``) cannot take.  Inside ``describing()`` (a
decoder's long or context-only pass, ``language_model``) the mask function lets
transformers skip a mask wherever its SDPA would rely on ``is_causal`` instead (its
own rule, ``allow_is_causal_skip``: no padding, no sliding window shorter than the
text, no mask function of the family's own on top) and never skips a bidirectional
one, so a missing mask there always means "causal": ``core_attention`` then hands
the pass a causal call (``AttentionCall.is_causal``), which ``LongPass`` keeps as
such and ``gpu_pooled`` can pool.  The state is per thread (a context variable set
around one forward): two requests running one model each describe their own.

A sliding-window layer longer than its window still gets its mask (no call of ours
describes a window yet; the kernel pools no window either).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass
class Described:
    """What the mask function described during one forward: ``causal``, a plain causal
    mask left out (then every attention call given no mask is causal)."""

    causal: bool = False


_STATE: ContextVar[Described | None] = ContextVar("attention_viz_described", default=None)


@contextmanager
def describing(enabled: bool = True) -> Iterator[Described | None]:
    """Plain causal masks described, not built, by the forward run in this block (when
    ``enabled``: a decoder's pass that keeps no full map)."""
    if not enabled:
        yield None
        return
    token = _STATE.set(Described())
    try:
        yield _STATE.get()
    finally:
        _STATE.reset(token)


def describing_now() -> Described | None:
    """This thread's ``Described`` inside ``describing()``; else None."""
    return _STATE.get()


def mask_arguments(kwargs: dict[str, Any]) -> tuple[dict[str, Any], Described | None]:
    """transformers' mask arguments as ``sdpa_mask`` should take them here: outside
    ``describing()`` never a causal skip; inside, transformers' own skip rule for a causal
    mask and never a bidirectional skip (so a None means causal)."""
    state = _STATE.get()
    skip = state is not None and bool(kwargs.get("allow_is_causal_skip", False))
    arguments = {**kwargs, "allow_is_causal_skip": skip}
    if state is not None:
        arguments["allow_is_bidirectional_skip"] = False
    return arguments, state if skip else None


def causal_call(attention_mask: object, num_queries: int) -> bool:
    """Whether a call given ``attention_mask`` is causal by description: no mask, in a
    forward that left a causal mask out, more than one query (one query sees every key:
    transformers' skip of a one-token step)."""
    state = _STATE.get()
    return attention_mask is None and state is not None and state.causal and num_queries > 1
