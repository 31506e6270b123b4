"""The GPU overview's kernel (``gpu_pooled``, ``pooled_kernel``), run on the CPU in
Triton's interpreter: its pooled grids against the blocked float32 path's ``MapGrid`` on
the same q and k (grouped-query heads, causal or not, lengths that are no multiple of
the tile or of the cells, tiles spanning two cells and cells finer than a tile), the
16-bit rounding's bound, when ``LongPass`` takes it, and a model's overview through the
API with the option on and off (a hand-written Llama, and a Qwen3 through transformers,
whose causal mask the pass describes: ``hf.described_mask``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from attention_core.blocked_attention import AttentionCall, blocked_attention
from attention_core.models.maps import gpu_pooled
from attention_core.models.maps.long_maps import LongPass
from attention_core.models.maps.map_grid import MapGrid, MapQuery
from attention_core.models.maps.pooling import Region, block_size
from tests.models.checkpoints import make_llama
from tests.models.hf_checkpoints import make_hf
from tests.requires import require

require("triton")


@pytest.fixture(autouse=True, scope="module")
def interpreter() -> Iterator[None]:
    """The kernel on the CPU in Triton's interpreter (tests/conftest.py sets
    TRITON_INTERPRET before Triton is imported), for this module only."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gpu_pooled, "CPU_INTERPRETER", True)
        yield


def whole(
    T: int, cells: int, heads: tuple[int, ...] | None = None, average: bool = True
) -> MapQuery:
    block = block_size(T, cells)
    return MapQuery(None, Region(0, T, 0, T), (block, block), heads, average)


def inputs(H: int, H_kv: int, T: int, D: int, seed: int) -> AttentionCall:
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, n, T, D, generator=g) * 2 for n in (H, H_kv, H_kv))
    return AttentionCall(q, k, v, None, True, None, H_kv < H)


def blocked_grid(call: AttentionCall, query: MapQuery) -> tuple[MapGrid, torch.Tensor]:
    """The float32 path's grid and context: ``blocked_attention`` into ``MapGrid``."""
    H, T = int(call.query.shape[1]), int(call.query.shape[2])
    grid = MapGrid(query, H, T, T)
    context = blocked_attention(
        call, block_rows=7, on_block=lambda r0, c0, w: grid.add(r0, c0, w[0])
    )
    return grid, context


# (H, H_kv, T, D, cells, causal): the tile each case pools with is in the comment.
CASES = [
    (4, 2, 50, 32, 7, True),  # block 8 < 16: 16 × 16 tiles of several cells, one atomic each
    (2, 1, 100, 16, 3, True),  # block 34: 32 × 32 tiles, some spanning two cells
    (4, 4, 37, 24, 40, False),  # block 1 (full resolution), D padded to 32, no mask
    (2, 1, 300, 32, 2, True),  # block 150: 128 × 64 tiles spanning two cells a side
    (3, 1, 130, 64, 5, False),  # block 26: 16 × 16 tiles; 3 heads on one kv head
]


@pytest.mark.parametrize(("H", "H_kv", "T", "D", "cells", "causal"), CASES)
def test_the_kernels_grid_is_the_float32_paths(
    H: int, H_kv: int, T: int, D: int, cells: int, causal: bool
) -> None:
    call = replace(inputs(H, H_kv, T, D, seed=T), is_causal=causal)
    query = whole(T, cells)
    expected, expected_context = blocked_grid(call, query)
    grid = MapGrid(query, H, T, T)
    context = gpu_pooled.pooled_attend(call, grid)
    assert grid.heads.shape == expected.heads.shape == (H, *query.shape)
    assert torch.allclose(grid.heads, expected.heads, atol=1e-5, rtol=0)
    assert grid.average is not None and expected.average is not None
    assert torch.allclose(grid.average, expected.average, atol=1e-5, rtol=0)
    assert torch.allclose(context, expected_context, atol=1e-5, rtol=0)
    assert float(grid.heads.amax()) > 0.3  # sharp enough that a wrong cell would show


