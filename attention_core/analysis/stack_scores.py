"""Head-type scores of one stack, block by block from what its pass kept (any length).

The definitions are ``scores``' (TransformerLens' ``head_detector``, "mul"):
each is a sum over the cells of a map, so it is accumulated over the blocks of
rows ``KeptLayer.blocks`` hands over and no (T, T) map of a head is ever held.
A self-attention stack gets previous-token, duplicate-token, first-token and
entropy; a cross-attention stack (target rows, source columns: different
sequences) gets first-token (the sink), entropy and ``diagonal``, the share
of each row on the source position proportional to it (how monotone the
alignment is), and says which scores do not apply there (``NOT_FOR_CROSS``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..models.base.contract import KeptStack
from ..models.maps.long_maps import KeptLayer

SELF_SCORES = ("previous_token", "duplicate_token", "first_token", "entropy")
CROSS_SCORES = ("first_token", "entropy", "diagonal")
NOT_FOR_CROSS = ("previous_token", "duplicate_token", "induction")


def diagonal_columns(rows: int, cols: int) -> torch.Tensor:
    """(rows,) the source position proportional to each target row: floor((i + ½)·S/T)."""
    return ((torch.arange(rows) + 0.5) * cols / rows).floor().long().clamp_max(cols - 1)


class _Sums:
    """Per-head running sums of one layer's scores over its blocks of rows."""

    def __init__(self, heads: int, ids: torch.Tensor | None, cross: bool, T: int, S: int):
        self.ids, self.cross, self.T, self.S = ids, cross, T, S
        self.total = torch.zeros(heads, dtype=torch.float64)
        self.sums = {name: torch.zeros(heads, dtype=torch.float64) for name in SELF_SCORES}
        self.sums["diagonal"] = torch.zeros(heads, dtype=torch.float64)

    def add(self, r0: int, c0: int, weights: torch.Tensor) -> None:
        """weights (H, n, w): rows r0.., columns c0.. (the others are 0)."""
        n, w = weights.shape[-2:]
        rows = torch.arange(r0, r0 + n)
        cols = torch.arange(c0, c0 + w)
        s = self.sums
        self.total += weights.sum((-2, -1)).double()
        logs = weights.clamp_min(torch.finfo(weights.dtype).tiny).log()
        s["entropy"] -= (weights * logs).sum((-2, -1)).double()
        if c0 == 0:
            s["first_token"] += weights[..., :, 0].sum(-1).double()
        if self.cross:
            where = diagonal_columns(self.T, self.S)[rows] - c0
            inside = (where >= 0) & (where < w)
            picked = weights[:, inside.nonzero().squeeze(-1), where[inside]]
            s["diagonal"] += picked.sum(-1).double()
            return
        prev = rows - 1 - c0
        inside = (prev >= 0) & (prev < w)
        s["previous_token"] += (
            weights[:, inside.nonzero().squeeze(-1), prev[inside]].sum(-1).double()
        )
        if self.ids is not None:
            same = (self.ids[rows, None] == self.ids[None, cols]) & (cols[None, :] < rows[:, None])
            s["duplicate_token"] += (weights * same.to(weights.dtype)).sum((-2, -1)).double()

    def scores(self) -> dict[str, torch.Tensor]:
        names = CROSS_SCORES if self.cross else SELF_SCORES
        result = {}
        for name in names:
            divisor = self.total if name in ("previous_token", "duplicate_token") else self.T
            result[name] = (self.sums[name] / divisor).float()
        return result


def layer_scores(
    layer: KeptLayer, ids: Sequence[int] | None, cross: bool, T: int, S: int
) -> dict[str, torch.Tensor]:
    """One layer's scores, each (H,), from its kept q/k a block of rows at a time."""
    sums = _Sums(layer.num_heads, None if ids is None else torch.tensor(list(ids)), cross, T, S)
    layer.blocks(sums.add)
    return sums.scores()


def stack_scores(stack: KeptStack, ids: Sequence[int] | None) -> dict[str, torch.Tensor]:
    """Every layer's scores of ``stack``, each (L, H) (``ids``: its rows' token ids, for
    duplicate-token; None: not computed)."""
    T, S = len(stack.tokens), len(stack.key_tokens.tokens)
    cross = not stack.self_attention
    per_layer = [layer_scores(layer, ids, cross, T, S) for layer in stack.layers]
    return {name: torch.stack([p[name] for p in per_layer]) for name in per_layer[0]}
