"""attention_core.models.head_maps: one head's map rebuilt from its q and k in blocks of
rows equals the map the forward pass computed (GPT-2, and Llama with grouped kv heads)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import attention_core.models.head_maps as head_maps
from attention_core.models import GPT2, GPT2Config, Llama, LlamaConfig
from attention_core.models.head_maps import head_map
from attention_core.models.pooling import max_pool_blocks

T = 37


def run(model: torch.nn.Module, layer: int) -> tuple[Any, torch.Tensor]:
    model.init_weights()  # type: ignore[operator]
    with torch.no_grad():  # 3x the initial scale: peaked maps, not near-uniform ones
        for param in model.parameters():
            param.mul_(3.0)
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (1, T))
    with torch.inference_mode():
        out = model.eval()(ids, num_logits=0, output_attentions=True, trace_layer=layer)
    return out.trace, out.attentions[layer][0]  # (H, T, T)


MODELS = {
    "gpt2": lambda: GPT2(GPT2Config(vocab_size=50, n_positions=64, n_embd=32, n_layer=2, n_head=4)),
    "llama": lambda: Llama(
        LlamaConfig(
            vocab_size=50,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
        )
    ),
}


@pytest.mark.parametrize("family", sorted(MODELS))
@pytest.mark.parametrize("block_rows", [1, 5, 64])
def test_every_head_equals_the_forward_pass_map(family: str, block_rows: int) -> None:
    torch.manual_seed(1)
    trace, maps = run(MODELS[family](), 1)
    H, H_kv = trace.q.shape[1], trace.k.shape[1]
    for h in range(H):
        got = head_map(
            trace.q[0, h],
            trace.k[0, h // (H // H_kv)],
            scale=trace.steps.scale,
            causal=True,
            block_rows=block_rows,
        )
        torch.testing.assert_close(got, maps[h], atol=1e-5, rtol=0)


def test_a_region_and_a_pooled_head_equal_the_same_cells_of_the_full_map(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch.manual_seed(2)
    trace, maps = run(MODELS["gpt2"](), 0)
    q, k, scale = trace.q[0, 2], trace.k[0, 2], trace.steps.scale
    region = head_map(q, k, scale=scale, causal=True, rows=(5, 30))
    torch.testing.assert_close(region, maps[2, 5:30], atol=1e-5, rtol=0)
    # Pooled as it goes, in blocks of at most 8 rows (rounded down to 3's multiple: 6).
    seen: list[int] = []
    real = head_maps.attention_with_steps

    def counted(query: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        seen.append(query.shape[0])
        return real(query, *args, **kwargs)

    monkeypatch.setattr(head_maps, "attention_with_steps", counted)
    pooled = head_map(q, k, scale=scale, causal=True, rows=(4, T), block_rows=8, pool_block=(3, 4))
    assert max(seen) == 6 and sum(seen) == T - 4
    want = max_pool_blocks(maps[2, 4:], 3, 4)
    assert pooled.shape == want.shape == (-(-(T - 4) // 3), -(-T // 4))
    torch.testing.assert_close(pooled, want, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="not a range of 37 queries"):
        head_map(q, k, scale=scale, causal=True, rows=(0, 38))
