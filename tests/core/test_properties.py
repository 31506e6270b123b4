"""Properties that hold for any input: checked on random shapes and weights with hypothesis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import (
    PRESETS,
    AttentionSpec,
    ExplicitEmbedding,
    HashedEmbedding,
    Projections,
    SeededLinearProjection,
    SeededRandProjection,
    VocabularyEmbedding,
    attention_with_steps,
    causal_average,
    embed,
    expand,
    materialize,
    multi_head_attention,
    run,
    uniform_causal_weights,
)

BOUNDED = settings(max_examples=30, deadline=None, database=None)


@st.composite
def layers(draw, cross: bool | None = None, out: bool | None = None):
    """Random inputs and projections: (x, source or None, projections, num_heads)."""
    num_heads = draw(st.integers(1, 4))
    d_head = draw(st.integers(1, 4))
    d_v_head = draw(st.integers(1, 4))
    d_in = draw(st.integers(1, 6))
    num_queries = draw(st.integers(1, 6))
    is_cross = draw(st.booleans()) if cross is None else cross
    with_out = draw(st.booleans()) if out is None else out
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    x = torch.randn(num_queries, d_in, generator=g)
    source = torch.randn(draw(st.integers(1, 6)), d_in, generator=g) if is_cross else None
    w_out = torch.randn(num_heads * d_v_head, 5, generator=g) if with_out else None
    projections = Projections(
        W_query=torch.randn(d_in, num_heads * d_head, generator=g),
        W_key=torch.randn(d_in, num_heads * d_head, generator=g),
        W_value=torch.randn(d_in, num_heads * d_v_head, generator=g),
        W_out=w_out,
    )
    return x, source, projections, num_heads


@BOUNDED
@given(layers(), st.booleans())
def test_weights_rows_sum_to_one(layer, causal):
    x, source, projections, num_heads = layer
    trace = multi_head_attention(x, projections, num_heads, source=source, is_causal=causal)
    assert bool((trace.attn_weights >= 0).all())
    sums = trace.attn_weights.sum(dim=-1)
    torch.testing.assert_close(sums, torch.ones_like(sums))


@BOUNDED
@given(layers(cross=False, out=False))
def test_causal_mask_zeroes_the_future_and_first_token_sees_itself(layer):
    x, _, projections, num_heads = layer
    trace = multi_head_attention(x, projections, num_heads, is_causal=True)
    num_tokens = x.shape[0]
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(diagonal=1)
    assert bool((trace.attn_weights[:, future] == 0).all())  # exactly zero, per head
    assert bool(torch.isneginf(trace.masked_scores[:, future]).all())
    assert bool((trace.attn_weights[:, 0, 0] == 1).all())
    # Per head: the first token's context vector is its own value vector.
    torch.testing.assert_close(trace.context_vec[:, 0], trace.v[:, 0])


@BOUNDED
@given(layers(), st.booleans())
def test_multi_head_equals_concatenated_single_heads(layer, causal):
    x, source, projections, num_heads = layer
    trace = multi_head_attention(x, projections, num_heads, source=source, is_causal=causal)
    d_k = projections.W_query.shape[1] // num_heads
    d_v = projections.W_value.shape[1] // num_heads
    heads = []
    for h in range(num_heads):
        single = Projections(
            W_query=projections.W_query[:, h * d_k : (h + 1) * d_k],
            W_key=projections.W_key[:, h * d_k : (h + 1) * d_k],
            W_value=projections.W_value[:, h * d_v : (h + 1) * d_v],
        )
        one = multi_head_attention(x, single, 1, source=source, is_causal=causal)
        torch.testing.assert_close(trace.attn_weights[h], one.attn_weights[0])
        heads.append(one.output)
    concat = torch.cat(heads, dim=-1)
    torch.testing.assert_close(trace.concat, concat)
    expected = concat if projections.W_out is None else concat @ projections.W_out
    torch.testing.assert_close(trace.output, expected)


@BOUNDED
@given(layers(cross=False), st.randoms(use_true_random=False))
def test_without_mask_permuting_tokens_permutes_outputs(layer, rnd):
    x, _, projections, num_heads = layer
    perm = list(range(x.shape[0]))
    rnd.shuffle(perm)
    perm = torch.tensor(perm)
    base = multi_head_attention(x, projections, num_heads)
    shuffled = multi_head_attention(x[perm], projections, num_heads)
    torch.testing.assert_close(shuffled.output, base.output[perm])
    torch.testing.assert_close(shuffled.attn_weights, base.attn_weights[:, perm][:, :, perm])


@BOUNDED
@given(layers(cross=True), st.randoms(use_true_random=False))
def test_cross_attention_ignores_source_order(layer, rnd):
    x, source, projections, num_heads = layer
    perm = list(range(source.shape[0]))
    rnd.shuffle(perm)
    perm = torch.tensor(perm)
    base = multi_head_attention(x, projections, num_heads, source=source)
    shuffled = multi_head_attention(x, projections, num_heads, source=source[perm])
    torch.testing.assert_close(shuffled.output, base.output)
    torch.testing.assert_close(shuffled.attn_weights, base.attn_weights[..., perm])


def test_causal_mask_changes_something():
    """Guard for the properties above: masking is not a no-op."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=g)
    projections = Projections(*(torch.randn(3, 3, generator=g) for _ in range(3)))
    masked = multi_head_attention(x, projections, is_causal=True)
    plain = multi_head_attention(x, projections)
    assert not torch.allclose(masked.output, plain.output)
    torch.testing.assert_close(masked.output[-1], plain.output[-1])  # last row sees everything


