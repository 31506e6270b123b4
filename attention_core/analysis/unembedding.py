"""A decoder's (or an encoder-decoder's) states unembedded a bounded block of positions at a time.

At 4,096 tokens a vocabulary of 50,257 makes 206 M logits per layer: the lens and
ablation's predictions read them ``LOGITS_CELLS`` at a time (positions × vocabulary),
keeping only what they answer (the top tokens, the next token's log-probability).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from .access import DecoderHeadModel

LOGITS_CELLS = 1 << 23  # 32 MB of float32 logits a block


def unembedded_blocks(
    unembed: Callable[[torch.Tensor], torch.Tensor], vocabulary: int, states: torch.Tensor
) -> Iterator[tuple[int, torch.Tensor]]:
    """(first position, log-probabilities (n, vocab)) of final-normed ``states`` (T, C)
    through ``unembed`` (a decoder's or an encoder-decoder's LM head), ``LOGITS_CELLS //
    vocabulary`` positions at a time."""
    step = max(1, LOGITS_CELLS // max(1, vocabulary))
    for first in range(0, states.shape[0], step):
        logits = unembed(states[first : first + step]).float()
        yield first, F.log_softmax(logits, dim=-1)


def log_prob_blocks(
    heads: DecoderHeadModel, states: torch.Tensor
) -> Iterator[tuple[int, torch.Tensor]]:
    """``unembedded_blocks`` through a decoder's head."""
    return unembedded_blocks(heads.unembed, heads.vocabulary_size, states)


def top_tokens(
    heads: DecoderHeadModel, states: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, probabilities), each (T, k): every position's ``k`` most likely next tokens."""
    ids, probs = [], []
    for _, logprobs in log_prob_blocks(heads, states):
        top = logprobs.topk(min(k, logprobs.shape[-1]), dim=-1)
        ids.append(top.indices)
        probs.append(top.values.exp())
    return torch.cat(ids), torch.cat(probs)
