"""Every head's scores for one text (see ``scores``), on a loaded model of any family.

The text's own maps give the previous-token, duplicate-token, first-token and
entropy scores, summed block by block while the model's one pass makes them
(``forward_stacks`` with ``ScoresWatch``; a pass the page already made, found
in the cache, is read again from its kept q/k instead; no (T, T) map of a head
is held, at any length: ``stack_scores``); induction is measured on a second, made-up sequence: a
seeded block of R random ordinary (non-special) tokens, twice, inside the
special tokens every text gets (a decoder's BOS if it has one; an encoder's
[CLS] … [SEP]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from ..errors import SpecError
from ..models.base.contract import PassOptions
from ..models.base.protocols import TextModel
from ..models.maps.context_pass import WatchedPass
from .access import HeadModel
from .head_models import head_model
from .scores import HeadScores
from .stack_scores import ScoresWatch, stack_scores

DEFAULT_INDUCTION_LENGTH = 32  # R: short, so the second forward pass costs little


@dataclass(frozen=True)
class ScoredHeads:
    tokens: tuple[str, ...]
    scores: HeadScores  # each (L, H)
    induction_ids: tuple[int, ...]  # the whole sequence induction was measured on
    induction_start: int  # where the first copy of the block starts in it
    induction_length: int  # R


class Framing(Protocol):
    """What ``induction_ids`` uses of a model (a ``HeadModel``, or one stack of an
    encoder-decoder): how a sequence is framed, its ordinary ids, its token limit."""

    @property
    def max_tokens(self) -> int: ...
    def frame(self, block: Sequence[int]) -> tuple[list[int], int]: ...
    def ordinary_ids(self) -> torch.Tensor: ...


def induction_ids(
    heads: Framing, seed: int, length: int | None = None
) -> tuple[list[int], int, int]:
    """(ids, start, R): a seeded block of R ordinary tokens, twice, framed as every text is.

    Tokens are drawn without replacement when the vocabulary allows, so the
    only repeats are the block's second copy.
    """
    probe, start = heads.frame([])
    room = (heads.max_tokens - len(probe)) // 2
    R = min(DEFAULT_INDUCTION_LENGTH, room) if length is None else length
    if R > room or R < 2:
        raise SpecError(
            f"induction_length is {R}; twice that plus {len(probe)} special tokens must fit "
            f"the model's {heads.max_tokens} tokens, so it may be 2 to {room}",
            field="induction_length",
        )
    ordinary = heads.ordinary_ids()
    generator = torch.Generator().manual_seed(seed)
    if len(ordinary) >= R:
        block = ordinary[torch.randperm(len(ordinary), generator=generator)[:R]]
    else:
        block = ordinary[torch.randint(len(ordinary), (R,), generator=generator)]
    ids, start = heads.frame([*block.tolist(), *block.tolist()])
    return ids, start, R


def score_heads(
    model: TextModel, text: str, seed: int = 0, induction_length: int | None = None
) -> ScoredHeads:
    """Every score of every head, each (L, H); see ``scores`` for the definitions."""
    heads = head_model(model)
    tokens = heads.tokenize(text)
    watch = ScoresWatch(heads.num_heads, tokens.ids, len(tokens.ids))
    with torch.inference_mode():
        stack = model.forward_stacks(text, options=PassOptions(watch=watch)).stack()
        measured = watch.scores(len(stack.layers))
        if measured is None:  # a pass from the cache: the maps again, from its kept q/k
            measured = stack_scores(stack, tokens.ids)
        ids, start, R = induction_ids(heads, seed, induction_length)
        induction = blocked_induction(heads, ids, start, R)
    return ScoredHeads(
        tokens=tokens.tokens,
        scores=HeadScores(**measured, induction=induction),
        induction_ids=tuple(ids),
        induction_start=start,
        induction_length=R,
    )


class InductionSums:
    """``scores.induction_score`` of every head, (L, H), summed block by block: ``add`` takes
    each block of a layer's weights (1, H, n, w) over the repeated sequence as a pass that
    holds no map makes it (rows from r0, columns from c0)."""

    def __init__(self, num_layers: int, num_heads: int, start: int, R: int) -> None:
        self.sums = torch.zeros(num_layers, num_heads, dtype=torch.float64)
        self.rows = torch.arange(start + R, start + 2 * R)  # the second copy
        self.R = R

    def add(self, layer: int, r0: int, c0: int, weights: torch.Tensor) -> None:
        n, w = weights.shape[-2:]
        rows = self.rows
        inside = rows[(rows >= r0) & (rows < r0 + n)]
        cols = inside - self.R + 1 - c0  # the token after the previous occurrence
        seen = (cols >= 0) & (cols < w)  # a column outside the block's span weighs 0
        self.sums[layer] += weights[0][:, inside[seen] - r0, cols[seen]].sum(-1).double()

    def scores(self) -> torch.Tensor:
        return (self.sums / self.R).float()


def blocked_induction(heads: HeadModel, ids: Sequence[int], start: int, R: int) -> torch.Tensor:
    """``scores.induction_score`` of every head, (L, H), summed block by block from a forward
    over ``ids`` that holds no map (``WatchedPass``): any ``induction_length`` the model takes."""
    sums = InductionSums(heads.num_layers, heads.num_heads, start, R)
    heads.run(torch.tensor([list(ids)]), blocked=WatchedPass(sums.add))
    return sums.scores()
