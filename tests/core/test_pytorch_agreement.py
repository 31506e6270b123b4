"""The core agrees with PyTorch's own attention: SDPA and nn.MultiheadAttention are the oracles."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention_core import Projections, attention_with_steps, causal_mask, multi_head_attention

# (T, S, d_model, heads, causal, seed, cross); S only matters for cross-attention.
CASES = [
    (t, s, d, h, causal, seed, cross)
    for t, s, (d, h), causal, seed, cross in itertools.product(
        [1, 6],  # T
        [4, 9],  # S: shorter and longer than T
        [(4, 1), (8, 4), (12, 3), (6, 6)],  # (d_model, heads)
        [False, True],
        [0, 1],
        [False, True],
    )
    if cross or s == 4  # S only varies for cross-attention
]


def _ids(case) -> str:
    t, s, d, h, causal, seed, cross = case
    kind = f"cross-S{s}" if cross else "self"
    return f"T{t}-{kind}-d{d}-H{h}-{'causal' if causal else 'full'}-seed{seed}"


def _inputs(case):
    t, s, d, _, _, seed, cross = case
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, d, generator=g)
    # Cross-attention sources get their own width, to exercise kdim/vdim.
    source = torch.randn(s, d + 3, generator=g) if cross else None
    return x, source


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_context_vectors_match_sdpa(case):
    t, s, d, heads, causal, seed, cross = case
    x, source = _inputs(case)
    g = torch.Generator().manual_seed(seed + 100)
    kv_width = d if source is None else source.shape[1]
    # Unit-variance projections (randn / sqrt(fan_in)), as nn.Linear's init keeps them.
    projections = Projections(
        W_query=torch.randn(d, d, generator=g) / d**0.5,
        W_key=torch.randn(kv_width, d, generator=g) / kv_width**0.5,
        W_value=torch.randn(kv_width, 2 * d, generator=g) / kv_width**0.5,
    )
    for scale in (None, 0.25):
        trace = multi_head_attention(
            x, projections, heads, source=source, is_causal=causal, scale=scale
        )
        kv = x if source is None else source
        q = (x @ projections.W_query).view(t, heads, -1).transpose(0, 1)  # (H, T, d_k)
        k = (kv @ projections.W_key).view(kv.shape[0], heads, -1).transpose(0, 1)  # (H, S, d_k)
        v = (kv @ projections.W_value).view(kv.shape[0], heads, -1).transpose(0, 1)  # (H, S, d_v)
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        torch.testing.assert_close(trace.context_vec, expected)
        default_scale = (d // heads) ** -0.5
        assert trace.scale == pytest.approx(default_scale if scale is None else scale)


def _mha(case) -> nn.MultiheadAttention:
    _, _, d, heads, _, seed, _ = case
    x, source = _inputs(case)
    kdim = None if source is None else source.shape[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mha = nn.MultiheadAttention(d, heads, bias=False, batch_first=True, kdim=kdim, vdim=kdim)
        # xavier init leaves out_proj small but nonzero; randomize it to make it matter.
        nn.init.normal_(mha.out_proj.weight)
    return mha.eval()


def _projections_from(mha: nn.MultiheadAttention) -> Projections:
    if mha._qkv_same_embed_dim:
        w_q, w_k, w_v = mha.in_proj_weight.detach().chunk(3, dim=0)  # each (E, E)
    else:
        w_q = mha.q_proj_weight.detach()
        w_k = mha.k_proj_weight.detach()
        w_v = mha.v_proj_weight.detach()
    # nn.Linear-style weights are (out, in); the core applies x @ W with W (in, out).
    return Projections(
        W_query=w_q.T, W_key=w_k.T, W_value=w_v.T, W_out=mha.out_proj.weight.detach().T
    )


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_weights_and_output_match_multihead_attention(case):
    t, s, d, heads, causal, seed, cross = case
    x, source = _inputs(case)
    mha = _mha(case)
    assert mha._qkv_same_embed_dim == (not cross)
    kv = x if source is None else source
    # MHA's boolean mask: True means NOT allowed (the inverse of SDPA's and the core's).
    attn_mask = ~causal_mask(t, kv.shape[0]) if causal else None
    with torch.no_grad():
        expected_out, expected_weights = mha(
            x[None],
            kv[None],
            kv[None],
            attn_mask=attn_mask,
            need_weights=True,
            average_attn_weights=False,
        )
    trace = multi_head_attention(x, _projections_from(mha), heads, source=source, is_causal=causal)
    torch.testing.assert_close(trace.attn_weights, expected_weights[0])  # (H, T, S)
    torch.testing.assert_close(trace.output, expected_out[0])  # (T, d_model)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_boolean_mask_convention_matches_sdpa(seed):
    """True means "may attend", as in SDPA; combined with is_causal by AND."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(2, 5, 3, generator=g),
        torch.randn(2, 6, 3, generator=g),
        torch.randn(2, 6, 4, generator=g),
    )
    allowed = torch.rand(5, 6, generator=g) > 0.4
    allowed[:, 0] = True  # every query keeps at least one key
    steps = attention_with_steps(q, k, v, attn_mask=allowed)
    torch.testing.assert_close(
        steps.context_vec, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    )
    assert bool((steps.attn_weights[:, ~allowed] == 0).all())
    both = attention_with_steps(q, k, v, attn_mask=allowed, is_causal=True)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed & causal_mask(5, 6))
    torch.testing.assert_close(both.context_vec, expected)


