"""Attention maps made small enough to send: one region, block-pooled by its maximum.

A long text's map is too big to ship whole (T = 4,096: 16.8 M weights a head),
so a viewer asks for an overview (every map pooled to at most ``cells`` ×
``cells``) and then for one region at full resolution.  A pooled cell is the
**maximum** of its block: a sharp head (previous token, one attended word)
keeps its one-cell-wide line at full strength however far it is pooled,
where a block's mean would dim it by the block's width and make it look like
a uniform head.  Pooling is written once, in ``map_grid.MapGrid`` (the pages
and the notebook draw the cells the server pooled).  Masked cells are 0, so a
block is 0 only when every cell in it is masked or unattended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

POOL_REDUCE = "maximum"  # what a pooled cell is, as the API says it


def block_size(length: int, cells: int) -> int:
    """The smallest block that covers ``length`` positions in at most ``cells`` blocks."""
    if length < 1 or cells < 1:
        raise ValueError(f"length and cells must be at least 1; found {length} and {cells}")
    return math.ceil(length / cells)


@dataclass(frozen=True)
class Region:
    """Rows ``[row_start, row_stop)`` and columns ``[col_start, col_stop)`` of a map."""

    row_start: int
    row_stop: int
    col_start: int
    col_stop: int

    def crop(self, maps: torch.Tensor) -> torch.Tensor:
        """Shapes: (..., Tq, Tk) -> (..., rows, cols); a view, no copy."""
        return maps[..., self.row_start : self.row_stop, self.col_start : self.col_stop]
