"""Head-type scores of an encoder-decoder's self-attention stacks (T5, BART, Marian).

The encoder's maps are the source attending to itself, the decoder's the
target (behind its start token) attending to itself: each is scored as a
decoder-only or encoder-only model's maps are (``scores``).  Induction: the
seeded block of ordinary tokens, twice, as the source (framed as every
source is; the decoder at its start token alone) for the encoder, or as the
decoder's input behind the start token (the source: the request's text) for
the decoder.  The induction pass holds no map: the scored stack's weights are summed block by
block as the pass makes them (``InductionSums``), at any length.  Cross-attention
is refused: its rows (target) and columns
(source) are different sequences, so "previous token", "duplicate token" and
induction have no meaning there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, cast

import torch

from ..attention import AttentionSteps
from ..blocked_attention import AttentionCall
from ..errors import SpecError
from ..models.hf.capture import STACKS, AttentionRun, Stack
from ..models.hf.seq2seq import EncoderDecoder
from ..models.maps.context_pass import ContextPass, LayerBlockSink, WatchedPass
from .access import Tokens, _framing, _without
from .scores import HeadScores
from .scoring import InductionSums, ScoredHeads, induction_ids
from .stack_scores import stack_scores

SelfStack = Literal["encoder", "decoder"]
SCORED_STACKS: tuple[SelfStack, ...] = ("encoder", "decoder")


class StackFrame:
    """What ``induction_ids`` needs of one stack: its framing, its ordinary ids, its limit."""

    def __init__(self, model: EncoderDecoder, stack: SelfStack) -> None:
        self.model = model
        self.stack = stack
        self.max_tokens = model.max_tokens

    def frame(self, block: Sequence[int]) -> tuple[list[int], int]:
        if self.stack == "decoder":  # the start token, then the target's tokens
            return [self.model.start_id, *block], 1
        probe = self.model.tokenize("a")
        prefix, suffix = _framing(Tokens(probe.input_ids, probe.tokens, probe.special))
        return [*prefix, *block, *suffix], len(prefix)

    def ordinary_ids(self) -> torch.Tensor:
        count = min(self.model.tokenizer.vocab_size, int(self.model.model.config.vocab_size))
        return _without(count, self.model.tokenizer.special_ids | {self.model.start_id})


def check_stack(stack: str | None) -> Stack:
    """The stack to score (default: the encoder)."""
    chosen = stack or "encoder"
    if chosen not in STACKS:
        raise SpecError(f"stack {stack!r}: it is one of {', '.join(STACKS)}", field="stack")
    return chosen


def score_stack(
    model: EncoderDecoder,
    text: str,
    target: str | None,
    stack: str | None,
    seed: int = 0,
    induction_length: int | None = None,
) -> tuple[Stack, ScoredHeads]:
    """(the stack scored, every score of its heads, each (L, H)); see the module doc."""
    chosen = check_stack(stack)
    if chosen != "encoder" and target is None:
        raise SpecError(
            f"target is needed to score the {chosen} stack's heads: without it the decoder "
            "reads its start token alone (one row)",
            field="target",
        )
    with torch.inference_mode():
        kept = model.forward_stacks(text, target=target).stack(chosen)
        ids = None if chosen == "cross" else cast(Any, kept.tokenized).input_ids
        measured = stack_scores(kept, ids)
        if chosen == "cross":
            scores = HeadScores(None, None, induction=None, **measured)
            return chosen, ScoredHeads(kept.tokens, scores, (), 0, 0)
        induction, (ids, start, R) = _induction(model, chosen, text, seed, induction_length)
    return chosen, ScoredHeads(
        tokens=kept.tokens,
        scores=HeadScores(**measured, induction=induction),
        induction_ids=tuple(ids),
        induction_start=start,
        induction_length=R,
    )


def _induction(
    model: EncoderDecoder, chosen: SelfStack, text: str, seed: int, length: int | None
) -> tuple[torch.Tensor, tuple[list[int], int, int]]:
    """The induction score of one self-attention stack on a seeded repeated block."""
    ids, start, R = induction_ids(StackFrame(model, chosen), seed, length)
    if chosen == "encoder":
        source, decoder_input = ids, [model.start_id]
    else:
        source, decoder_input = list(model.tokenize(text).input_ids), ids
    info = model.info()
    sums = InductionSums(model.layers_of(chosen), info.heads, start, R)
    with torch.inference_mode():
        model.stacks_with(
            AttentionRun(blocked=_StackWatch(model, chosen, sums.add)),
            torch.tensor([source]),
            torch.tensor([decoder_input]),
        )
    return sums.scores(), (ids, start, R)


class _StackWatch(WatchedPass):
    """A forward that holds no map and hands the blocks of one stack's layers to
    ``on_block`` (the other stacks' contexts block by block, unwatched)."""

    def __init__(self, model: EncoderDecoder, stack: Stack, on_block: LayerBlockSink) -> None:
        super().__init__(on_block)
        self.model, self.stack = model, stack

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        site = self.model.sites[id(module)]
        if site.stack != self.stack:
            return ContextPass.steps(self, layer, call, module)
        return super().steps(site.layer, call, module)
