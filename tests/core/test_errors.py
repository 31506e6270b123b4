"""Every bad spec raises SpecError naming the field and the problem."""

from __future__ import annotations

import math

import pytest
import torch

from attention_core import (
    TOY_VOCABULARY,
    AttentionSpec,
    ExplicitEmbedding,
    ExplicitProjection,
    HashedEmbedding,
    Projections,
    SeededLinearProjection,
    SeededRandomEmbedding,
    SeededRandProjection,
    SpecError,
    VocabularyEmbedding,
    attention_with_steps,
    dot_product_variance,
    get_preset,
    multi_head_attention,
    run,
    softmax_sharpness,
)

VOCAB = VocabularyEmbedding()
TWO = ExplicitEmbedding(((1.0, 0.0), (0.0, 1.0)))
EYE2 = ((1.0, 0.0), (0.0, 1.0))


def _spec(**changes) -> AttentionSpec:
    base = {"tokens": ("a", "b"), "embedding": TWO}
    return AttentionSpec(**{**base, **changes})


def _proj(**changes) -> ExplicitProjection:
    return ExplicitProjection(**{"W_query": EYE2, "W_key": EYE2, "W_value": EYE2, **changes})


NAN, INF = float("nan"), float("inf")

BAD_SPECS = {
    "empty tokens": (AttentionSpec(tokens=(), embedding=VOCAB), "tokens", "empty"),
    "empty source tokens": (
        AttentionSpec(tokens=("bank",), embedding=VOCAB, source_tokens=()),
        "source_tokens",
        "empty",
    ),
    "ragged vectors": (
        _spec(embedding=ExplicitEmbedding(((1.0, 2.0), (3.0,)))),
        "embedding.vectors",
        "ragged",
    ),
    "zero-length vectors": (
        _spec(embedding=ExplicitEmbedding(((), ()))),
        "embedding.vectors",
        "length 0",
    ),
    "too many vectors": (
        _spec(embedding=ExplicitEmbedding(((1.0,), (2.0,), (3.0,)))),
        "embedding.vectors",
        "3 vectors given for 2 tokens",
    ),
    "too few vectors": (
        _spec(embedding=ExplicitEmbedding(((1.0,),))),
        "embedding.vectors",
        "1 vectors given for 2 tokens",
    ),
    "NaN in vectors": (
        _spec(embedding=ExplicitEmbedding(((1.0, NAN), (0.0, 1.0)))),
        "embedding.vectors",
        "NaN or infinite",
    ),
    "Inf in vectors": (
        _spec(embedding=ExplicitEmbedding(((1.0, 0.0), (-INF, 1.0)))),
        "embedding.vectors",
        "NaN or infinite",
    ),
    "NaN in a vocabulary word": (
        AttentionSpec(tokens=("x",), embedding=VocabularyEmbedding({"x": (NAN, 0.0, 0.0, 0.0)})),
        "embedding.extra",
        "NaN or infinite",
    ),
    "vocabulary word of the wrong length": (
        AttentionSpec(tokens=("x",), embedding=VocabularyEmbedding({"x": (1.0, 2.0)})),
        "embedding.extra",
        "same length",
    ),
    "NaN in W_query": (
        _spec(projection=_proj(W_query=((NAN, 0.0), (0.0, 1.0)))),
        "projection.W_query",
        "NaN or infinite",
    ),
    "Inf in W_value": (
        _spec(projection=_proj(W_value=((1.0, 0.0), (0.0, INF)))),
        "projection.W_value",
        "NaN or infinite",
    ),
    "Inf in W_out": (
        _spec(projection=_proj(W_out=((INF, 0.0), (0.0, 1.0)))),
        "projection.W_out",
        "NaN or infinite",
    ),
    "ragged W_key": (
        _spec(projection=_proj(W_key=((1.0, 0.0), (1.0,)))),
        "projection.W_key",
        "ragged",
    ),
    "empty W_value": (_spec(projection=_proj(W_value=())), "projection.W_value", "empty"),
    "heads not dividing the width": (
        AttentionSpec(tokens=("bank", "mud"), embedding=VOCAB, num_heads=3),
        "num_heads",
        "width (4) is not a multiple of the number of heads (3)",
    ),
    "heads not dividing the value width": (
        _spec(projection=_proj(W_value=((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))), num_heads=2),
        "num_heads",
        "value width (3)",
    ),
    "zero heads": (_spec(num_heads=0), "num_heads", "at least 1, got 0"),
    "negative heads": (_spec(num_heads=-2), "num_heads", "at least 1, got -2"),
    "scale foo": (_spec(scale="foo"), "scale", "'foo'"),
    "scale -1": (_spec(scale=-1), "scale", "positive finite number, got -1"),
    "scale 0": (_spec(scale=0.0), "scale", "positive finite number"),
    "scale nan": (_spec(scale=NAN), "scale", "positive finite number, got nan"),
    "scale inf": (_spec(scale=INF), "scale", "positive finite number"),
    "scale True": (_spec(scale=True), "scale", "'sqrt_dk', 'none' or a number"),
    "order with a repeat": (
        _spec(projection=SeededRandProjection(d_out=2, order=("query", "key", "key"))),
        "projection.order",
        "['query', 'key', 'key']",
    ),
    "order missing value": (
        _spec(projection=SeededLinearProjection(d_out=2, order=("query", "key"))),
        "projection.order",
        "query, key and value once each",
    ),
    "order with an unknown role": (
        _spec(projection=SeededRandProjection(d_out=2, order=("query", "key", "values"))),
        "projection.order",
        "'values'",
    ),
    "d_out zero": (
        _spec(projection=SeededRandProjection(d_out=0)),
        "projection.d_out",
        "at least 1, got 0",
    ),
    "causal_average with source_tokens": (
        AttentionSpec(
            tokens=("bank",), embedding=VOCAB, source_tokens=("mud",), mode="causal_average"
        ),
        "source_tokens",
        "self-attention only",
    ),
    "causal_average with a W_value of the wrong height": (
        _spec(mode="causal_average", projection=_proj(W_value=((1.0,), (1.0,), (1.0,)))),
        "projection.W_value",
        "W_value has 3 rows but its input has width 2",
    ),
    "unknown mode": (_spec(mode="bogus"), "mode", "'bogus'"),
    "seeded embedding dim 0": (
        _spec(embedding=SeededRandomEmbedding(dim=0)),
        "embedding.dim",
        "at least 1, got 0",
    ),
    "batch_index out of range": (
        _spec(embedding=SeededRandomEmbedding(dim=2, batch=2, batch_index=2)),
        "embedding.batch_index",
        "batch_index (2)",
    ),
    "hashed dim 0": (_spec(embedding=HashedEmbedding(dim=0)), "embedding.dim", "at least 1"),
    "identity cross-attention with unequal widths": (
        AttentionSpec(
            tokens=("bank",),
            embedding=VOCAB,
            source_tokens=("a", "b"),
            source_embedding=TWO,
        ),
        "source_embedding",
        "width 2 but token vectors have width 4",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_bad_spec_raises_spec_error(case):
    spec, field, fragment = BAD_SPECS[case]
    with pytest.raises(SpecError) as info:
        run(spec)
    assert info.value.field == field
    assert fragment in str(info.value)
    assert info.value.message == str(info.value)


# Row-count and width errors come from the tensor layer; the field ends with the matrix name.
WRONG_SHAPES = {
    "W_query with 3 rows": (_proj(W_query=((1.0,), (1.0,), (1.0,))), "W_query", "has 3 rows"),
    "W_key with 1 row": (_proj(W_key=((1.0, 0.0),)), "W_key", "has 1 rows"),
    "W_value with 3 rows": (_proj(W_value=((1.0,), (1.0,), (1.0,))), "W_value", "has 3 rows"),
    "W_out with 3 rows": (_proj(W_out=((1.0,), (1.0,), (1.0,))), "W_out", "has 3 rows"),
    "W_query/W_key width mismatch": (
        _proj(W_key=((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))),
        "W_key",
        "same number of columns, got 2 and 3",
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_SHAPES))
def test_wrong_matrix_shapes(case):
    projection, name, fragment = WRONG_SHAPES[case]
    with pytest.raises(SpecError) as info:
        run(_spec(projection=projection))
    assert info.value.field is not None and info.value.field.endswith(name)
    assert fragment in str(info.value)


def test_unknown_word_names_the_word_and_the_vocabulary():
    with pytest.raises(SpecError) as info:
        run(AttentionSpec(tokens=("river", "bank", "river"), embedding=VOCAB))
    message = str(info.value)
    assert info.value.field == "tokens"
    assert "'river'" in message and message.count("'river'") == 1
    for word in TOY_VOCABULARY:
        assert repr(word) in message
    assert "'bank'" in message.split("vocabulary has")[1]


def test_unknown_source_word_points_at_source_tokens():
    spec = AttentionSpec(tokens=("bank",), embedding=VOCAB, source_tokens=("bank", "fish"))
    with pytest.raises(SpecError, match="'fish'") as info:
        run(spec)
    assert info.value.field == "source_tokens"


def test_extra_vocabulary_words_are_listed_and_usable():
    embedding = VocabularyEmbedding({"river": (1.0, 0.0, 0.0, 0.0)})
    assert run(AttentionSpec(tokens=("river", "bank"), embedding=embedding)).x.shape == (2, 4)
    with pytest.raises(SpecError, match="'river'"):
        run(AttentionSpec(tokens=("lake",), embedding=embedding))


def test_unknown_preset_lists_the_presets():
    with pytest.raises(SpecError) as info:
        get_preset("bank-nope")
    assert info.value.field == "preset"
    assert "'bank-nope'" in str(info.value)
    assert "bank-raw" in str(info.value) and "gpt-head-2d" in str(info.value)


def test_tensor_level_errors():
    x = torch.randn(3, 2)
    eye = torch.eye(2)
    with pytest.raises(SpecError, match="at least 1") as info:
        multi_head_attention(x, Projections(eye, eye, eye), num_heads=0)
    assert info.value.field == "num_heads"
    with pytest.raises(SpecError, match="boolean") as info:
        attention_with_steps(x, x, x, attn_mask=torch.ones(3, 3))
    assert info.value.field == "attn_mask"
    nobody = torch.ones(3, 3, dtype=torch.bool)
    nobody[1] = False
    with pytest.raises(SpecError, match="at least one key"):
        attention_with_steps(x, x, x, attn_mask=nobody)
    with pytest.raises(SpecError, match="query width"):
        attention_with_steps(x, torch.randn(3, 4), x)
    with pytest.raises(SpecError, match="same length"):
        attention_with_steps(x, x, torch.randn(4, 2))
    with pytest.raises(SpecError, match="must be a matrix") as info:
        multi_head_attention(x, Projections(torch.ones(2), eye, eye))
    assert info.value.field == "projection.W_query"


def test_lesson_errors():
    with pytest.raises(SpecError, match="trials") as info:
        dot_product_variance([4], trials=1)
    assert info.value.field == "trials"
    with pytest.raises(SpecError, match="at least 1, got 0"):
        dot_product_variance([0])
    with pytest.raises(SpecError, match="empty"):
        softmax_sharpness([], [1.0])
    with pytest.raises(SpecError, match="NaN"):
        softmax_sharpness([0.1, math.nan], [1.0])
    for scale in (-1.0, math.inf):
        with pytest.raises(SpecError, match="finite and non-negative") as info:
            softmax_sharpness([0.1, 0.2], [scale])
        assert info.value.field == "scales"
