"""The answers of /api/model/why and /api/model/attribute as plain dicts (layers and heads
from 1), written once for the routes and the notebook API (``attention_viz.why``,
``attention_viz.attribute``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attention_core.analysis.access import DecoderHeadModel
from attention_core.analysis.attribution import Attribution
from attention_core.analysis.qk_decomposition import Why


def _grid(tensor: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(tensor.detach().numpy(), dtype=np.float32)


def why_payload(
    model: str,
    family: str,
    tokens: list[str],
    cell: tuple[int, int, int, int],
    result: Why,
    top: int,
) -> dict[str, Any]:
    """``cell``: (layer, head) from 1, (row, col) from 0; ``top`` pairs listed."""
    layer, head, row, col = cell
    names = result.components
    flat = result.grid.flatten()
    order = flat.abs().argsort(descending=True)[:top].tolist()
    N = len(names)
    pairs = [{"query": names[i // N], "key": names[i % N], "value": float(flat[i])} for i in order]
    return {
        "model": model,
        "family": family,
        "tokens": tokens,
        "layer": layer,
        "head": head,
        "row": row,
        "col": col,
        "score": result.score,
        "weight": result.weight,
        "scale": result.scale,
        "softcap": result.softcap,
        "components": list(names),
        "contributions": pairs,
        "rest": result.score - sum(p["value"] for p in pairs),
        "grid": _grid(result.grid),
    }


def attribute_payload(
    model: str, family: str, tokens: list[str], heads: DecoderHeadModel, result: Attribution
) -> dict[str, Any]:
    target = result.target
    return {
        "model": model,
        "family": family,
        "tokens": tokens,
        "method": result.method,
        "ablation": result.mode,
        "target": None if target is None else {"position": target[0], "token": target[1]},
        "target_text": None if target is None else heads.token_texts([target[1]])[0],
        "loss": result.loss,
        "estimate": _grid(result.estimate),
        "exact": None if result.exact is None else _grid(result.exact),
        "direct": _grid(result.direct),
        "graddrop": None if result.graddrop is None else _grid(result.graddrop),
        "cancelled": [{"layer": n + 1, "head": h + 1} for n, h in result.cancelled],
        "confirmed": [
            {"layer": n + 1, "head": h + 1, "estimate": float(result.estimate[n, h]), "exact": e}
            for n, h, e in result.confirmed
        ],
    }
