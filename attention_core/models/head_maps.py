"""One head's attention map rebuilt from its q and k, a bounded block of rows at a time.

A long input's maps do not fit in memory all at once (T = 4,096: 64 MB a head,
9.7 GB for GPT-2 small's 144), but each is cheap to rebuild from what the
attention received: q (T, D) and its key/value head's k (S, D).  ``head_map``
runs ``attention_with_steps`` over ``block_rows`` query rows at a time (a
(block_rows, S) block of scores in memory, never (T, S)), cropping to ``rows``
and max-pooling each block as it comes (``pooling.max_pool_blocks``), so an
overview of a 4,096-token head never holds the head's full map.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..attention import attention_with_steps
from .pooling import max_pool_blocks

DEFAULT_BLOCK_ROWS = 256


def head_map(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    scale: float,
    causal: bool,
    rows: tuple[int, int] | None = None,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    pool_block: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Shapes: q (T, D), k (S, D) -> weights (rows, S), or pooled (ceil(rows / pr), ceil(S / pc)).

    Query i sits at key position ``S - T + i`` (T = S without a cache); with
    ``causal`` it sees keys up to there.  ``rows`` = [start, stop) of the T
    queries (default all).  With ``pool_block`` = (pr, pc) the blocks of rows
    are a multiple of pr, so every pooled block lies in one of them.
    """
    T, S = q.shape[0], k.shape[0]
    start, stop = rows if rows is not None else (0, T)
    if not 0 <= start < stop <= T:
        raise ValueError(f"rows [{start}, {stop}) is not a range of {T} queries")
    step = max(1, block_rows)
    if pool_block is not None:
        step = max(pool_block[0], step - step % pool_block[0])
    no_values = k[:, :0]  # (S, 0): the weights are wanted, not the context
    parts = []
    for r0 in range(start, stop, step):
        r1 = min(stop, r0 + step)
        # Causal: keys past the block's last query are masked for every row of it, so they
        # are left out (half the scores of a whole map) and their zero weights padded back.
        visible = S - T + r1 if causal else S
        allowed = None
        if causal:
            allowed = torch.ones(r1 - r0, visible, dtype=torch.bool).tril(S - T + r0)
        steps = attention_with_steps(
            q[r0:r1], k[:visible], no_values[:visible], attn_mask=allowed, scale=scale
        )
        weights = F.pad(steps.attn_weights, (0, S - visible))  # (rows, visible) -> (rows, S)
        del steps
        parts.append(weights if pool_block is None else max_pool_blocks(weights, *pool_block))
    return torch.cat(parts, dim=0)
