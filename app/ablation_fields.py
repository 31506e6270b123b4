"""What an ablation answers besides its model and tokens (``AblateResponse``'s fields of
the result), written once for every kind of model: the loss, the log-probabilities and
the top tokens before and after, an encoder's cosine and the ``each_head`` grid."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from attention_core.analysis import Predictions
from attention_core.analysis.ablation import Ablation

from .schemas.heads import Position

Pieces = Callable[[Sequence[int]], list[str]]
"""ids -> how each reads on its own (the top tokens' texts)."""


def grid(tensor: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(tensor.detach().numpy(), dtype=np.float32)


def positions(pieces: Pieces, predictions: Predictions | None) -> list[Position] | None:
    if predictions is None:
        return None
    return [
        Position(top_tokens=pieces(ids), top_ids=ids, top_probs=probs)
        for ids, probs in zip(
            predictions.top_ids.tolist(), predictions.top_probs.tolist(), strict=True
        )
    ]


def ablation_fields(
    result: Ablation | None, effects: torch.Tensor | None, pieces: Pieces, measure: str
) -> dict[str, Any]:
    """The fields of ``result`` (heads ablated together) and of ``effects`` (each head
    alone, as ``measure``)."""
    before = result.before if result else None
    after = result.after if result else None
    return {
        "loss_before": before.loss if before else None,
        "loss_after": after.loss if after else None,
        "logprobs_before": grid(before.next_logprobs) if before else None,
        "logprobs_after": grid(after.next_logprobs) if after else None,
        "predictions_before": positions(pieces, before),
        "predictions_after": positions(pieces, after),
        "embedding_cosine": result.embedding_cosine if result else None,
        "each_head": grid(effects) if effects is not None else None,
        "each_head_measure": None if effects is None else measure,
    }
