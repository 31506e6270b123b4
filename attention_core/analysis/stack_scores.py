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

from collections.abc import Callable, Sequence

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
        flat = weights.reshape(weights.shape[0], n * w)  # (H, n*w)
        if self.ids is not None and not self.cross:
            # The total and duplicate-token in one read: (H, n*w) @ (n*w, 2).
            same = (self.ids[rows, None] == self.ids[None, cols]) & (cols[None, :] < rows[:, None])
            both = torch.stack([torch.ones_like(same, dtype=weights.dtype), same.to(weights.dtype)])
            sums = (flat @ both.view(2, n * w).T).double()  # (H, 2)
            self.total += sums[:, 0]
            s["duplicate_token"] += sums[:, 1]
        else:
            self.total += flat.sum(-1).double()
        # -Σ w log w, in one buffer (clamped: log 0 would make 0 × -inf)
        logs = weights.clamp_min(torch.finfo(weights.dtype).tiny).log_().mul_(weights)
        s["entropy"] -= logs.reshape(flat.shape).sum(-1).double()
        del logs
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

    def scores(self) -> dict[str, torch.Tensor]:
        names = CROSS_SCORES if self.cross else SELF_SCORES
        result = {}
        for name in names:
            divisor = self.total if name in ("previous_token", "duplicate_token") else self.T
            result[name] = (self.sums[name] / divisor).float()
        return result


class ScoresWatch:
    """The scores of a stack summed during its pass (``PassOptions.watch``): each layer's
    blocks of weights as the pass makes them, so the maps are computed once."""

    def __init__(self, heads: int, ids: Sequence[int] | None, T: int) -> None:
        self.heads, self.T = heads, T
        self.ids = None if ids is None else torch.tensor(list(ids))
        self.layers: dict[int, _Sums] = {}

    def __call__(self, layer: int) -> Callable[[int, int, torch.Tensor], None]:
        sums = _Sums(self.heads, self.ids, False, self.T, self.T)
        self.layers[layer] = sums
        return sums.add

    def scores(self, num_layers: int) -> dict[str, torch.Tensor] | None:
        """Every layer's scores, each (L, H); None when the pass did not run this watch
        (a pass found in the cache)."""
        if sorted(self.layers) != list(range(num_layers)) or not num_layers:
            return None
        per_layer = [self.layers[n].scores() for n in range(num_layers)]
        return {name: torch.stack([p[name] for p in per_layer]) for name in per_layer[0]}


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
