"""attention_core: self-attention in plain PyTorch, with every step kept.

Pure PyTorch; it never imports the web app.
"""

from .attention import AttentionSteps, attention_with_steps, causal_mask, uniform_causal_weights
from .compare import Comparison, SharedToken, compare, cosine
from .embeddings import (
    TOY_VOCABULARY,
    EmbeddingSpec,
    ExplicitEmbedding,
    HashedEmbedding,
    SeededRandomEmbedding,
    VocabularyEmbedding,
    embed,
)
from .errors import LimitExceeded, SpecError
from .lessons import dot_product_variance, softmax_sharpness
from .multihead import AttentionTrace, Projections, causal_average, multi_head_attention
from .presets import PRESETS, Preset, get_preset
from .projections import (
    ExplicitProjection,
    IdentityProjection,
    ProjectionSpec,
    SeededLinearProjection,
    SeededRandProjection,
    make_projections,
)
from .spec import AttentionSpec, expand, materialize, run

__all__ = [
    "PRESETS",
    "TOY_VOCABULARY",
    "AttentionSpec",
    "AttentionSteps",
    "AttentionTrace",
    "Comparison",
    "EmbeddingSpec",
    "ExplicitEmbedding",
    "ExplicitProjection",
    "HashedEmbedding",
    "IdentityProjection",
    "LimitExceeded",
    "Preset",
    "ProjectionSpec",
    "Projections",
    "SeededLinearProjection",
    "SeededRandProjection",
    "SeededRandomEmbedding",
    "SharedToken",
    "SpecError",
    "VocabularyEmbedding",
    "attention_with_steps",
    "causal_average",
    "causal_mask",
    "compare",
    "cosine",
    "dot_product_variance",
    "embed",
    "expand",
    "get_preset",
    "make_projections",
    "materialize",
    "multi_head_attention",
    "run",
    "softmax_sharpness",
    "uniform_causal_weights",
]
