"""A decoder's (or an encoder-decoder's) states unembedded a bounded block of positions at a time.

At 4,096 tokens a vocabulary of 50,257 makes 206 M logits per layer: the lens and
ablation's predictions read them ``LOGITS_CELLS`` at a time (positions × vocabulary),
keeping only what they answer (the top tokens, the next token's log-probability).

A block is reduced without its log-softmax ever being written: the top logits
by ``top_logits`` (a strided pre-selection, then ``topk`` over a few hundred
candidates; the first is the row's maximum), each row's ``log_sums`` (log Σ
exp(logit - max), a few rows at a time so they stay in cache), and a
log-probability is ``logit - max - log_sum``, the log-softmax's own formula.
At GPT-2's vocabulary that costs about a third of a log-softmax and a ``topk``
over every logit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from .access import DecoderHeadModel

LOGITS_CELLS = 1 << 23  # 32 MB of float32 logits a block
NORMALIZER_ROWS = 8  # rows whose exp(logit - max) is summed at once: ~1.6 MB at 50,257
TOP_STRIDES = 64  # ``top_logits``' columns per strided set


def logit_blocks(
    unembed: Callable[[torch.Tensor], torch.Tensor], vocabulary: int, states: torch.Tensor
) -> Iterator[tuple[int, torch.Tensor]]:
    """(first position, float32 logits (n, vocab)) of final-normed ``states`` (T, C)
    through ``unembed`` (a decoder's or an encoder-decoder's LM head), ``LOGITS_CELLS //
    vocabulary`` positions at a time."""
    step = max(1, LOGITS_CELLS // max(1, vocabulary))
    for first in range(0, states.shape[0], step):
        yield first, unembed(states[first : first + step]).float()


def decoder_logit_blocks(
    heads: DecoderHeadModel, states: torch.Tensor
) -> Iterator[tuple[int, torch.Tensor]]:
    """``logit_blocks`` through a decoder's head."""
    return logit_blocks(heads.unembed, heads.vocabulary_size, states)


def top_logits(
    logits: torch.Tensor, k: int, strides: int = TOP_STRIDES
) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, ids), each (n, k): ``logits.topk(k)`` of (n, V) logits, the same values.

    Column c's strided set is {c, c + w, ..., c + (strides - 1) w} (w = V // strides;
    the last V mod strides columns are always candidates).  The k largest logits lie in
    the k sets whose maxima are largest (a set holding one of them has a maximum at least
    as large), so ``topk`` runs over those k × strides candidates only.  Among exactly
    equal logits the ids chosen may differ from a full ``topk``'s."""
    n, vocabulary = logits.shape
    width = vocabulary // strides
    if width < k or strides < 2:
        found = logits.topk(min(k, vocabulary), dim=-1)
        return found.values, found.indices
    main = logits[:, : width * strides].view(n, strides, width)  # [r, s, c]: column c + s w
    sets = main.amax(dim=1).topk(k, dim=-1).indices  # (n, k) in [0, w)
    offsets = torch.arange(strides, device=logits.device) * width
    columns = (sets[:, :, None] + offsets).reshape(n, k * strides)
    tail = torch.arange(width * strides, vocabulary, device=logits.device)
    columns = torch.cat([columns, tail.expand(n, -1)], dim=1)
    found = logits.gather(1, columns).topk(k, dim=-1)
    return found.values, columns.gather(1, found.indices)


def log_sums(logits: torch.Tensor, maxima: torch.Tensor) -> torch.Tensor:
    """(n, 1): ``log Σ exp(logit - max)`` of each row of (n, V) ``logits`` whose maxima
    (n, 1) are given, ``NORMALIZER_ROWS`` rows at a time (log-softmax = logit - max - this)."""
    sums = [
        (logits[r : r + NORMALIZER_ROWS] - maxima[r : r + NORMALIZER_ROWS]).exp_().sum(-1)
        for r in range(0, logits.shape[0], NORMALIZER_ROWS)
    ]
    return torch.cat(sums)[:, None].log()


def log_probs_of(
    logits: torch.Tensor, picked: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Of (n, V) logits: the log-probabilities (m, j) of ``picked`` (m, j) ids in the first
    m rows (m <= n), and the top ``k`` ids (n, k) with their log-probabilities, as
    ``log_softmax(logits)`` gives them (to rounding), without writing it."""
    values, ids = top_logits(logits, k)
    maxima = values[:, :1]  # the top logit is the row's maximum
    logsum = log_sums(logits, maxima)
    rows = picked.shape[0]
    chosen = logits[:rows].gather(-1, picked) - maxima[:rows] - logsum[:rows]
    return chosen, ids, values - maxima - logsum


def top_tokens(
    heads: DecoderHeadModel, states: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, probabilities), each (T, k): every position's ``k`` most likely next tokens."""
    ids, probs = [], []
    none = torch.zeros(0, 0, dtype=torch.long)
    for _, logits in decoder_logit_blocks(heads, states):
        _, top_ids, top_logprobs = log_probs_of(logits, none.to(logits.device), k)
        ids.append(top_ids)
        probs.append(top_logprobs.exp())
    return torch.cat(ids), torch.cat(probs)
