"""The seed tutorials as presets: each one a named, described AttentionSpec.

Every reproducible computation in ``shared/REFERENCE.md`` has a preset whose
trace gives the printed numbers; ``compare_tokens`` names the second sentence
for presets that are about comparing two contexts.
"""

from __future__ import annotations

from dataclasses import dataclass

from .embeddings import (
    ExplicitEmbedding,
    HashedEmbedding,
    SeededRandomEmbedding,
    VocabularyEmbedding,
)
from .errors import SpecError
from .projections import (
    ExplicitProjection,
    IdentityProjection,
    Role,
    SeededLinearProjection,
    SeededRandProjection,
)
from .spec import AttentionSpec

RIVER = ("stream", "bank", "mud")
FINANCE = ("money", "bank", "loan")

# Seed 004's hand-set projections: queries and keys in 2-d, values in 3-d.
HAND_SET = ExplicitProjection(
    W_query=((1.0, 0.0), (0.0, 1.0), (0.2, 0.2), (0.0, 0.0)),
    W_key=((1.0, 0.0), (0.0, 1.0), (0.0, 0.0), (0.1, 0.1)),
    W_value=((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, 0.5)),
)

# Seed 001's sentence and its 8-d input vectors.
NEXT_DAY = ("The", "next", "day", "is", "bright")
NEXT_DAY_VECTORS = (
    (0.43, 0.15, 0.89, 0.17, 0.23, 0.19, 0.38, 0.44),
    (0.55, 0.87, 0.66, 0.51, 0.49, 0.3, 0.2, 0.1),
    (0.57, 0.85, 0.64, 0.8, 0.1, 0.4, 0.21, 0.39),
    (0.22, 0.58, 0.33, 0.4, 0.4, 0.4, 0.1, 0.3),
    (0.77, 0.25, 0.10, 0.1, 0.9, 0.3, 0.3, 0.2),
)

# Seeds 000/003 have no words, only 8 time steps.
EIGHT_STEPS = tuple(f"t{i}" for i in range(1, 9))
# nanoGPT's order: key, query (scores computed), then value.
KEY_QUERY_VALUE: tuple[Role, ...] = ("key", "query", "value")


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    description: str
    source: str
    spec: AttentionSpec
    compare_tokens: tuple[str, ...] | None = None


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="bank-raw",
            title='"bank" by plain dot products',
            description=(
                "No projections and no scaling: each word's new vector is a softmax-weighted "
                "average of the raw embeddings, so bank drifts toward its neighbours."
            ),
            source="seed 004",
            spec=AttentionSpec(tokens=RIVER, embedding=VocabularyEmbedding(), scale="none"),
            compare_tokens=FINANCE,
        ),
        Preset(
            name="bank-hand-set",
            title='"bank" with hand-set W_query, W_key, W_value',
            description=(
                "Small hand-written projections separate what a word looks for, what it "
                "offers for matching and what it passes on; scores are divided by sqrt(2)."
            ),
            source="seed 004",
            spec=AttentionSpec(tokens=RIVER, embedding=VocabularyEmbedding(), projection=HAND_SET),
            compare_tokens=FINANCE,
        ),
        Preset(
            name="bank-seeded-rand",
            title='"bank" with random trainable weights',
            description=(
                "The three matrices are torch.rand(4, 3) after torch.manual_seed(0), the "
                "starting point of training; scores are divided by sqrt(3)."
            ),
            source="seed 004",
            spec=AttentionSpec(
                tokens=RIVER,
                embedding=VocabularyEmbedding(),
                projection=SeededRandProjection(d_out=3, seed=0),
            ),
            compare_tokens=FINANCE,
        ),
        Preset(
            name="next-day-rand",
            title="The next day is bright: torch.rand weights",
            description=(
                "Eight-dimensional inputs projected to four dimensions by torch.rand matrices "
                "(seed 123); the weights are softmax(scores / 2)."
            ),
            source="seed 001",
            spec=AttentionSpec(
                tokens=NEXT_DAY,
                embedding=ExplicitEmbedding(NEXT_DAY_VECTORS),
                projection=SeededRandProjection(d_out=4, seed=123),
            ),
        ),
        Preset(
            name="next-day-linear",
            title="The next day is bright: nn.Linear weights",
            description=(
                "The same sentence with nn.Linear's default initialization (seed 789): "
                "smaller weights, so the attention is nearly uniform."
            ),
            source="seed 001",
            spec=AttentionSpec(
                tokens=NEXT_DAY,
                embedding=ExplicitEmbedding(NEXT_DAY_VECTORS),
                projection=SeededLinearProjection(d_out=4, seed=789),
            ),
        ),
        Preset(
            name="causal-average",
            title="Averaging the past with tril",
            description=(
                "Each step takes the plain mean of itself and the steps before it: a "
                "normalized lower-triangular matrix, the same as a softmax over masked zeros."
            ),
            source="seeds 000 and 003",
            spec=AttentionSpec(
                tokens=EIGHT_STEPS,
                embedding=SeededRandomEmbedding(dim=2, seed=1337, batch=4),
                mode="causal_average",
                causal=True,
            ),
        ),
        Preset(
            name="gpt-head-2d",
            title="One causal head on 2-d inputs",
            description=(
                "A nanoGPT decoder head: 16-wide key, query and value layers over random "
                "2-d inputs, scaled by 16^-0.5 and masked so no step sees the future."
            ),
            source="seed 000",
            spec=AttentionSpec(
                tokens=EIGHT_STEPS,
                embedding=SeededRandomEmbedding(dim=2, seed=1337, batch=4),
                projection=SeededLinearProjection(d_out=16, seed=None, order=KEY_QUERY_VALUE),
                causal=True,
            ),
        ),
        Preset(
            name="gpt-head-32d",
            title="One causal head on 32-d inputs, unscaled",
            description=(
                "The learned version of causal averaging: a masked head over random 32-d "
                "inputs, with the scores left unscaled as in the tutorial."
            ),
            source="seed 003",
            spec=AttentionSpec(
                tokens=EIGHT_STEPS,
                embedding=SeededRandomEmbedding(dim=32, seed=1337, batch=4),
                projection=SeededLinearProjection(d_out=16, seed=None, order=KEY_QUERY_VALUE),
                causal=True,
                scale="none",
            ),
        ),
        Preset(
            name="multi-head",
            title="Four heads on one sentence",
            description=(
                "Four heads of width 4 each look at the sentence in their own way; their "
                "context vectors are joined side by side into one 16-wide output."
            ),
            source="seed 002",
            spec=AttentionSpec(
                tokens=("the", "river", "bank", "was", "muddy", "after", "the", "rain"),
                embedding=HashedEmbedding(dim=16, seed=0),
                projection=SeededLinearProjection(d_out=16, seed=2),
                num_heads=4,
                causal=True,
            ),
        ),
        Preset(
            name="cross-attention",
            title="Cross-attention: a question reads a sentence",
            description=(
                "Queries come from one sequence and keys and values from another, so the "
                "weights matrix is rectangular: one row per query, one column per source token."
            ),
            source="seeds 000 and 003 (notes)",
            spec=AttentionSpec(
                tokens=("bank", "loan"),
                embedding=VocabularyEmbedding(),
                projection=IdentityProjection(),
                source_tokens=("stream", "bank", "mud", "money"),
            ),
        ),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise SpecError(
            f"unknown preset {name!r}; the presets are {sorted(PRESETS)}", field="preset"
        ) from None
