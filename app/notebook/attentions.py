"""Attention maps as a notebook view carries them: bertviz's inputs read, long maps pooled.

A *section* is one kind of attention (a decoder-only model's; an encoder-decoder's
encoder, decoder and cross attention), every map stacked as (L, H, Tq, Tk).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attention_core.models.maps.features import attention_rollout, head_average
from attention_core.models.maps.map_grid import MapQuery, shown
from attention_core.models.maps.pooling import Region
from attention_core.models.maps.transport import encode_compact

# Above this many tokens a map is max-pooled in square blocks before it is embedded,
# so a long text's view stays a few MB (the /model page's thumbnails pool at 128 too).
POOL_ABOVE = 128


@dataclass(frozen=True)
class Section:
    """One kind of attention. ``maps``: (L, H, Tq, Tk), rows summing to 1."""

    name: str
    title: str
    queries: tuple[str, ...]
    keys: tuple[str, ...]
    maps: torch.Tensor
    layers: tuple[int, ...]  # the layers shown, numbered from 1
    heads: tuple[int, ...]  # the heads shown, numbered from 1
    causal: bool = False
    self_attention: bool = True
    special: tuple[bool, ...] | None = None
    token_type_ids: tuple[int, ...] | None = None
    complete: bool = True  # every layer and every head (rollout can be computed)


def stack_attention(attention: Any, field: str = "attention") -> torch.Tensor:
    """transformers' ``output_attentions`` (a tuple of (1, H, Tq, Tk) per layer), a tensor or
    array of (L, H, Tq, Tk) (a batch of one allowed), as float32 (L, H, Tq, Tk)."""
    if isinstance(attention, list | tuple):
        if not attention:
            raise ValueError(f"{field}: no layers")
        layers = [_tensor(a, field) for a in attention]
        batches = {a.shape[0] for a in layers if a.dim() == 4}
        if batches - {1}:
            raise ValueError(f"{field}: a batch of {max(batches)}; pass one text (batch 1)")
        layers = [a.squeeze(0) if a.dim() == 4 else a for a in layers]
        if any(a.dim() != 3 for a in layers):
            raise ValueError(
                f"{field}: each layer must be (1, heads, tokens, tokens) or (heads, tokens, "
                f"tokens); found {[tuple(a.shape) for a in layers]}"
            )
        if len({a.shape for a in layers}) != 1:
            raise ValueError(f"{field}: the layers' shapes differ")
        stacked = torch.stack(layers)
    else:
        stacked = _tensor(attention, field)
        if stacked.dim() == 5 and stacked.shape[1] == 1:
            stacked = stacked[:, 0]
        if stacked.dim() != 4:
            raise ValueError(
                f"{field}: expected (layers, heads, tokens, tokens); found {tuple(stacked.shape)}"
            )
    return stacked.detach().to(torch.float32).cpu()


def _tensor(value: Any, field: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.asarray(value, dtype=np.float32))
    raise TypeError(f"{field}: expected tensors or arrays, got {type(value).__name__}")


def pretty_tokens(tokens: Sequence[str]) -> tuple[str, ...]:
    """bertviz's ``prettify_tokens``: byte-level BPE's Ġ and SentencePiece's ▁ as spaces."""
    return tuple(str(t).replace("Ġ", " ").replace("▁", " ").replace("</w>", "") for t in tokens)


def is_causal(maps: torch.Tensor) -> bool:
    """Whether every map has nothing above its diagonal (a decoder's self-attention)."""
    T = maps.shape[-1]
    if maps.shape[-2] != T or T < 2:
        return False
    above = torch.ones(T, T, dtype=torch.bool).triu(1)
    return bool((maps[..., above] == 0).all())


def select(
    maps: torch.Tensor, layers: Sequence[int] | None, heads: Sequence[int] | None, field: str
) -> tuple[torch.Tensor, tuple[int, ...], tuple[int, ...]]:
    """bertviz's ``include_layers``/``include_heads`` (0-based): the maps kept, numbered from 1."""
    L, H = maps.shape[:2]
    chosen_layers = list(range(L)) if layers is None else list(layers)
    chosen_heads = list(range(H)) if heads is None else list(heads)
    for name, chosen, count in (("layers", chosen_layers, L), ("heads", chosen_heads, H)):
        if not chosen:
            raise ValueError(f"{field}: no {name} chosen")
        bad = [i for i in chosen if not 0 <= i < count]
        if bad:
            raise ValueError(f"{field}: {name} {bad} out of range: there are {count} (0-based)")
    every = layers is None and heads is None
    kept = maps if every else maps[chosen_layers][:, chosen_heads]  # (L', H', Tq, Tk)
    return kept, tuple(i + 1 for i in chosen_layers), tuple(h + 1 for h in chosen_heads)


def pool(maps: torch.Tensor, block: int) -> torch.Tensor:
    """Max over square blocks of ``block`` tokens: (..., Tq, Tk) -> (..., ceil(Tq/b), ceil(Tk/b)).

    The largest weight of a block, pooled by the server's own gatherer (``map_grid``):
    one strong weight stays visible."""
    if block == 1:
        return maps
    *lead, Tq, Tk = maps.shape
    query = MapQuery(None, Region(0, Tq, 0, Tk), (block, block), None)
    return shown(maps.reshape(-1, Tq, Tk), query).reshape(*lead, *query.shape)


def block_labels(tokens: Sequence[str], block: int) -> tuple[str, ...]:
    """One label per block of tokens: its first token and the positions it covers."""
    if block == 1:
        return tuple(tokens)
    return tuple(
        f"{tokens[start]} [{start}–{min(start + block, len(tokens)) - 1}]"
        for start in range(0, len(tokens), block)
    )


def pool_block(section: Section, pool_above: int) -> int:
    """The block size that brings the section's longest side to at most ``pool_above``."""
    if pool_above < 1:
        raise ValueError(f"pool_above must be at least 1; found {pool_above}")
    return math.ceil(max(len(section.queries), len(section.keys)) / pool_above)


def section_json(section: Section, pool_above: int) -> dict[str, Any]:
    """The section as the page's data block carries it (maps quantized to uint8, base64)."""
    block = pool_block(section, pool_above)
    maps = section.maps
    square = section.self_attention and maps.shape[-1] == maps.shape[-2]
    extras: dict[str, Any] = {"mean": None, "rollout": None}
    if square and len(section.heads) > 1:
        extras["mean"] = encode_compact(pool(head_average(maps), block)).describe()
    if square and section.complete:  # rollout needs every layer from the first, every head
        extras["rollout"] = encode_compact(pool(attention_rollout(list(maps)), block)).describe()
    return {
        "name": section.name,
        "title": section.title,
        "queries": list(block_labels(section.queries, block)),
        "keys": list(block_labels(section.keys, block)),
        "tokens_total": len(section.queries),
        "pooled": block,
        "causal": section.causal,
        "square": square,
        "layers": list(section.layers),
        "heads": list(section.heads),
        "special": list(section.special) if section.special and block == 1 else None,
        "token_type_ids": list(section.token_type_ids)
        if section.token_type_ids and block == 1
        else None,
        "maps": encode_compact(pool(maps, block)).describe(),
        **extras,
    }
