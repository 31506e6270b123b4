"""A request's map options as the core's one map query (``MapQuery``), checked.

``MapOptions``' ``layers``, ``heads``, ``rows``, ``cols``, ``pool`` and
``hide_special`` are checked against the maps' sizes here (422 naming the
field and the limit) and become one ``attention_core.models.map_grid.MapQuery``
(heads and layers 0-based), which the gatherer applies in one order: the head
average over every head; hide special tokens (which renormalizes whole rows);
keep the heads; crop the region; max-pool it.  ``describe`` says what the
answer holds in the API's words (1-based heads).
"""

from __future__ import annotations

from typing import Any

from attention_core import SpecError
from attention_core.models.maps.map_grid import MapQuery
from attention_core.models.maps.pooling import POOL_REDUCE, Region, block_size

from .schemas.model import MapOptions, RegionOptions


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


def _heads(found: list[int] | None, H: int) -> tuple[int, ...] | None:
    """The 0-based heads asked for (1-based in the request), None for all."""
    if found is None:
        return None
    bad = [head for head in found if not 1 <= head <= H]
    if bad:
        raise SpecError(f"heads {bad} do not exist; this model has heads 1 to {H}", field="heads")
    return tuple(h - 1 for h in dict.fromkeys(found))


def select_layers(requested: list[int] | None, count: int) -> list[int]:
    """The 1-based layer numbers asked for (default all), checked, duplicates dropped."""
    if requested is None:
        return list(range(1, count + 1))
    bad = [layer for layer in requested if not 1 <= layer <= count]
    if bad:
        raise SpecError(
            f"layers {bad} do not exist; this model has layers 1 to {count}", field="layers"
        )
    return list(dict.fromkeys(requested))


def shown_count(hidden: tuple[bool, ...] | None, count: int) -> int:
    return count if hidden is None else sum(1 for h in hidden if not h)


def region_and_block(
    options: RegionOptions, T: int, S: int, region: bool = True
) -> tuple[Region, tuple[int, int]]:
    """``rows``/``cols`` checked against a (T, S) map (``region`` False: the whole map)
    and the pooling block ``pool`` makes of that region ((1, 1): none)."""
    rows = _range(options.rows if region else None, "rows", T)
    cols = _range(options.cols if region else None, "cols", S)
    block = (1, 1)
    if options.pool is not None:
        block = (  # a stack with every token hidden shows 0 rows: a block of 1
            block_size(max(1, rows[1] - rows[0]), options.pool),
            block_size(max(1, cols[1] - cols[0]), options.pool),
        )
    return Region(*rows, *cols), block


def map_query(
    options: MapOptions,
    heads: int,
    hidden: tuple[bool, ...] | None,
    num_rows: int,
    *,
    hidden_keys: tuple[bool, ...] | None = None,
    num_cols: int | None = None,
    region: bool = True,
) -> MapQuery:
    """``options`` checked against ``heads`` heads and a map of ``num_rows`` rows
    (``num_cols`` columns; default square) of which ``hidden``/``hidden_keys`` are
    hidden.  ``region`` False: ``rows``/``cols`` do not apply (an encoder-decoder's
    decoder and cross maps; they index the source's tokens)."""
    T = shown_count(hidden, num_rows)
    S = shown_count(hidden_keys if hidden_keys is not None else hidden, num_cols or num_rows)
    shown, block = region_and_block(options, T, S, region)
    return MapQuery(
        hidden,
        shown,
        block,
        _heads(options.heads, heads),
        average=options.head_average,
        measure=getattr(options, "measure", "weights"),
        hidden_keys=hidden_keys,
    )


def describe(
    query: MapQuery, pooled_asked: bool, heads: int, shape: tuple[int, int]
) -> dict[str, Any]:
    """The answer's ``head_numbers``, ``region`` (null: the whole map) and ``pooled``
    (null unless ``pool`` was asked); ``shape``: the shown tokens' (rows, cols)."""
    numbers = list(range(1, heads + 1)) if query.heads is None else [h + 1 for h in query.heads]
    shown = region_fields(query.region, query.block, query.shape, pooled_asked, shape)
    return {"head_numbers": numbers, **shown}


def region_fields(
    r: Region,
    block: tuple[int, int],
    cells: tuple[int, int],
    pooled_asked: bool,
    shape: tuple[int, int],
) -> dict[str, Any]:
    """An answer's ``region`` (null: the whole (rows, cols) ``shape``) and ``pooled`` (null
    unless ``pool`` was asked: the ``block`` and the ``cells`` of each map)."""
    region = None
    if r != Region(0, shape[0], 0, shape[1]):
        region = {"rows": [r.row_start, r.row_stop], "cols": [r.col_start, r.col_stop]}
    pooled = None
    if pooled_asked:
        pooled = {"block": list(block), "shape": list(cells), "reduce": POOL_REDUCE}
    return {"region": region, "pooled": pooled}
