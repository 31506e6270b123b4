"""attention_with_steps(keep_steps=False), the blocked pass's call: the same weights and
context bit for bit as the call that keeps every step, for every optional step."""

from __future__ import annotations

import pytest
import torch

from attention_core.attention import attention_with_steps
from attention_core.errors import SpecError


def _qkv(heads: int = 4, kv_heads: int = 4, length: int = 9) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    q = torch.randn(2, heads, length, 8) * 2
    return q, torch.randn(2, kv_heads, length, 8) * 2, torch.randn(2, kv_heads, length, 5)


BLOCK = torch.ones(9, 9, dtype=torch.bool).tril(3)  # a blocked pass's causal block shape
CASES: dict[str, dict[str, object]] = {
    "plain": {},
    "causal": {"is_causal": True},
    "causal block mask": {"attn_mask": BLOCK},
    "per-head mask": {"attn_mask": torch.rand(2, 4, 9, 9) > 0.3, "is_causal": True},
    "scale": {"scale": 0.3, "is_causal": True},
    "power-of-two scale (applied to q first)": {"scale": 0.125, "attn_mask": BLOCK},
    "bias": {"score_bias": torch.randn(1, 4, 9, 9), "attn_mask": BLOCK},
    "softcap": {"softcap": 1.5, "is_causal": True},
    "sinks": {"sinks": torch.randn(4), "is_causal": True},
    "bias with more axes": {"score_bias": torch.randn(3, 2, 4, 9, 9)},
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_lean_call_equals_the_kept_one_bit_for_bit(name: str, kv_heads: int) -> None:
    q, k, v = _qkv(kv_heads=kv_heads)
    options = CASES[name]
    if name == "per-head mask":  # every row must see a key
        mask = options["attn_mask"]
        assert isinstance(mask, torch.Tensor)
        mask[..., 0] = True
    gqa = kv_heads != 4
    kept = attention_with_steps(q, k, v, enable_gqa=gqa, **options)  # type: ignore[arg-type]
    lean = attention_with_steps(q, k, v, enable_gqa=gqa, keep_steps=False, **options)  # type: ignore[arg-type]
    assert torch.equal(lean.attn_weights, kept.attn_weights)
    assert torch.equal(lean.context_vec, kept.context_vec)
    assert (lean.sink_weights is None) == (kept.sink_weights is None)
    if kept.sink_weights is not None:
        assert lean.sink_weights is not None
        assert torch.equal(lean.sink_weights, kept.sink_weights)
    assert lean.attn_scores.numel() == lean.scaled_scores.numel() == 0
    assert lean.masked_scores.numel() == 0
    assert lean.biased_scores is None and lean.capped_scores is None


def test_lean_call_refuses_what_the_kept_one_refuses() -> None:
    q, k, v = _qkv()
    none_seen = torch.zeros(9, 9, dtype=torch.bool)
    with pytest.raises(SpecError, match="at least one key"):
        attention_with_steps(q, k, v, attn_mask=none_seen, keep_steps=False)
    with pytest.raises(SpecError, match="softcap"):
        attention_with_steps(q, k, v, softcap=0.0, keep_steps=False)
