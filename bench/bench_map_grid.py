"""Where one layer's long-path overview time goes (issue 21, figure 1), CPU time, 1 thread.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_map_grid.py [--tokens 4096] [--pool 128]

One GPT-2-small-shaped attention layer (12 heads of width 64, causal, random q, k, v):

- ``sdpa``: ``F.scaled_dot_product_attention(is_causal=True)``, fused (what the
  transformers SDPA forward spends on attention);
- ``blocked``: ``blocked_attention`` alone (every step kept, causal blocks skip
  the keys no row sees; the long path's attention before gathering);
- ``+ MapGrid.add``: the long path's layer as the library runs it (each block of
  weights gathered into the pooled grid and the head average);
- ``+ lean add``: the same gathering by ``lean_add`` below, the experiment that
  measured what the library's first ``MapGrid.add`` lost: no copy of a block whose
  rows are all shown (``index_select``), and no padding of each block to T columns
  before pooling (a causal block of rows r0..r1 has r1 columns; the grid's cells past
  them stay 0, which is their maximum).  It handles the overview's case only
  (nothing hidden, the whole map, c0 = 0) and falls back to ``MapGrid.add``
  otherwise.  Checked: the heads equal, the averages within 1e-6.  ``MapGrid.add``
  does the same since i21-long's 7318379, so the two now take about the same time.

Best of ``--repeats`` of each, the process's CPU time.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from attention_core.blocked_attention import AttentionCall, blocked_attention, rows_per_block
from attention_core.models.maps.map_grid import MapGrid, MapQuery, _max_into
from attention_core.models.maps.pooling import Region


def lean_add(grid: MapGrid, r0: int, c0: int, weights: torch.Tensor) -> None:
    """``grid.add`` without the block copy and the pad to T (see the module doc)."""
    targets = grid._out_row[r0 : r0 + weights.shape[-2]]
    whole = grid._cols == slice(0, grid.num_tokens)
    if grid._shown is not None or c0 != 0 or not whole or not bool((targets >= 0).all()):
        grid.add(r0, c0, weights)
        return
    width = grid.spec.block[1]
    cells = -(-weights.shape[-1] // width)
    padded = F.pad(weights, (0, cells * width - weights.shape[-1]))  # to the next cell edge
    pooled = padded.view(*weights.shape[:-1], cells, width).amax(dim=-1)  # (H, n, cells)
    chosen = pooled if grid._heads is None else pooled.index_select(0, grid._heads)
    _max_into(grid.heads[..., :cells], targets, chosen)
    if grid.average is not None:
        mean = padded.mean(dim=0).view(weights.shape[-2], cells, width).amax(dim=-1)
        _max_into(grid.average.unsqueeze(0)[..., :cells], targets, mean.unsqueeze(0))


def best_cpu(name: str, work: Callable[[], Any], repeats: int) -> Any:
    times, out = [], None
    for _ in range(repeats):
        start = time.process_time()
        out = work()
        times.append(time.process_time() - start)
    print(f"| {name} | {min(times):.2f} s |", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--pool", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    T, H, D = args.tokens, 12, 64
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, H, T, D, generator=generator) for _ in range(3))
    block = -(-T // args.pool)
    spec = MapQuery(hidden=None, region=Region(0, T, 0, T), block=(block, block), heads=None)
    rows = rows_per_block(H, T)
    call = AttentionCall(q, k, v, is_causal=True, scale=D**-0.5)

    def gathered(add: Callable[[MapGrid, int, int, torch.Tensor], None]) -> MapGrid:
        grid = MapGrid(spec, H, T)
        blocked_attention(call, block_rows=rows, on_block=lambda r0, c0, w: add(grid, r0, c0, w[0]))
        return grid

    print(f"T = {T}, 12 heads, pool {args.pool}, load average {os.getloadavg()[0]:.1f}")
    print("| one layer | CPU (best) |\n|---|---:|")
    with torch.inference_mode():
        sdpa = F.scaled_dot_product_attention
        best_cpu("sdpa (fused, causal)", lambda: sdpa(q, k, v, is_causal=True), args.repeats)
        best_cpu(
            "blocked_attention alone",
            lambda: blocked_attention(call, block_rows=rows),
            args.repeats,
        )
        branch = best_cpu("+ MapGrid.add (library)", lambda: gathered(MapGrid.add), args.repeats)
        lean = best_cpu("+ lean add (experiment)", lambda: gathered(lean_add), args.repeats)
    assert torch.equal(branch.heads, lean.heads), "the lean add changed the heads"
    assert branch.average is not None and lean.average is not None
    gap = (branch.average - lean.average).abs().max().item()  # the means may round apart
    assert gap <= 1e-6, f"the lean add changed the average by {gap:.1e}"
    print(f"heads equal; head averages within {gap:.1e}")


if __name__ == "__main__":
    main()
