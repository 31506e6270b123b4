"""Which part of each attention map an answer carries: some heads, a region, pooled.

``MapOptions``' ``heads``, ``rows``, ``cols`` and ``pool`` are checked against the
maps' sizes here (422 naming the field and the limit) and applied in one order:
hide special tokens (which renormalizes whole rows), keep the heads, crop the
region, then max-pool it (``attention_core.models.pooling``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from attention_core import SpecError
from attention_core.models.maps.pooling import POOL_REDUCE, Region, block_size, max_pool_blocks

from .schemas.model import MapOptions


def _range(found: list[int] | None, field: str, T: int) -> tuple[int, int]:
    if found is None:
        return 0, T
    start, stop = found
    if not 0 <= start < stop <= T:
        raise SpecError(
            f"{field} [{start}, {stop}) is not a range of the {T} tokens shown: it needs "
            f"0 <= start < stop <= {T}",
            field=field,
        )
    return start, stop


def _heads(found: list[int] | None, H: int) -> list[int]:
    if found is None:
        return list(range(1, H + 1))
    bad = [head for head in found if not 1 <= head <= H]
    if bad:
        raise SpecError(f"heads {bad} do not exist; this model has heads 1 to {H}", field="heads")
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class MapView:
    """The heads (1-based), region and pooling block every returned map gets."""

    heads: list[int]
    all_heads: bool
    region: Region
    whole: bool
    block: tuple[int, int] | None

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of each map as sent."""
        r = self.region
        rows, cols = r.row_stop - r.row_start, r.col_stop - r.col_start
        if self.block is None:
            return rows, cols
        return -(-rows // self.block[0]), -(-cols // self.block[1])

    def select_heads(self, maps: torch.Tensor) -> torch.Tensor:
        """Shapes: (H, T, T) -> (len(heads), T, T)."""
        if self.all_heads:
            return maps
        return maps.index_select(0, torch.tensor([h - 1 for h in self.heads]))

    def apply(self, maps: torch.Tensor) -> torch.Tensor:
        """Shapes: (..., T, T) -> (..., *self.shape): the region, then pooled."""
        cropped = maps if self.whole else self.region.crop(maps)
        if self.block is None:
            return cropped
        return max_pool_blocks(cropped, *self.block)

    def describe(self) -> dict[str, Any]:
        """The answer's ``head_numbers``, ``region`` and ``pooled``."""
        r = self.region
        region = (
            None
            if self.whole
            else {
                "rows": [r.row_start, r.row_stop],
                "cols": [r.col_start, r.col_stop],
            }
        )
        pooled = None
        if self.block is not None:
            pooled = {"block": list(self.block), "shape": list(self.shape), "reduce": POOL_REDUCE}
        return {"head_numbers": self.heads, "region": region, "pooled": pooled}


def map_view(options: MapOptions, T: int, H: int) -> MapView:
    """``options``' heads, rows, cols and pool checked against T shown tokens and H heads."""
    rows = _range(options.rows, "rows", T)
    cols = _range(options.cols, "cols", T)
    region = Region(*rows, *cols)
    block = None
    if options.pool is not None:
        block = (
            block_size(rows[1] - rows[0], options.pool),
            block_size(cols[1] - cols[0], options.pool),
        )
    whole = rows == (0, T) and cols == (0, T)
    return MapView(_heads(options.heads, H), options.heads is None, region, whole, block)
