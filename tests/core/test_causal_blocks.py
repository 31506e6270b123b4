"""Long causal attention mixes the values in row blocks (skipping the zeros above the
diagonal); the result must be PyTorch's own attention, whatever the shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attention_core.attention import CAUSAL_BLOCK_ROWS, attention_with_steps, causal_mask


@pytest.mark.parametrize(
    ("q_shape", "kv_shape"),
    [
        ((300, 8), (300, 8)),  # one head, no batch: uneven last block
        ((2, 4, 2 * CAUSAL_BLOCK_ROWS, 16), (2, 4, 2 * CAUSAL_BLOCK_ROWS, 16)),
        ((1, 6, 1030, 8), (1, 2, 1030, 8)),  # grouped-query: 3 query heads per kv head
        ((1, 8, 300, 8), (1, 1, 300, 8)),  # one kv head for all
        ((3, 259, 8), (3, 300, 8)),  # fewer queries than keys (top-left aligned)
    ],
)
def test_long_causal_attention_equals_sdpa(q_shape: tuple[int, ...], kv_shape: tuple[int, ...]):
    g = torch.Generator().manual_seed(sum(q_shape))
    q = torch.randn(q_shape, generator=g, dtype=torch.float64)
    k = torch.randn(kv_shape, generator=g, dtype=torch.float64)
    v = torch.randn(kv_shape, generator=g, dtype=torch.float64)
    gqa = q_shape != kv_shape and len(q_shape) == 4
    steps = attention_with_steps(q, k, v, is_causal=True, enable_gqa=gqa)
    allowed = causal_mask(q_shape[-2], kv_shape[-2])
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=gqa)
    torch.testing.assert_close(steps.context_vec, want, rtol=1e-12, atol=1e-12)
    # And the weights it mixed are the full rows (nothing skipped but zeros).
    full = steps.attn_weights @ (
        v if not gqa else v.repeat_interleave(q_shape[1] // kv_shape[1], 1)
    )
    torch.testing.assert_close(steps.context_vec, full, rtol=1e-12, atol=1e-12)


def test_long_causal_attention_with_a_padding_mask_too():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 400, 8, generator=g, dtype=torch.float64) for _ in range(3))
    keep = torch.ones(400, 400, dtype=torch.bool)
    keep[:, 7] = False  # no query may see key 7
    steps = attention_with_steps(q, k, v, attn_mask=keep, is_causal=True)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=keep & causal_mask(400, 400))
    torch.testing.assert_close(steps.context_vec, want, rtol=1e-12, atol=1e-12)
    assert bool((steps.attn_weights[..., 7] == 0).all())
