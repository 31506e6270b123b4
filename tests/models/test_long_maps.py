"""The long pass (``long_maps``): maps gathered from blocks of rows equal the full maps.

GPT-2 and Llama (GQA) of the core, Gemma 2 (sliding window, soft-capping) and a
RoBERTa encoder (no causal mask) of the transformers backend, on a ~300-token
text; one head at full resolution against transformers' eager
``output_attentions=True``; and no tensor of H × T × T elements is ever made (a
dispatch mode watches every op's outputs).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from attention_core.attention import attention_with_steps
from attention_core.blocked_attention import AttentionCall, blocked_attention
from attention_core.models import hidden_tokens, hide_special
from attention_core.models.base.contract import KeptStack, PassOptions
from attention_core.models.base.result_cache import ResultCache
from attention_core.models.families.gpt2 import GPT2
from attention_core.models.families.llama import Llama
from attention_core.models.maps.blocked_pass import FullMapsPass
from attention_core.models.maps.long_maps import LongPass
from attention_core.models.maps.map_grid import MapQuery
from attention_core.models.maps.pooling import Region
from attention_core.models.text.decoder import Decoder
from attention_core.models.text.text_model_base import FULL_MAPS_BLOCKED_TOKENS, TextModelBase
from attention_core.progress import reporting
from tests.models.checkpoints import make_gpt2, make_llama
from tests.models.hf_checkpoints import make_hf
from tests.requires import require

TEXT = " ".join(["the river bank was muddy and the money was in the bank"] * 17)
LENGTH = 400  # positions of every model here


def whole(T: int, block: tuple[int, int] = (1, 1), **kw: Any) -> MapQuery:
    return MapQuery(kw.pop("hidden", None), Region(0, T, 0, T), block, kw.pop("heads", None), **kw)


def encode_long(model: TextModelBase[Any], text: str, query: MapQuery) -> KeptStack:
    """The model's one pass (the contract), ``query`` gathered during it."""
    return model.forward_stacks(text, options=PassOptions(view=lambda *_: query)).stack()


def max_pool_blocks(maps: torch.Tensor, br: int, bc: int) -> torch.Tensor:
    """The reference: each br x bc block's maximum (partial last blocks)."""
    flat = maps.reshape(-1, 1, *maps.shape[-2:])
    pooled = torch.nn.functional.max_pool2d(flat, (br, bc), (br, bc), ceil_mode=True)
    return pooled.reshape(*maps.shape[:-2], *pooled.shape[-2:])


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TextModelBase[Any]]:
    require("transformers")
    from attention_core.models.hf.text_models import load_transformers

    root = tmp_path_factory.mktemp("long-maps")
    gpt2 = make_gpt2(root / "gpt2", n_positions=LENGTH, seed=3)
    llama = make_llama(root / "llama", max_position_embeddings=LENGTH, seed=4)
    gemma = make_hf(root / "gemma2", "tiny-gemma2", seed=5, max_position_embeddings=LENGTH)
    roberta = make_hf(root / "roberta", "tiny-roberta", seed=6, max_position_embeddings=LENGTH)
    return {
        "roberta": load_transformers(  # type: ignore[dict-item]
            roberta, "roberta", 512, 0, kind="encoder", family="roberta"
        ),
        "gpt2": Decoder.from_dir(gpt2, GPT2.from_pretrained, "gpt2"),
        "llama": Decoder.from_dir(llama, Llama.from_pretrained, "llama"),
        "gemma2": load_transformers(gemma, "gemma2", 512, 0, kind="decoder", family="gemma2"),  # type: ignore[dict-item]
    }


FAMILIES = ["gpt2", "llama", "gemma2"]


