"""Head-type scores over attention maps, with TransformerLens' ``head_detector`` definitions.

Every function takes maps of shape (..., T, T) (usually (L, H, T, T)), rows =
the attending token, and returns one number per map, shape (...).  A
detection pattern D scores a map A as ``Σ(A ⊙ D) / ΣA`` (TransformerLens'
``error_measure="mul"``, BOS and the current token not excluded).

- previous-token: D[i, i-1] = 1;
- duplicate-token: D[i, j] = 1 where token j is token i and j < i;
- first-token share (the "attention sink"): the mean over rows of A[i, 0];
- entropy: the mean over rows of -Σ_j A[i, j] log A[i, j], in nats;
- induction: on a block of R tokens repeated twice from position ``start``,
  the mean over the rows of the second copy of A[i, i - R + 1] (the token
  after the previous occurrence of token i).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..errors import SpecError

SCORE_NAMES = ("previous_token", "duplicate_token", "first_token", "entropy", "induction")


def pattern_score(maps: torch.Tensor, pattern: torch.Tensor) -> torch.Tensor:
    """``Σ(A ⊙ D) / ΣA`` per map.  Shapes: maps (..., T, T), pattern (T, T) -> (...)."""
    flat = maps.flatten(-2)  # (..., T*T): one dot product per map, no (..., T, T) temporary
    return (flat @ pattern.flatten()) / flat.sum(-1)


def previous_token_pattern(length: int) -> torch.Tensor:
    """(T, T): 1 where the column is the row's previous token."""
    return torch.ones(length - 1).diag(-1) if length > 1 else torch.zeros(1, 1)


def duplicate_token_pattern(ids: Sequence[int]) -> torch.Tensor:
    """(T, T): 1 where token j equals token i and j < i."""
    t = torch.tensor(list(ids))
    return ((t[:, None] == t[None, :]).tril(-1)).float()


def previous_token_score(maps: torch.Tensor) -> torch.Tensor:
    # Σ_i A[i, i-1] / ΣA without building the pattern: the first subdiagonal.
    below = maps.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1)  # (...)
    return below / maps.sum((-2, -1))


def duplicate_token_score(maps: torch.Tensor, ids: Sequence[int]) -> torch.Tensor:
    return pattern_score(maps, duplicate_token_pattern(ids).to(maps.dtype))


def first_token_share(maps: torch.Tensor) -> torch.Tensor:
    return maps[..., :, 0].mean(-1)


def attention_entropy(maps: torch.Tensor) -> torch.Tensor:
    """Mean row entropy in nats (0 log 0 = 0: a zero weight times the log of the smallest
    positive float).  Faster than ``torch.special.entr``, which this equals."""
    logs = maps.clamp_min(torch.finfo(maps.dtype).tiny).log_()
    entropy: torch.Tensor = 0.0 - (maps * logs).sum(-1).mean(-1)  # +0, not -0, for sharp rows
    return entropy


def induction_score(maps: torch.Tensor, start: int, repeat: int) -> torch.Tensor:
    """Maps of a sequence holding tokens ``start .. start+R-1`` twice in a row (R = ``repeat``).

    The mean over rows i of the second copy of A[i, i - R + 1].
    """
    if repeat < 2 or start + 2 * repeat > maps.shape[-1]:
        raise SpecError(
            f"an induction block of {repeat} tokens from position {start} needs "
            f"{start + 2 * repeat} positions; the maps have {maps.shape[-1]}",
            field="induction_length",
        )
    rows = torch.arange(start + repeat, start + 2 * repeat)  # (R,)
    return maps[..., rows, rows - repeat + 1].mean(-1)


@dataclass(frozen=True)
class HeadScores:
    """Each score as an (L, H) tensor (layer, head; both 0-based here); None where it does
    not apply (cross-attention: previous-token, duplicate-token, induction), and
    ``diagonal`` for cross-attention only (``stack_scores``)."""

    previous_token: torch.Tensor | None
    duplicate_token: torch.Tensor | None
    first_token: torch.Tensor
    entropy: torch.Tensor
    induction: torch.Tensor | None
    diagonal: torch.Tensor | None = None

    def as_dict(self) -> dict[str, torch.Tensor]:
        """The scores that apply, by name."""
        found = {name: getattr(self, name) for name in (*SCORE_NAMES, "diagonal")}
        return {name: value for name, value in found.items() if value is not None}


def text_scores(
    maps: torch.Tensor | Sequence[torch.Tensor], ids: Sequence[int]
) -> dict[str, torch.Tensor]:
    """The four scores measured on a text's own maps: (L, H, T, T), or L tensors (H, T, T)
    (scored one layer at a time, without stacking them) -> (L, H) each."""
    duplicate = duplicate_token_pattern(ids)
    per_layer: dict[str, list[torch.Tensor]] = {name: [] for name in SCORE_NAMES[:4]}
    for layer in maps:
        per_layer["previous_token"].append(previous_token_score(layer))
        per_layer["duplicate_token"].append(pattern_score(layer, duplicate.to(layer.dtype)))
        per_layer["first_token"].append(first_token_share(layer))
        per_layer["entropy"].append(attention_entropy(layer))
    return {name: torch.stack(values) for name, values in per_layer.items()}


def head_scores(
    maps: torch.Tensor,
    ids: Sequence[int],
    induction_maps: torch.Tensor,
    induction_start: int,
    induction_repeat: int,
) -> HeadScores:
    """Every score: the text's maps (L, H, T, T) and its ids; the maps of a repeated block."""
    return HeadScores(
        **text_scores(maps, ids),
        induction=induction_score(induction_maps, induction_start, induction_repeat),
    )