@pytest.mark.parametrize(
    ("q_heads", "kv_heads", "queries", "keys", "causal"),
    [(4, 2, 5, 5, True), (8, 1, 7, 7, False), (6, 3, 1, 9, False), (4, 4, 3, 3, True)],
)
def test_grouped_query_attention_matches_sdpa(q_heads, kv_heads, queries, keys, causal):
    """enable_gqa: query head h reads kv head h // (H_q / H_kv), as SDPA's enable_gqa does."""
    g = torch.Generator().manual_seed(q_heads * 10 + kv_heads)
    q = torch.randn(2, q_heads, queries, 8, generator=g)
    k = torch.randn(2, kv_heads, keys, 8, generator=g)
    v = torch.randn(2, kv_heads, keys, 5, generator=g)
    steps = attention_with_steps(q, k, v, is_causal=causal, enable_gqa=True)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(steps.context_vec, expected)
    # Every step per query head, equal to plain attention on repeated keys and values.
    group = q_heads // kv_heads
    repeated = attention_with_steps(
        q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), is_causal=causal
    )
    for name in ("attn_scores", "scaled_scores", "masked_scores", "attn_weights"):
        torch.testing.assert_close(getattr(steps, name), getattr(repeated, name))
    assert steps.attn_weights.shape == (2, q_heads, queries, keys)


def test_grouped_query_attention_needs_whole_groups():
    q, k = torch.randn(1, 6, 3, 4), torch.randn(1, 4, 3, 4)
    with pytest.raises(ValueError, match=r"query heads \(6\) to be a multiple of the key/value"):
        attention_with_steps(q, k, k, enable_gqa=True)


def test_dropout_drops_weights_in_the_mixing_only():
    """As SDPA: dropped weights, survivors scaled by 1/(1-p); attn_weights stay the softmax."""
    q, k, v = torch.randn(2, 6, 4), torch.randn(2, 6, 4), torch.eye(6).expand(2, 6, 6)
    torch.manual_seed(0)
    steps = attention_with_steps(q, k, v, dropout_p=0.5)
    torch.testing.assert_close(steps.attn_weights.sum(-1), torch.ones(2, 6))
    mixed = steps.context_vec  # v is the identity, so these are the dropped weights
    kept = mixed != 0
    assert 0 < int(kept.sum()) < mixed.numel()
    torch.testing.assert_close(mixed[kept], 2 * steps.attn_weights[kept])
    no_drop = attention_with_steps(q, k, v, dropout_p=0.0)
    torch.testing.assert_close(no_drop.context_vec, no_drop.attn_weights)
