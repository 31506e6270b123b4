"""The one map query (``MapQuery``) and its gatherer (``MapGrid``), for every length.

A text's (H, T, S) maps are never held: ``blocked_attention`` hands over a
block of rows at a time (a short input: one block) and ``MapGrid.add`` keeps
only what the answer shows, in one order: the head average over every head;
hide the special tokens (drop their rows and columns, renormalize each row
over the shown columns); keep some heads; crop the region; max-pool it
(``pooling``: a cell is its block's maximum).  A pooled block may straddle two
blocks of rows: its halves meet by ``amax``, so the result does not depend on
how the rows were split.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import torch
import torch.nn.functional as F

from .pooling import Region

Measure = Literal["weights", "value_norm"]


@dataclass(frozen=True)
class MapQuery:
    """What to show of a stack's maps: the one map query, answered at every length.

    ``hidden``: per query token (row), True where ``hide_special`` hides it
    (None: nothing hidden, no renormalizing); ``hidden_keys``: the same per
    key token (column), None for the rows' own (self-attention); ``region`` is
    over the shown tokens; ``block`` (rows, cols) is the pooling block ((1, 1):
    full resolution); ``heads``: the 0-based heads kept (None: all);
    ``average``: also gather the head average (over every head); ``layers``:
    the 0-based layers asked for (None: all); ``measure``: the weights, or
    ``value_norm`` (each weight times its key's ‖v_j W_O^h‖, rows re-summed to 1).
    """

    hidden: tuple[bool, ...] | None
    region: Region
    block: tuple[int, int]
    heads: tuple[int, ...] | None
    average: bool = True
    layers: tuple[int, ...] | None = None
    measure: Measure = "weights"
    hidden_keys: tuple[bool, ...] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        r = self.region
        rows, cols = r.row_stop - r.row_start, r.col_stop - r.col_start
        return -(-rows // self.block[0]), -(-cols // self.block[1])

    def same_cells(self, other: MapQuery) -> bool:
        """Whether ``other`` shows the same cells (its layers and average aside)."""
        return replace(other, average=self.average, layers=self.layers) == self


class MapGrid:
    """One layer's shown maps gathered from blocks of rows: ``heads`` (n, r, c) and
    ``average`` (r, c)."""

    def __init__(
        self, spec: MapQuery, num_heads: int, num_rows: int, num_cols: int | None = None
    ) -> None:
        self.spec = spec
        self.num_tokens = num_rows
        self.num_keys = num_rows if num_cols is None else num_cols
        hidden_keys = spec.hidden_keys if spec.hidden_keys is not None else spec.hidden
        shown = _shown(spec.hidden, num_rows)  # (K,) positions of the shown rows
        r = spec.region
        self._shown = None if hidden_keys is None else _shown(hidden_keys, self.num_keys)
        self._cols = slice(r.col_start, r.col_stop)  # over the shown tokens
        # Per position of the text: the output row it is pooled into, -1 when not shown.
        self._out_row = torch.full((num_rows,), -1, dtype=torch.long)
        self._out_row[shown[r.row_start : r.row_stop]] = (
            torch.arange(r.row_stop - r.row_start) // spec.block[0]
        )
        self._heads = None if spec.heads is None else torch.tensor(spec.heads, dtype=torch.long)
        kept = num_heads if spec.heads is None else len(spec.heads)
        self.heads = torch.zeros(kept, *spec.shape)
        self.average = torch.zeros(spec.shape) if spec.average else None

    @property
    def empty(self) -> bool:
        """Whether the grid shows no row (every target token hidden, say)."""
        return not bool((self._out_row >= 0).any())

    @property
    def row_span(self) -> tuple[int, int]:
        """[first, last + 1) of the text's positions whose rows the grid shows."""
        shown = (self._out_row >= 0).nonzero()
        return int(shown[0, 0]), int(shown[-1, 0]) + 1

    def add(self, r0: int, c0: int, weights: torch.Tensor) -> None:
        """Rows ``r0..`` of every head's map, columns ``c0..``: weights (H, rows, cols)."""
        if self.spec.hidden is None and self._shown is None:
            self._add_rows(r0, c0, weights)
            return
        targets = self._out_row[r0 : r0 + weights.shape[-2]]
        keep = targets >= 0
        if not bool(keep.any()):
            return
        rows = keep.nonzero().squeeze(-1)
        block = weights if bool(keep.all()) else weights.index_select(-2, rows)  # (H, n, w)
        out_rows = targets[rows]
        mean = block.mean(dim=0, keepdim=True) if self.average is not None else None  # (1, n, w)
        chosen = block if self._heads is None else block.index_select(0, self._heads)
        for out, part in ((self.heads, chosen), (self.average, mean)):
            if out is None or part is None or out.numel() == 0:
                continue
            grid = out if out.dim() == 3 else out.unsqueeze(0)  # (h, r, c)
            if self._shown is None:
                first, cells = self._visible_cells(c0, part)
                if cells.shape[-1]:
                    _max_into(grid[..., first : first + cells.shape[-1]], out_rows, cells)
                continue
            right = self.num_keys - c0 - part.shape[-1]
            _max_into(grid, out_rows, self._shown_cells(F.pad(part, (c0, right))))  # (h, n, S)

    def _add_rows(self, r0: int, c0: int, weights: torch.Tensor) -> None:
        """``add`` when nothing is hidden: each run of ``block[0]`` rows pooled first (an
        elementwise maximum of whole rows), then its columns; one slice of the grid each."""
        r, height = self.spec.region, self.spec.block[0]
        lo, hi = max(r0, r.row_start), min(r0 + weights.shape[-2], r.row_stop)
        if lo >= hi:
            return
        first = (lo - r.row_start) // height
        offset = lo - r.row_start - first * height
        block = weights[..., lo - r0 : hi - r0, :]  # (H, n, w)
        mean = block.mean(dim=0, keepdim=True) if self.average is not None else None
        chosen = block if self._heads is None else block.index_select(0, self._heads)
        for out, part in ((self.heads, chosen), (self.average, mean)):
            if out is None or part is None or out.numel() == 0:
                continue
            rows = part if height == 1 else _pooled(part, offset, height, dim=-2)  # (h, k, w)
            column, cells = self._visible_cells(c0, rows)
            grid = out if out.dim() == 3 else out.unsqueeze(0)  # (h, r, c)
            target = grid[..., first : first + cells.shape[-2], column : column + cells.shape[-1]]
            torch.maximum(target, cells, out=target)

    def _visible_cells(self, c0: int, part: torch.Tensor) -> tuple[int, torch.Tensor]:
        """Nothing hidden: the pooled cells of the columns a block holds (c0..), within the
        region, and the first of them; the rest of each row is 0 and adds nothing.
        Shapes: (h, n, w) -> (h, n, cells)."""
        r, width = self.spec.region, self.spec.block[1]
        lo, hi = max(c0, r.col_start), min(c0 + part.shape[-1], r.col_stop)
        if lo >= hi:
            return 0, part[..., :0]
        first = (lo - r.col_start) // width
        piece = part[..., lo - c0 : hi - c0]
        if width == 1:
            return first, piece
        return first, _pooled(piece, lo - r.col_start - first * width, width, dim=-1)

    def _shown_cells(self, rows: torch.Tensor) -> torch.Tensor:
        """Shapes: (h, n, T) -> (h, n, cols pooled): hidden columns dropped and rows
        renormalized, the region's columns, each run of ``block[1]`` pooled."""
        if self._shown is not None:
            rows = rows.index_select(-1, self._shown)
            totals = rows.sum(dim=-1, keepdim=True)
            rows = rows / totals.clamp_min(torch.finfo(rows.dtype).tiny)
        rows = rows[..., self._cols]
        width = self.spec.block[1]
        if width == 1:
            return rows
        cells = -(-rows.shape[-1] // width)
        padded = F.pad(rows, (0, cells * width - rows.shape[-1]))
        return padded.view(*rows.shape[:-1], cells, width).amax(dim=-1)  # (h, n, cells)

    def to_cpu(self) -> MapGrid:
        """The gathered maps on the CPU (a pass on a GPU gathers them there)."""
        self.heads = self.heads.cpu()
        self.average = None if self.average is None else self.average.cpu()
        return self

    @property
    def nbytes(self) -> int:
        tensors = [self.heads] + ([self.average] if self.average is not None else [])
        return sum(t.numel() * t.element_size() for t in tensors)


def shown(maps: torch.Tensor, query: MapQuery) -> torch.Tensor:
    """Full maps (n, T, S) held whole (a generated text's, a rollout) as ``query`` shows
    each: the gatherer's own hiding, cropping and pooling, the whole map one block.
    ``query``'s heads and average do not apply: (n, rows, cols)."""
    grid = MapGrid(replace(query, heads=None, average=False), maps.shape[0], *maps.shape[-2:])
    grid.add(0, 0, maps)
    return grid.heads


def _shown(hidden: tuple[bool, ...] | None, count: int) -> torch.Tensor:
    """(K,) positions of the tokens not ``hidden`` (every one when None)."""
    if hidden is None:
        return torch.arange(count)
    return torch.tensor([not h for h in hidden]).nonzero().squeeze(-1)


def _pooled(piece: torch.Tensor, offset: int, width: int, dim: int) -> torch.Tensor:
    """Each run of ``width`` entries' maximum along ``dim`` (-1: columns, -2: rows), the
    first run ``offset`` entries short (a cell that starts before the piece) and the last
    cut where the piece ends: what padding the piece with zeros to whole cells gives for
    weights (never negative), without the padded copy.  Shapes: (h, n, w) -> (h, n, cells)
    or (h, cells, w)."""
    size = piece.shape[dim]
    head = min(size, width - offset) if offset else 0
    whole = (size - head) // width
    parts = [piece.narrow(dim, 0, head).amax(dim=dim, keepdim=True)] if head else []
    if whole:
        body = piece.narrow(dim, head, whole * width)
        axis = dim % body.dim()
        split = (*body.shape[:axis], whole, width, *body.shape[axis + 1 :])
        parts.append(body.view(split).amax(dim=axis + 1))
    if head + whole * width < size:
        tail = piece.narrow(dim, head + whole * width, size - head - whole * width)
        parts.append(tail.amax(dim=dim, keepdim=True))
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=dim)


def _max_into(out: torch.Tensor, rows: torch.Tensor, cells: torch.Tensor) -> None:
    """``out[:, rows[i]] = max(out[:, rows[i]], cells[:, i])``, in place (rows may repeat).

    Shapes: out (h, r, c), rows (n,), cells (h, n, c).
    """
    index = rows.view(1, -1, 1).expand_as(cells)
    out.scatter_reduce_(1, index, cells, "amax")
