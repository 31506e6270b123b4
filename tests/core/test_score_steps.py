"""attention_with_steps' optional steps: an additive score bias, logit soft-capping and
attention sinks, each checked against the formula the families that need it use."""

from __future__ import annotations

import math

import pytest
import torch

from attention_core.attention import attention_with_steps
from attention_core.errors import SpecError


def _qkv(heads: int = 3, length: int = 5, width: int = 4) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return tuple(torch.randn(2, heads, length, width) * 2 for _ in range(3))


def test_absent_steps_are_none_and_change_nothing() -> None:
    q, k, v = _qkv()
    plain = attention_with_steps(q, k, v, is_causal=True)
    assert plain.biased_scores is None and plain.capped_scores is None
    assert plain.sinks is None and plain.sink_weights is None and plain.softcap is None
    zero_bias = attention_with_steps(q, k, v, is_causal=True, score_bias=torch.zeros(5, 5))
    assert torch.equal(zero_bias.attn_weights, plain.attn_weights)


def test_score_bias_is_added_after_scaling() -> None:
    """T5 / ALiBi: softmax(q k^T * scale + bias)."""
    q, k, v = _qkv()
    bias = torch.randn(1, 3, 5, 5)
    steps = attention_with_steps(q, k, v, score_bias=bias)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 2 + bias, dim=-1)
    torch.testing.assert_close(steps.biased_scores, steps.scaled_scores + bias)
    torch.testing.assert_close(steps.attn_weights, expected)
    torch.testing.assert_close(steps.context_vec, expected @ v)


def test_softcap_caps_then_masks() -> None:
    """Gemma 2: softcap * tanh(scaled / softcap), then the mask, then the softmax."""
    q, k, v = _qkv()
    steps = attention_with_steps(q, k, v, is_causal=True, softcap=1.5)
    scaled = q @ k.transpose(-2, -1) / 2
    capped = torch.tanh(scaled / 1.5) * 1.5
    assert steps.softcap == 1.5
    torch.testing.assert_close(steps.capped_scores, capped)
    assert float(steps.capped_scores.abs().max()) < 1.5 < float(scaled.abs().max())
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = torch.softmax(capped.masked_fill(~causal, -math.inf), dim=-1)
    torch.testing.assert_close(steps.attn_weights, expected)


def test_sinks_take_their_share_and_are_dropped() -> None:
    """gpt-oss: one logit per head joins each row's softmax, then leaves."""
    q, k, v = _qkv()
    sinks = torch.tensor([0.5, -1.0, 3.0])
    steps = attention_with_steps(q, k, v, is_causal=True, sinks=sinks)
    masked = steps.masked_scores
    column = sinks.view(1, 3, 1, 1).expand(2, 3, 5, 1)
    full = torch.softmax(torch.cat([masked, column], dim=-1), dim=-1)
    torch.testing.assert_close(steps.attn_weights, full[..., :-1])
    torch.testing.assert_close(steps.sink_weights, full[..., -1])
    torch.testing.assert_close(steps.attn_weights.sum(-1) + steps.sink_weights, torch.ones(2, 3, 5))
    # A bigger sink on head 2 takes more of its rows and leaves the other heads alone.
    raised = attention_with_steps(q, k, v, is_causal=True, sinks=sinks + torch.tensor([0, 0, 1.0]))
    assert raised.sink_weights is not None
    assert bool((raised.sink_weights[:, 2] > steps.sink_weights[:, 2]).all())
    torch.testing.assert_close(raised.sink_weights[:, :2], steps.sink_weights[:, :2])


def test_sinks_with_grouped_query_attention() -> None:
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
    steps = attention_with_steps(q, k, v, enable_gqa=True, sinks=torch.zeros(4))
    assert steps.attn_weights.shape == (1, 4, 3, 3)
    assert steps.sink_weights is not None and steps.sink_weights.shape == (1, 4, 3)


@pytest.mark.parametrize(
    ("options", "field"),
    [({"softcap": 0.0}, "softcap"), ({"sinks": torch.zeros(2)}, "sinks")],
)
def test_bad_extras_name_their_field(options: dict[str, object], field: str) -> None:
    q, k, v = _qkv()
    with pytest.raises(SpecError) as caught:
        attention_with_steps(q, k, v, **options)  # type: ignore[arg-type]
    assert caught.value.field == field