def test_some_heads_and_no_average() -> None:
    call = inputs(4, 2, 90, 32, seed=3)
    query = whole(90, 4, heads=(3, 0), average=False)
    expected, _ = blocked_grid(call, query)
    grid = MapGrid(query, 4, 90, 90)
    gpu_pooled.pooled_attend(call, grid)
    assert grid.average is None
    assert torch.allclose(grid.heads, expected.heads, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_scores_stay_within_the_documented_bound(dtype: torch.dtype) -> None:
    """What the GPU computes: q and k rounded to 16 bits, products summed in float32 (here
    the rounded values in float32), the forward's log-sum-exp of the same rounded scores.
    Against the float32 path a cell moves by at most p·|Δs|: under 1/255 for float16, and
    under 4/255 for bfloat16's 8 bits (float16 is used whenever every value fits it)."""
    call = inputs(4, 2, 120, 64, seed=5)
    query = whole(120, 12)
    expected, _ = blocked_grid(call, query)
    rounded = replace(call, query=call.query.to(dtype).float(), key=call.key.to(dtype).float())
    grid = MapGrid(query, 4, 120, 120)
    gpu_pooled.pooled_attend(rounded, grid)
    error = float((grid.heads - expected.heads).abs().amax())
    bound = 1 / 255 if dtype == torch.float16 else 4 / 255
    assert 0 < error < bound


def plain_call(T: int = 64, **changes: Any) -> AttentionCall:
    return replace(inputs(4, 2, T, 32, seed=1), **changes)


REFUSED: list[tuple[str, Callable[[], tuple[AttentionCall, MapQuery | None]]]] = [
    ("no view", lambda: (plain_call(), None)),
    ("value_norm", lambda: (plain_call(), replace(whole(64, 8), measure="value_norm"))),
    (
        "hidden tokens",
        lambda: (plain_call(), replace(whole(64, 8), hidden=(True,) + (False,) * 63)),
    ),
    ("a region", lambda: (plain_call(), replace(whole(64, 8), region=Region(0, 32, 0, 64)))),
    ("a mask", lambda: (plain_call(attn_mask=torch.ones(64, 64, dtype=torch.bool)), whole(64, 8))),
    ("a soft-cap", lambda: (plain_call(softcap=30.0), whole(64, 8))),
    ("sinks", lambda: (plain_call(sinks=torch.zeros(4)), whole(64, 8))),
    ("a score bias", lambda: (plain_call(score_bias=torch.zeros(64, 64)), whole(64, 8))),
    ("causal behind a cache", lambda: (plain_call(query=torch.randn(1, 4, 8, 32)), whole(8, 8))),
    ("an odd head dim", lambda: (replace(inputs(4, 2, 64, 12, seed=1)), whole(64, 8))),
]


@pytest.mark.parametrize(("why", "case"), REFUSED, ids=[why for why, _ in REFUSED])
def test_the_kernel_is_taken_only_where_it_means_the_same(
    why: str, case: Callable[[], tuple[AttentionCall, MapQuery | None]]
) -> None:
    call, query = case()
    assert not gpu_pooled.fits(call, query), why


def test_where_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gpu_pooled.fits(plain_call(), whole(64, 8))
    assert gpu_pooled.kernel_available(torch.device("cpu"))  # the interpreter (this module)
    assert gpu_pooled.kernel_available(torch.device("cuda"))  # not run: Triton is importable
    monkeypatch.setattr(gpu_pooled, "CPU_INTERPRETER", False)  # the app's default
    assert not gpu_pooled.kernel_available(torch.device("cpu"))


def spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The layers' q lengths ``pool_layer`` was called with."""
    calls: list[int] = []
    original = gpu_pooled.pool_layer

    def counted(query: torch.Tensor, *args: Any) -> MapGrid:
        calls.append(int(query.shape[1]))
        return original(query, *args)

    monkeypatch.setattr(gpu_pooled, "pool_layer", counted)
    return calls


@pytest.mark.parametrize(
    ("device_pooling", "full_averages", "used"),
    [(True, False, True), (False, False, False), (True, True, False)],
)
def test_long_pass_takes_it_when_asked_and_nothing_else_reads_the_blocks(
    monkeypatch: pytest.MonkeyPatch, device_pooling: bool, full_averages: bool, used: bool
) -> None:
    calls = spy(monkeypatch)
    call = plain_call(T=40)
    pass_ = LongPass(whole(40, 5), 1, device_pooling=device_pooling, full_averages=full_averages)
    context = pass_.attend(0, call)
    expected, expected_context = blocked_grid(call, whole(40, 5))
    assert calls == ([40] if used else [])
    assert pass_.pooled_on_device == int(used)
    assert torch.allclose(pass_.grids[0].heads, expected.heads, atol=1e-5, rtol=0)
    assert torch.allclose(context, expected_context, atol=1e-5, rtol=0)
    assert pass_.layers[0].query.dtype == torch.float32  # the kept q/k: float32 either way


MODEL = "pooled-llama"
HF_MODEL = "pooled-qwen3"  # through the transformers backend (its mask described)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("gpu-pooled")
    make_llama(root / MODEL, max_position_embeddings=256, seed=4)
    make_hf(root / HF_MODEL, "tiny-qwen3", seed=5, max_position_embeddings=256)
    return root


def overview(models_dir: Path, device_pooling: bool, model: str = MODEL) -> dict[str, Any]:
    settings = Settings(
        models=str(models_dir),
        hf_cache=False,
        model_full_maps_bytes=0,  # the long path at any length
        model_long_rollout_tokens=0,
        model_device_pooling=device_pooling,
    )
    body = {"model": model, "text": "the river bank was muddy " * 20, "pool": 9}
    with TestClient(create_app(settings)) as client:
        response = client.post("/api/model/attention", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert answer["maps_path"] == "long"
    return answer


@pytest.mark.parametrize("model", [MODEL, HF_MODEL])
def test_a_models_overview_through_the_api_is_the_same_either_way(
    models_dir: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    calls = spy(monkeypatch)
    kernel = overview(models_dir, device_pooling=True, model=model)
    assert len(calls) == 2  # both layers
    blocked = overview(models_dir, device_pooling=False, model=model)
    assert len(calls) == 2
    for key in ("attentions", "head_average"):
        ours, theirs = torch.tensor(kernel[key]), torch.tensor(blocked[key])
        assert ours.shape == theirs.shape
        assert torch.allclose(ours, theirs, atol=1e-5, rtol=0), key


def test_a_kernel_that_cannot_build_leaves_the_blocked_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triton failing to build or launch (no C compiler for its launcher, say): the layer
    goes the blocked way, and so does every later one in the process."""
    monkeypatch.setattr(gpu_pooled, "FAILED", [])

    def broken(*args: Any) -> None:
        raise RuntimeError("Failed to find C compiler")

    monkeypatch.setattr(gpu_pooled, "_launch", broken)
    call = plain_call(T=40)
    pass_ = LongPass(whole(40, 5), 1, device_pooling=True)
    context = pass_.attend(0, call)
    expected, expected_context = blocked_grid(call, whole(40, 5))
    assert pass_.pooled_on_device == 0
    assert torch.allclose(pass_.grids[0].heads, expected.heads, atol=1e-5, rtol=0)
    assert torch.allclose(context, expected_context, atol=1e-5, rtol=0)
    assert gpu_pooled.FAILED == ["RuntimeError: Failed to find C compiler"]
    assert not gpu_pooled.kernel_available(torch.device("cuda"))


def test_the_autotuner_times_only_tiles_that_fit_the_pooling_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a GPU the autotuner times the largest tile that fits the blocks and half its
    rows, 4 or 8 warps, 1 or 2 stages; in the interpreter it runs the largest tile only."""
    from attention_core.models.maps.pooled_kernel import CONFIGS, _two_cells, pruned

    def shapes(rows_cap: int, cols_cap: int) -> set[tuple[int, int, int, int]]:
        chosen = pruned(CONFIGS, {"rows_cap": rows_cap, "cols_cap": cols_cap})
        return {(c.kwargs["BM"], c.kwargs["BN"], c.num_warps, c.num_stages) for c in chosen}

    assert shapes(128, 64) == {(128, 64, 8, 1)}  # the interpreter (this module)
    assert shapes(16, 16) == {(16, 16, 4, 1)}
    monkeypatch.delenv("TRITON_INTERPRET")  # as on a GPU (read per launch)
    timed = shapes(128, 64)
    assert {(rows, cols) for rows, cols, _, _ in timed} == {(128, 64), (64, 64)}
    assert len(timed) == 8
    # A 150-wide block (2 cells of T = 300): every timed tile touches at most 2 × 2 cells.
    assert all(_two_cells({"BM": r, "BN": c, "block_r": 150, "block_c": 150}) for r, c, *_ in timed)
    # Blocks of 8 (finer than any tile): 16 × 16 tiles, each entry its own atomic.
    assert {(r, c) for r, c, *_ in shapes(16, 16)} == {(16, 16)}
    assert not _two_cells({"BM": 16, "BN": 16, "block_r": 8, "block_c": 8})


def test_two_threads_pool_at_once_each_into_its_own_grid() -> None:
    """Two model threads launch the tuned kernel at once (different pools: different
    autotuner keys); each grid is still its own blocked path's."""
    calls = [(plain_call(T=40), whole(40, 5)), (plain_call(T=48), whole(48, 3))]
    results: dict[int, MapGrid] = {}

    def pool(index: int) -> None:
        call, query = calls[index]
        H, T = int(call.query.shape[1]), int(call.query.shape[2])
        for _ in range(3):
            grid = MapGrid(query, H, T, T)
            gpu_pooled.pooled_attend(call, grid)
            results[index] = grid

    threads = [threading.Thread(target=pool, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not gpu_pooled.FAILED
    for index, (call, query) in enumerate(calls):
        expected, _ = blocked_grid(call, query)
        assert torch.allclose(results[index].heads, expected.heads, atol=1e-5, rtol=0)
