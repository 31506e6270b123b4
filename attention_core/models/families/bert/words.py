"""One word in two texts: where it is, and how its hidden state differs layer by layer."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ....errors import SpecError
from ...maps.features import kept_tokens
from .tokenizer import Tokenized


def find_word(
    tokenized: Tokenized,
    piece_ids: Sequence[int],
    word: str,
    pieces: Sequence[str],
    field: str,
) -> tuple[int, int]:
    """Token span [start, stop) of the first whole-word occurrence of ``piece_ids``.

    Whole word: the span starts where a word starts and ends where it ends, so
    "bank" is not found inside "banking" (bank + ##ing).
    """
    ids, word_ids = tokenized.input_ids, tokenized.word_ids
    n = len(piece_ids)
    target = tuple(piece_ids)
    for start in range(len(ids) - n + 1):
        stop = start + n
        if ids[start:stop] != target or tokenized.special[start]:
            continue
        starts_word = start == 0 or word_ids[start - 1] != word_ids[start]
        ends_word = stop == len(ids) or word_ids[stop] != word_ids[stop - 1]
        if starts_word and ends_word:
            return start, stop
    shown = " ".join(kept_tokens(tokenized.tokens, tokenized.special))
    raise SpecError(
        f"the word {word!r} (WordPieces: {' '.join(pieces)}) does not occur as a whole word "
        f"in {field}, whose tokens are: {shown}",
        field=field,
    )


def layer_cosines(
    hidden_a: Sequence[torch.Tensor],
    hidden_b: Sequence[torch.Tensor],
    span_a: tuple[int, int],
    span_b: tuple[int, int],
) -> tuple[float, ...]:
    """Per layer, cosine of the mean hidden state over each span.

    Shapes: hidden_* L+1 tensors (T_*, hidden) -> L+1 floats.
    """
    a = torch.stack([h[span_a[0] : span_a[1]].mean(dim=0) for h in hidden_a])  # (L+1, hidden)
    b = torch.stack([h[span_b[0] : span_b[1]].mean(dim=0) for h in hidden_b])  # (L+1, hidden)
    cosines = torch.nn.functional.cosine_similarity(a, b, dim=-1).clamp(-1.0, 1.0)
    return tuple(float(c) for c in cosines)
