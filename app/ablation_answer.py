"""``/api/model/ablate``'s answer (``AblateResponse``) from the core's ``Ablation``: one
builder for decoders and encoders (``app.routes.heads``) and encoder-decoders
(``app.seq2seq_heads_answer``).  Heads numbered from 1, the predictions before and after
as ``Position`` rows, tensors as float32 arrays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from attention_core.analysis import Ablation, Predictions

from .schemas.heads import AblateResponse, Position
from .schemas.model import Stack

Pieces = Callable[[Sequence[int]], list[str]]  # token ids -> how each reads
Measure = Literal["delta_loss", "embedding_cosine"]  # what each head alone is measured in


def float32_grid(tensor: torch.Tensor) -> np.ndarray:
    """A tensor as the float32 array the answers' tensor fields take."""
    return np.ascontiguousarray(tensor.detach().numpy(), dtype=np.float32)


def positions(pieces: Pieces, predictions: Predictions | None) -> list[Position] | None:
    """Each position's top next tokens, read by ``pieces``."""
    if predictions is None:
        return None
    return [
        Position(top_tokens=pieces(ids), top_ids=ids, top_probs=probs)
        for ids, probs in zip(
            predictions.top_ids.tolist(), predictions.top_probs.tolist(), strict=True
        )
    ]


@dataclass(frozen=True)
class Ablated:
    """What one request ablated: the ``chosen`` (layer, head) pairs (0-based) together
    (``result``; None when none were chosen) and each head alone (``each_head``, (L, H),
    in ``measure``; None unless asked)."""

    chosen: Sequence[tuple[int, int]]
    mode: Literal["zero", "mean"]
    result: Ablation | None
    each_head: torch.Tensor | None
    measure: Measure


@dataclass(frozen=True)
class Read:
    """The model and the text an ablation read: ``tokens`` are the rows of the
    predictions (an encoder-decoder's: the decoder's input; its ``stack`` and
    ``source_tokens`` beside them)."""

    model: str
    family: str
    causal: bool
    tokens: list[str]
    pieces: Pieces
    stack: Stack | None = None
    source_tokens: list[str] | None = None


def ablation_response(read: Read, ablated: Ablated) -> AblateResponse:
    """The answer; ``stack`` and ``source_tokens`` are among its fields only when read has a
    stack (an encoder-decoder's)."""
    result, grid = ablated.result, ablated.each_head
    before = result.before if result else None
    after = result.after if result else None
    answer = AblateResponse(
        model=read.model,
        family=read.family,
        causal=read.causal,
        tokens=read.tokens,
        heads=[[layer + 1, head + 1] for layer, head in ablated.chosen],
        mode=ablated.mode,
        loss_before=before.loss if before else None,
        loss_after=after.loss if after else None,
        logprobs_before=float32_grid(before.next_logprobs) if before else None,
        logprobs_after=float32_grid(after.next_logprobs) if after else None,
        predictions_before=positions(read.pieces, before),
        predictions_after=positions(read.pieces, after),
        embedding_cosine=result.embedding_cosine if result else None,
        each_head=None if grid is None else float32_grid(grid),
        each_head_measure=None if grid is None else ablated.measure,
    )
    if read.stack is None:
        return answer
    return answer.model_copy(update={"stack": read.stack, "source_tokens": read.source_tokens})
