"""Any attention map as a ``plotly.graph_objects.Figure`` (for papers: ``write_image``,
``write_html``), coloured as the pages colour it (Viridis, 0 to the map's maximum)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import torch

from .attentions import stack_attention

MAX_LABEL = 40


def token_labels(tokens: Sequence[str]) -> list[str]:
    """One label per position; a repeated token gets its position ("the·0", "the·6"), so
    that Plotly's category axes keep every row (as labels.js does on the pages)."""
    counts = Counter(tokens)
    short = [t if len(t) <= MAX_LABEL else t[: MAX_LABEL - 1] + "…" for t in map(str, tokens)]
    return [
        f"{s}·{i}" if counts[t] > 1 else s
        for i, (t, s) in enumerate(zip(tokens, short, strict=True))
    ]


def _map(attention: Any, layer: int, head: int | str) -> np.ndarray:
    """The (Tq, Tk) map: of a (Tq, Tk) array as it is, else of layer ``layer`` and head ``head``
    (0-based, or "mean") of bertviz's tuple, an (L, H, Tq, Tk) or an (H, Tq, Tk) tensor."""
    if isinstance(attention, torch.Tensor | np.ndarray) and attention.ndim == 2:
        return np.asarray(torch.as_tensor(attention, dtype=torch.float32))
    if isinstance(attention, torch.Tensor | np.ndarray) and attention.ndim == 3:
        attention = attention[None]
    maps = stack_attention(attention)  # (L, H, Tq, Tk)
    L, H = maps.shape[:2]
    if not 0 <= layer < L:
        raise ValueError(f"layer {layer} out of range: there are {L} layers (0-based)")
    if head == "mean":
        return maps[layer].mean(dim=0).numpy()
    if not isinstance(head, int) or not 0 <= head < H:
        raise ValueError(f"head {head!r} out of range: there are {H} heads (0-based), or 'mean'")
    return maps[layer, head].numpy()


def figure(
    attention: Any,
    tokens: Sequence[str] | None = None,
    *,
    layer: int = 0,
    head: int | str = 0,
    keys: Sequence[str] | None = None,
    title: str | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """One attention map as a Plotly heatmap: rows = the tokens that attend (``tokens``),
    columns = the tokens attended to (``keys``, by default ``tokens``)."""
    z = _map(attention, layer, head)
    Tq, Tk = z.shape
    rows = token_labels(tokens) if tokens is not None else [str(i) for i in range(Tq)]
    cols = token_labels(keys) if keys is not None else rows
    if (len(rows), len(cols)) != (Tq, Tk):
        raise ValueError(f"the map is {Tq} × {Tk}; the labels are {len(rows)} × {len(cols)}")
    name = f"layer {layer + 1}, " + ("mean of heads" if head == "mean" else f"head {int(head) + 1}")
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=cols,
            y=rows,
            colorscale="Viridis",
            zmin=0,
            zmax=float(z.max()) if zmax is None else zmax,
            colorbar={"title": {"text": "weight"}},
            hovertemplate="%{y} → %{x}<br>weight: %{z:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title if title is not None else name,
        xaxis={"title": "attended to (key)", "type": "category", "tickangle": -60},
        yaxis={"title": "attending (query)", "type": "category", "autorange": "reversed"},
        width=max(420, 24 * Tk + 200),
        height=max(400, 24 * Tq + 160),
    )
    return fig
