"""Head-type scores of one stack of any model, chosen by what the model declares.

A model with one stack is scored by ``scoring.score_heads``; one that reads a
target (an encoder-decoder: three stacks) by ``seq2seq_scores.score_stack``,
imported only then (it imports transformers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..models.base.capabilities import StackName
from ..models.base.protocols import TextModel
from .head_models import head_model
from .scoring import ScoredHeads, score_heads


@dataclass(frozen=True)
class StackScores:
    """``scored``: every score of ``stack``'s heads; ``pieces``: ids -> their token texts."""

    stack: StackName
    scored: ScoredHeads
    pieces: Callable[[Sequence[int]], list[str]]


def score_model(
    model: TextModel,
    text: str,
    *,
    target: str | None = None,
    stack: str | None = None,
    seed: int = 0,
    induction_length: int | None = None,
) -> StackScores:
    """Every score of one stack's heads (``stack`` None: the first: the text's)."""
    capabilities = model.capabilities
    if not capabilities.reads_target:
        capabilities.check_fields(model.name, target, stack)
        scored = score_heads(model, text, seed, induction_length)
        return StackScores(capabilities.stacks[0], scored, head_model(model).token_texts)
    from ..models.hf.seq2seq import EncoderDecoder
    from .seq2seq_scores import score_stack

    if not isinstance(model, EncoderDecoder):  # the one model that reads a target today
        raise NotImplementedError(f"{model.family}: head scores of a target's stacks")
    chosen, scored = score_stack(model, text, target, stack, seed, induction_length)
    return StackScores(chosen, scored, model.tokenizer.pieces)