@pytest.mark.parametrize("family", [*FAMILIES, "roberta"])
def test_pooled_overview_equals_pooling_the_full_maps(
    models: dict[str, TextModelBase[Any]], family: str
) -> None:
    model = models[family]
    full = model.encode(TEXT)
    T = len(full.tokens)
    assert 280 <= T <= 340
    block = (-(-T // 48), -(-T // 48))
    long = encode_long(model, TEXT, whole(T, block))
    assert isinstance(long, KeptStack) and long.tokens == full.tokens
    for layer, maps in enumerate(full.layer_attentions):
        grid = long.grids[layer]
        torch.testing.assert_close(grid.heads, max_pool_blocks(maps, *block), atol=1e-6, rtol=0)
        assert grid.average is not None
        want = max_pool_blocks(full.head_averages[layer], *block)
        torch.testing.assert_close(grid.average, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("family", [*FAMILIES, "roberta"])
def test_a_value_weighted_overview_is_gathered_during_the_pass(
    models: dict[str, TextModelBase[Any]], family: str
) -> None:
    """measure value_norm as a pass's view: each weight times its key's ‖v_j W_O^h‖, rows
    re-summed to 1, pooled, equals the same of the full maps; what ``grid`` answers."""
    model = models[family]
    full = model.encode(TEXT)
    T = len(full.tokens)
    block = (-(-T // 40), -(-T // 40))
    query = whole(T, block, measure="value_norm")
    options = PassOptions(view=lambda *_: query, values=True)
    long = model.forward_stacks(TEXT, options=options).stack()
    for layer, maps in enumerate(full.layer_attentions):
        gathered = long.gathered(layer, query)
        assert gathered is not None and long.grid(layer, query) is gathered
        lengths = long.layers[layer].value_lengths(model.head_outputs(long.name, layer))
        weighted = maps * lengths[:, None, :]
        shares = weighted / weighted.sum(-1, keepdim=True)
        torch.testing.assert_close(
            gathered.heads, max_pool_blocks(shares, *block), atol=1e-6, rtol=0
        )
        assert gathered.average is not None
        want = max_pool_blocks(shares.mean(0), *block)
        torch.testing.assert_close(gathered.average, want, atol=1e-6, rtol=0)
    assert long.gathered(0, whole(T, block)) is None  # the weights' view is another one


@pytest.mark.parametrize("family", FAMILIES)
def test_a_region_without_special_tokens_is_rebuilt_from_q_and_k(
    models: dict[str, TextModelBase[Any]], family: str
) -> None:
    model = models[family]
    full = model.encode(TEXT)
    hidden = hidden_tokens(full.special)
    long = encode_long(model, TEXT, whole(len(full.tokens), (7, 7)))
    K = sum(not h for h in hidden)
    region = Region(40, 201, 3, K - 5)
    spec = MapQuery(hidden, region, (3, 5), heads=(3, 1))
    grid = long.grid(1, spec)
    shown = hide_special(full.layer_attentions[1], hidden)
    want = max_pool_blocks(region.crop(shown[[3, 1]]), 3, 5)
    torch.testing.assert_close(grid.heads, want, atol=1e-6, rtol=0)
    average = max_pool_blocks(region.crop(hide_special(full.head_averages[1], hidden)), 3, 5)
    assert grid.average is not None
    torch.testing.assert_close(grid.average, average, atol=1e-6, rtol=0)
    # One head at full resolution, without the average: only that head is computed.
    one = long.grid(0, MapQuery(None, Region(0, K, 0, K), (1, 1), (2,), average=False))
    assert one.average is None
    torch.testing.assert_close(one.heads, full.layer_attentions[0][[2], :K, :K], atol=1e-6, rtol=0)


def eager_attentions(model: TextModelBase[Any]) -> tuple[torch.Tensor, ...]:
    """transformers' eager ``output_attentions`` of TEXT on ``model``'s checkpoint."""
    transformers = require("transformers")
    os.environ["HF_HUB_OFFLINE"] = "1"
    directory = Path(model.directory)  # type: ignore[attr-defined]
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation="eager", dtype=torch.float32
    ).eval()
    ids = torch.tensor([model.tokenize(TEXT).input_ids])
    with torch.inference_mode():
        return tuple(theirs(ids, output_attentions=True).attentions)


@pytest.mark.parametrize("family", FAMILIES)
def test_full_maps_computed_in_blocks_equal_transformers_eager(
    models: dict[str, TextModelBase[Any]], family: str
) -> None:
    """What ``encode`` runs past FULL_MAPS_BLOCKED_TOKENS tokens (a ``FullMapsPass``, in
    blocks of 64 rows), here on ~300: the maps of transformers and of one whole
    ``attention_with_steps`` per layer (the full path below that length)."""
    model = models[family]
    want = eager_attentions(model)
    ids = torch.tensor([model.tokenize(TEXT).input_ids])
    assert ids.shape[1] < FULL_MAPS_BLOCKED_TOKENS
    with torch.inference_mode():
        ours = model.model(
            ids, num_logits=0, output_attentions=True, blocked=FullMapsPass()
        ).attentions
        whole_maps = model.encode(TEXT).layer_attentions
    for layer, theirs in enumerate(want):
        torch.testing.assert_close(ours[layer], theirs, atol=2e-6, rtol=0)
        torch.testing.assert_close(ours[layer][0], whole_maps[layer], atol=1e-6, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_one_head_at_full_resolution_equals_transformers_eager(
    models: dict[str, TextModelBase[Any]], family: str
) -> None:
    model = models[family]
    want = eager_attentions(model)
    T = want[0].shape[-1]
    long = encode_long(model, TEXT, whole(T, (5, 5)))
    for layer in range(len(want)):
        grid = long.grid(layer, whole(T, heads=(3,), average=False))
        torch.testing.assert_close(grid.heads[0], want[layer][0, 3], atol=2e-6, rtol=0)


def test_blocked_attention_equals_attention_with_steps() -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 150, 8), torch.randn(1, 2, 150, 8), torch.randn(1, 2, 150, 5)
    sinks = torch.randn(4)
    window = torch.ones(150, 150, dtype=torch.bool).tril().triu(-20)[None, None]
    bias = torch.randn(1, 4, 150, 150)
    cases: list[dict[str, Any]] = [
        {"is_causal": True, "softcap": 2.0, "sinks": sinks},
        {"attn_mask": window, "score_bias": bias},
        {},
    ]
    for extras in cases:
        full = attention_with_steps(q, k, v, enable_gqa=True, scale=0.3, **extras)
        weights = torch.zeros_like(full.attn_weights)
        spans: list[tuple[int, int, int]] = []

        def keep(
            r0: int,
            c0: int,
            w: torch.Tensor,
            weights: torch.Tensor = weights,
            spans: list[tuple[int, int, int]] = spans,
        ) -> None:
            spans.append((r0, c0, w.shape[-1]))
            weights[..., r0 : r0 + w.shape[-2], c0 : c0 + w.shape[-1]] = w

        context = blocked_attention(
            AttentionCall(q, k, v, enable_gqa=True, scale=0.3, **extras),
            block_rows=32,
            on_block=keep,
        )
        torch.testing.assert_close(context, full.context_vec, atol=1e-6, rtol=0)
        torch.testing.assert_close(weights, full.attn_weights, atol=1e-6, rtol=0)
        assert [s[0] for s in spans] == [0, 32, 64, 96, 128]
        if extras.get("is_causal"):  # a causal block reads the keys up to its last row only
            assert [s[1] + s[2] for s in spans] == [32, 64, 96, 128, 150]
        if "attn_mask" in extras:  # a window's block starts at its first row's window
            assert [s[1] for s in spans] == [0, 12, 44, 76, 108]


class LargestOutput(TorchDispatchMode):
    """Records the most elements any op's output tensor had."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("family", FAMILIES)
def test_no_tensor_of_every_head_s_map_is_made(
    models: dict[str, TextModelBase[Any]], family: str
) -> None:
    """At T ≈ 300 a whole map fits the default block budget, so the budget is set to 32
    rows of every head here; the 4,096-token API test watches the default one."""
    model = models[family]
    ids = torch.tensor([model.tokenize(TEXT).input_ids])
    T, H = ids.shape[1], model.config.num_heads
    pass_ = LongPass(whole(T, (9, 9)), model.config.num_layers, block_cells=32 * H * T)
    with torch.inference_mode(), LargestOutput() as watched:
        model.model(ids, num_logits=0, blocked=pass_)
    assert sorted(pass_.grids) == [0, 1]
    # Blocks of 32 rows of every head; at most the (1, 1, T, T) boolean mask transformers
    # builds for the whole text (one per layer type, not per head).
    assert watched.largest <= T * T < H * T * T
    with LargestOutput() as full:  # the same watch sees today's full pass make them
        model.model(ids, output_attentions=True)
    assert full.largest >= H * T * T


@pytest.mark.parametrize("family", ["gpt2", "gemma2"])
def test_the_long_pass_reports_each_layer(
    models: dict[str, TextModelBase[Any]], family: str
) -> None:
    model = models[family]
    model.long_cache = ResultCache(0)  # no cached result: the pass runs
    T = len(model.tokenize(TEXT).input_ids)
    seen: list[tuple[str, int, int]] = []
    with reporting(lambda *event: seen.append(event)):
        encode_long(model, TEXT, whole(T, (9, 9)))
    assert seen == [("forward", 1, 2), ("forward", 2, 2)]


def test_a_region_is_rebuilt_from_its_own_rows_only(
    models: dict[str, TextModelBase[Any]],
) -> None:
    model = models["llama"]
    T = len(model.tokenize(TEXT))
    long = encode_long(model, TEXT, whole(T, (7, 7)))
    spec = MapQuery(None, Region(100, 140, 0, T), (1, 1), (1,), average=False)
    with LargestOutput() as watched:
        grid = long.grid(1, spec)
    want = model.encode(TEXT).layer_attentions[1][[1], 100:140]
    torch.testing.assert_close(grid.heads, want, atol=1e-6, rtol=0)
    assert watched.largest <= 40 * T  # 40 rows of one head: no other row is computed
