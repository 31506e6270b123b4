"""Pooling, written once (``map_grid``): block maxima, partial last blocks, regions."""

from __future__ import annotations

import pytest
import torch

from attention_core.models.maps.map_grid import MapQuery, shown
from attention_core.models.maps.pooling import Region, block_size


def reference(maps: torch.Tensor, br: int, bc: int) -> torch.Tensor:
    Tq, Tk = maps.shape[-2:]
    rows = [maps[..., i : i + br, :].amax(-2) for i in range(0, Tq, br)]
    stacked = torch.stack(rows, -2)  # (..., ceil(Tq / br), Tk)
    cols = [stacked[..., j : j + bc].amax(-1) for j in range(0, Tk, bc)]
    return torch.stack(cols, -1)


def pooled(maps: torch.Tensor, br: int, bc: int) -> torch.Tensor:
    T, S = maps.shape[-2:]
    return shown(maps, MapQuery(None, Region(0, T, 0, S), (br, bc), None))


@pytest.mark.parametrize(("br", "bc"), [(1, 1), (3, 3), (4, 7), (13, 2), (100, 100)])
def test_block_maxima_with_partial_blocks(br: int, bc: int) -> None:
    maps = torch.rand(3, 13, 29, generator=torch.Generator().manual_seed(0))
    got = pooled(maps, br, bc)
    assert got.shape == (3, -(-13 // br), -(-29 // bc))
    assert torch.equal(got, reference(maps, br, bc))


def test_block_size_fits_each_axis_in_the_cells() -> None:
    maps = torch.rand(4, 300, 120)
    block = (block_size(300, 32), block_size(120, 32))
    assert block == (10, 4) and pooled(maps, *block).shape == (4, 30, 30)
    assert block_size(300, 1000) == 1 and block_size(301, 100) == 4
    with pytest.raises(ValueError, match="at least 1"):
        block_size(10, 0)


def test_a_region_is_the_same_cells() -> None:
    maps = torch.arange(2 * 10 * 10.0).reshape(2, 10, 10)
    assert torch.equal(Region(2, 5, 3, 10).crop(maps), maps[:, 2:5, 3:10])
    query = MapQuery(None, Region(2, 5, 3, 10), (1, 1), None)
    assert torch.equal(shown(maps, query), maps[:, 2:5, 3:10])
