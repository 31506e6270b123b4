"""The logit lens (nostalgebraist 2020) for decoders: what the residual stream after each
layer would predict if the model stopped there.

After layer l the stream h_l goes through the final norm and the LM head, as
the last layer's does: ``softmax(lm_head(final_norm(h_l)))``.  The last
layer's row is the model's own prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..errors import SpecError
from ..models.base.protocols import TextModel
from .access import DecoderHeadModel
from .head_models import head_model
from .unembedding import top_tokens

LENS_TOP_K = 5


@dataclass(frozen=True)
class LogitLens:
    """``top_ids`` and ``top_probs`` (L, T, k): after layer l + 1, position i's top k."""

    tokens: tuple[str, ...]
    top_ids: torch.Tensor
    top_probs: torch.Tensor


def lens_states(
    heads: DecoderHeadModel, hidden: Sequence[torch.Tensor], layer: int
) -> torch.Tensor:
    """The states (..., C) after layer ``layer`` (1-based) as the LM head reads them, from
    transformers-style hidden states (L + 1 of them, the last already final-normed)."""
    state = hidden[layer]
    if layer < len(hidden) - 1:
        state = heads.final_norm(state)
    return state


def logit_lens(model: TextModel, text: str, k: int = LENS_TOP_K) -> LogitLens:
    """Every layer's top ``k`` next tokens at every position, at any length: the forward
    holds no map (``HeadModel.run``) and the logits are read a block of positions at a
    time (``unembedding``)."""
    heads = head_model(model)
    if not isinstance(heads, DecoderHeadModel):
        raise SpecError(
            f"the logit lens is for decoders (a language-modelling head); {model.name} is "
            f"a {model.family} encoder",
            field="model",
        )
    tokens = heads.tokenize(text)
    with torch.inference_mode():
        hidden = heads.run(torch.tensor([tokens.ids])).hidden  # L + 1 x (1, T, C)
        tops = [
            top_tokens(heads, lens_states(heads, hidden, layer)[0], k)
            for layer in range(1, len(hidden))
        ]
    return LogitLens(
        tokens.tokens, torch.stack([i for i, _ in tops]), torch.stack([p for _, p in tops])
    )
