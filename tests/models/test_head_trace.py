"""Every real head step by step: the trace is the attention the model computed, and the
steps recompute with the core's ``attention_with_steps``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attention_core import attention_with_steps
from attention_core.errors import SpecError
from attention_core.models import Decoder, Encoder, LayerTrace, ModelRegistry, head_trace
from tests.models.conftest import DECODERS

TEXT = "The bank approved the loan because it was sound."
STEPS = ("attn_scores", "scaled_scores", "masked_scores", "attn_weights", "context_vec")


@pytest.fixture(scope="module")
def registry(checkpoints: Path) -> ModelRegistry:
    return ModelRegistry(builtin_dir=None, env_paths=[checkpoints], max_loaded=8)


def assert_steps_recompute(trace: object, causal: bool) -> None:
    again = attention_with_steps(
        trace.q,  # type: ignore[attr-defined]
        trace.k,  # type: ignore[attr-defined]
        trace.v,  # type: ignore[attr-defined]
        is_causal=causal,
        scale=trace.scale,  # type: ignore[attr-defined]
    )
    for step in STEPS:
        torch.testing.assert_close(getattr(again, step), getattr(trace, step), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", DECODERS)
def test_decoder_heads_are_the_attention_the_model_computed(
    registry: ModelRegistry, name: str
) -> None:
    decoder = registry.load(name)
    assert isinstance(decoder, Decoder)
    maps = decoder.encode(TEXT)
    c = decoder.config
    group = c.num_heads // c.num_kv_heads
    for layer in range(c.num_layers):
        tokenized, layer_trace = decoder.trace(TEXT, layer)
        assert tokenized.tokens == maps.tokens
        for head in range(c.num_heads):
            trace = head_trace(layer_trace, head, causal=True)
            assert (trace.layer, trace.head, trace.kv_head) == (layer, head, head // group)
            torch.testing.assert_close(trace.attn_weights, maps.layer_attentions[layer][head])
            assert trace.causal and trace.masked_scores[0, 1] == float("-inf")
            assert_steps_recompute(trace, causal=True)


def test_gpt2_head_inputs_are_the_normed_states_and_projections(registry: ModelRegistry) -> None:
    """x is ln_1 of the layer's input; q and k are that head's columns of c_attn(x)."""
    decoder = registry.load("tiny-gpt2")
    assert isinstance(decoder, Decoder)
    maps = decoder.encode(TEXT)
    c = decoder.config
    for layer in range(c.num_layers):
        _, layer_trace = decoder.trace(TEXT, layer)
        block = decoder.model.transformer.h[layer]  # type: ignore[attr-defined]
        with torch.inference_mode():
            x = block.ln_1(maps.layer_hidden_states[layer])  # the attention's input (T, C)
            qkv = block.attn.c_attn(x)  # (T, 3C)
        for head in range(c.num_heads):
            trace = head_trace(layer_trace, head, causal=True)
            torch.testing.assert_close(trace.x, x)
            cols = slice(head * c.head_dim, (head + 1) * c.head_dim)
            torch.testing.assert_close(trace.q, qkv[:, : c.hidden_size][:, cols])
            torch.testing.assert_close(trace.k, qkv[:, c.hidden_size : 2 * c.hidden_size][:, cols])
            assert trace.q_unrotated is None and trace.k_unrotated is None  # no RoPE in GPT-2


def test_encoder_heads_are_the_attention_the_model_computed(encoder: Encoder) -> None:
    out = encoder.encode(TEXT)
    for layer in (0, 3, 5):
        tokenized, layer_trace = encoder.trace(TEXT, layer)
        assert tokenized.tokens == out.tokens
        for head in (0, 7, 11):
            trace = head_trace(layer_trace, head, causal=False)
            torch.testing.assert_close(trace.attn_weights, out.layer_attentions[layer][head])
            torch.testing.assert_close(trace.x, out.layer_hidden_states[layer])  # post-norm
            assert not trace.causal and trace.scale == pytest.approx(32**-0.5)
            assert_steps_recompute(trace, causal=False)


def test_grouped_query_heads_read_their_own_kv_head() -> None:
    """4 query heads on 2 kv heads: heads 0-1 read kv head 0, heads 2-3 kv head 1."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 5, 3, generator=generator)
    k = torch.randn(1, 2, 5, 3, generator=generator)
    v = torch.randn(1, 2, 5, 3, generator=generator)
    rotation = torch.randn(1, 4, 5, 3, generator=generator)
    steps = attention_with_steps(q, k, v, is_causal=True, enable_gqa=True)
    layer = LayerTrace(
        layer=0,
        x=torch.randn(1, 5, 12, generator=generator),
        q=q,
        k=k,
        v=v,
        steps=steps,
        q_unrotated=q + rotation,
        k_unrotated=k - 1,
    )
    for head, kv_head in ((0, 0), (1, 0), (2, 1), (3, 1)):
        trace = head_trace(layer, head, causal=True)
        assert trace.kv_head == kv_head
        assert torch.equal(trace.k, k[0, kv_head]) and torch.equal(trace.v, v[0, kv_head])
        assert torch.equal(trace.attn_weights, steps.attn_weights[0, head])
        assert torch.equal(trace.q_unrotated, (q + rotation)[0, head])  # type: ignore[arg-type]
        assert torch.equal(trace.k_unrotated, (k - 1)[0, kv_head])  # type: ignore[arg-type]
        assert_steps_recompute(trace, causal=True)


def test_bad_layer_and_head_name_the_range(registry: ModelRegistry, encoder: Encoder) -> None:
    decoder = registry.load("tiny-gpt2")
    with pytest.raises(SpecError, match="layer 3 does not exist; this model has layers 1 to 2"):
        decoder.trace(TEXT, 2)
    _, layer = decoder.trace(TEXT, 0)
    with pytest.raises(SpecError, match="head 5 does not exist; this layer has heads 1 to 4"):
        head_trace(layer, 4, causal=True)
    with pytest.raises(SpecError, match="layers 1 to 6") as error:
        encoder.trace(TEXT, 6)
    assert error.value.field == "layer"