@pytest.mark.parametrize("num_tokens", [1, 2, 3, 5, 8, 13])
def test_tril_averaging_equals_softmax_over_masked_zeros(num_tokens):
    tril = torch.tril(torch.ones(num_tokens, num_tokens))
    masked = torch.zeros(num_tokens, num_tokens).masked_fill(tril == 0, float("-inf"))
    expected = torch.softmax(masked, dim=-1)
    torch.testing.assert_close(uniform_causal_weights(num_tokens), expected)
    # The core's one softmax, given zero scores and a causal mask, agrees too.
    zeros = torch.zeros(num_tokens, 1)
    steps = attention_with_steps(zeros, zeros, torch.eye(num_tokens), is_causal=True)
    torch.testing.assert_close(steps.attn_weights, expected)


@BOUNDED
@given(st.integers(1, 8), st.integers(1, 4), st.integers(0, 1000))
def test_causal_average_is_a_running_mean(num_tokens, dim, seed):
    x = torch.randn(num_tokens, dim, generator=torch.Generator().manual_seed(seed))
    trace = causal_average(x)
    means = torch.cumsum(x, dim=0) / torch.arange(1, num_tokens + 1)[:, None]
    torch.testing.assert_close(trace.output, means)
    torch.testing.assert_close(torch.softmax(trace.masked_scores, dim=-1), trace.attn_weights)


TRACE_FIELDS = (
    "x",
    "source",
    "q",
    "k",
    "v",
    "attn_scores",
    "attn_weights",
    "context_vec",
    "output",
)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_expand_runs_to_the_same_trace(name):
    spec = PRESETS[name].spec
    expanded = expand(spec)
    assert isinstance(expanded.embedding, ExplicitEmbedding)
    assert len(expanded.embedding.vectors) == len(spec.tokens)
    original, again = run(spec), run(expanded)
    for field in TRACE_FIELDS:
        torch.testing.assert_close(getattr(again, field), getattr(original, field), atol=0, rtol=0)
    assert (again.scale, again.causal, again.cross) == (
        original.scale,
        original.causal,
        original.cross,
    )


HASHED = HashedEmbedding(dim=8, seed=0)


def test_hashed_embedding_same_word_same_vector_across_sentences():
    a = embed(["the", "river", "bank"], HASHED)
    b = embed(["bank", "loan", "the", "money"], HASHED)
    torch.testing.assert_close(a[2], b[0], atol=0, rtol=0)
    torch.testing.assert_close(a[0], b[2], atol=0, rtol=0)
    torch.testing.assert_close(embed(["bank"], HASHED), embed(["bank"], HASHED), atol=0, rtol=0)


def test_hashed_embedding_differs_by_word_and_seed():
    vectors = embed(["bank", "river", "loan", "Bank", "bank "], HASHED)
    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            assert not torch.allclose(vectors[i], vectors[j])
    other_seed = embed(["bank"], HashedEmbedding(dim=8, seed=1))
    assert not torch.allclose(other_seed[0], vectors[0])
    assert embed(["bank"], HashedEmbedding(dim=3, seed=0)).shape == (1, 3)


def test_hashed_embedding_is_stable_across_processes():
    """A fresh interpreter (with its own str-hash salt) computes the very same vectors."""
    code = (
        "import json; from attention_core import embed, HashedEmbedding; "
        "print(json.dumps(embed(['bank', 'mud'], HashedEmbedding(dim=8, seed=0)).tolist()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    fresh = torch.tensor(json.loads(done.stdout.strip().splitlines()[-1]))
    torch.testing.assert_close(fresh, embed(["bank", "mud"], HASHED), atol=0, rtol=0)


SEEDED = [name for name in sorted(PRESETS) if name not in ("bank-raw", "cross-attention")]


@pytest.mark.parametrize("name", SEEDED)
def test_seeded_runs_leave_the_global_rng_alone(name):
    torch.manual_seed(2024)
    torch.rand(3)  # move the stream somewhere non-trivial
    state = torch.get_rng_state()
    run(PRESETS[name].spec)
    expand(PRESETS[name].spec)
    torch.testing.assert_close(torch.get_rng_state(), state, atol=0, rtol=0)
    # ...and the next draw is the one the caller would have got anyway.
    expected = torch.rand(4, generator=torch.Generator().set_state(state))
    torch.testing.assert_close(torch.rand(4), expected, atol=0, rtol=0)


def test_seeded_runs_ignore_the_callers_rng_state():
    spec = PRESETS["gpt-head-2d"].spec
    torch.manual_seed(1)
    first = run(spec).output
    torch.manual_seed(99)
    torch.randn(10)
    torch.testing.assert_close(run(spec).output, first, atol=0, rtol=0)


def test_explicit_spec_round_trip():
    spec = AttentionSpec(tokens=("a", "b"), embedding=ExplicitEmbedding(((1.0, 0.0), (0.0, 1.0))))
    trace = run(spec)
    torch.testing.assert_close(trace.x, torch.eye(2))


@pytest.mark.parametrize("kind", [SeededRandProjection, SeededLinearProjection])
def test_seeded_cross_attention_sizes_key_and_value_by_the_source(kind):
    spec = AttentionSpec(
        tokens=("bank", "loan"),
        embedding=VocabularyEmbedding(),
        projection=kind(d_out=4, seed=5),
        source_tokens=("a", "b", "c"),
        source_embedding=HashedEmbedding(dim=6),
    )
    projections = materialize(spec).projections
    assert projections.W_query.shape == (4, 4)
    assert projections.W_key.shape == projections.W_value.shape == (6, 4)
    trace = run(spec)
    assert trace.attn_weights.shape == (1, 2, 3)
    for field in TRACE_FIELDS:
        torch.testing.assert_close(getattr(run(expand(spec)), field), getattr(trace, field))
