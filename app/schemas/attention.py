"""Request and response bodies of the toy attention API.

Structure is validated here; size limits (which are settings) are checked in
``app.limits`` so they can change without changing the schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictBool
from pydantic.dataclasses import dataclass as pydantic_dataclass

from attention_core.compare import SharedToken
from attention_core.lessons import SharpnessRow, VarianceRow

from ..steps import StepName
from .json_int import JsonInt
from .tensors import FloatArray, documented_as

# Bounded so that no product inside a 256-wide layer can overflow float32.
MAX_ABS_VALUE = 1e6
Number = Annotated[
    float, Field(strict=True, allow_inf_nan=False, ge=-MAX_ABS_VALUE, le=MAX_ABS_VALUE)
]
Vector = list[Number]
Matrix = list[Vector]
NullableMatrix = list[list[float | None]]
Token = Annotated[str, Field(min_length=1)]
# At least one token: the core refuses an empty list with a SpecError naming the field;
# the schema says so too (minItems), without replacing that message by pydantic's.
Tokens = Annotated[list[Token], Field(json_schema_extra={"minItems": 1})]
# The largest seed, 2**63 - 1024: the largest integer ≤ 2**63 - 1 that a double holds
# exactly. With 2**63 - 1 itself, a schema validator that reads numbers as doubles
# (most do) would accept 2**63 + 191, which rounds to the same double, and the
# server would refuse it.
MAX_SEED = 2**63 - 1024


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VocabularyEmbeddingIn(Strict):
    """Seed 004's toy vocabulary; ``extra`` adds words or overrides their vectors."""

    kind: Literal["vocabulary"] = "vocabulary"
    extra: dict[Token, Vector] = Field(default_factory=dict)


class ExplicitEmbeddingIn(Strict):
    """One vector per token, in order."""

    kind: Literal["explicit"] = "explicit"
    vectors: Matrix


class SeededRandomEmbeddingIn(Strict):
    """``torch.manual_seed(seed); torch.randn(batch, T, dim)[batch_index]`` (seeds 000/003)."""

    kind: Literal["seeded_random"] = "seeded_random"
    dim: JsonInt = Field(ge=1)
    seed: JsonInt = Field(1337, ge=0, le=MAX_SEED)
    batch: JsonInt = Field(1, ge=1, le=16)
    batch_index: JsonInt = Field(0, ge=0)


class HashedEmbeddingIn(Strict):
    """A fixed random vector per distinct word: the same word, the same vector, everywhere."""

    kind: Literal["hashed"] = "hashed"
    dim: JsonInt = Field(8, ge=1)
    seed: JsonInt = Field(0, ge=0, le=MAX_SEED)


EmbeddingIn = Annotated[
    VocabularyEmbeddingIn | ExplicitEmbeddingIn | SeededRandomEmbeddingIn | HashedEmbeddingIn,
    Field(discriminator="kind"),
]

Role = Literal["query", "key", "value"]


def _all_roles() -> list[Role]:
    return ["query", "key", "value"]


class IdentityProjectionIn(Strict):
    """No projection: queries, keys and values are the embeddings themselves."""

    kind: Literal["identity"] = "identity"


class ExplicitProjectionIn(Strict):
    """Matrices applied as ``x @ W``.

    Shapes: W_query, W_key (d_in, d_k); W_value (d_in, d_v); W_out (H*d_v, d_out), optional.
    """

    kind: Literal["explicit"] = "explicit"
    W_query: Matrix
    W_key: Matrix
    W_value: Matrix
    W_out: Matrix | None = None


class SeededRandProjectionIn(Strict):
    """``torch.manual_seed(seed)`` then ``torch.rand(d_in, d_out)`` per role, in ``order``.

    ``seed: null`` continues the random stream after a seeded_random embedding.
    """

    kind: Literal["seeded_rand"] = "seeded_rand"
    d_out: JsonInt = Field(ge=1)
    seed: JsonInt | None = Field(123, ge=0, le=MAX_SEED)
    order: list[Role] = Field(default_factory=_all_roles)


class SeededLinearProjectionIn(Strict):
    """``torch.manual_seed(seed)`` then ``nn.Linear(d_in, d_out, bias=False)`` per role."""

    kind: Literal["seeded_linear"] = "seeded_linear"
    d_out: JsonInt = Field(ge=1)
    seed: JsonInt | None = Field(789, ge=0, le=MAX_SEED)
    order: list[Role] = Field(default_factory=_all_roles)


ProjectionIn = Annotated[
    IdentityProjectionIn | ExplicitProjectionIn | SeededRandProjectionIn | SeededLinearProjectionIn,
    Field(discriminator="kind"),
]

ScaleIn = (
    Literal["sqrt_dk", "none"]
    | Annotated[float, Field(gt=0, le=MAX_ABS_VALUE, allow_inf_nan=False)]
)


class AttentionOptions(Strict):
    """Everything about a computation except its tokens."""

    embedding: EmbeddingIn = Field(default_factory=VocabularyEmbeddingIn)
    projection: ProjectionIn = Field(default_factory=IdentityProjectionIn)
    num_heads: JsonInt = Field(1, ge=1)
    causal: StrictBool = False
    scale: ScaleIn = Field(
        "sqrt_dk",
        description="'sqrt_dk': divide scores by sqrt(d_k); 'none': leave them; a number: multiply",
    )
    mode: Literal["attention", "causal_average"] = "attention"
    steps: list[StepName] | None = Field(None, description="return only these steps (default: all)")


class AttentionRequest(AttentionOptions):
    tokens: Tokens
    source_tokens: Tokens | None = Field(
        None, description="cross-attention: keys and values come from these tokens"
    )
    source_embedding: EmbeddingIn | None = Field(
        None, description="embedding of source_tokens (default: the same as embedding)"
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "tokens": ["stream", "bank", "mud"],
                    "embedding": {"kind": "vocabulary"},
                    "projection": {"kind": "identity"},
                    "scale": "none",
                }
            ]
        },
    )


class CompareRequest(AttentionOptions):
    tokens_a: Tokens
    tokens_b: Tokens

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "tokens_a": ["stream", "bank", "mud"],
                    "tokens_b": ["money", "bank", "loan"],
                    "embedding": {"kind": "vocabulary"},
                    "projection": {"kind": "identity"},
                    "scale": "none",
                }
            ]
        },
    )


# Responses declare only the bounds the server keeps. Inputs (x, source) stay within
# ±MAX_ABS_VALUE and weights within [0, 1]; everything computed from them can be much
# larger (q·k of two 256-wide rows of 1e6-sized products reaches ~1e31, still finite
# in float32), so those steps are declared as plain numbers.
InputMatrix = list[list[Annotated[float, Field(ge=-MAX_ABS_VALUE, le=MAX_ABS_VALUE)]]]
WeightMatrix = list[list[Annotated[float, Field(ge=0, le=1)]]]
ResultMatrix = list[list[float]]
# The answer holds the core's float32 arrays as they are, documented as the lists above.
if TYPE_CHECKING:
    InputArray = FloatArray
    WeightArray = FloatArray
    ResultArray = FloatArray
    NullableArray = FloatArray
else:
    InputArray = documented_as(InputMatrix)
    WeightArray = documented_as(WeightMatrix)
    ResultArray = documented_as(ResultMatrix)
    NullableArray = documented_as(NullableMatrix)


class HeadTrace(BaseModel):
    """One head's steps; a step not asked for is null. Masked entries are null."""

    q: ResultArray | None = None
    k: ResultArray | None = None
    v: ResultArray | None = None
    attn_scores: ResultArray | None = None
    scaled_scores: ResultArray | None = None
    masked_scores: NullableArray | None = None
    attn_weights: WeightArray | None = Field(None, description="softmax rows, each in [0, 1]")
    context_vec: ResultArray | None = None


class AttentionResponse(BaseModel):
    """Every step of one attention layer. Rows are queries (the token that attends),
    columns are keys (the token attended to)."""

    tokens: list[str]
    source_tokens: list[str]
    mode: Literal["attention", "causal_average"]
    num_heads: int
    causal: bool
    cross: bool
    scale: float
    shapes: dict[str, list[int]]
    x: InputArray | None = Field(None, description="the embeddings, as given or generated")
    source: InputArray | None = None
    heads: list[HeadTrace]
    output: ResultArray | None = None


# attention_core's SharedToken as the API writes it (the fields are the core dataclass's).
@pydantic_dataclass(frozen=True)
class SharedTokenOut(SharedToken):
    pass


class CompareResponse(BaseModel):
    a: AttentionResponse
    b: AttentionResponse
    shared: list[SharedTokenOut]


class PresetSummary(BaseModel):
    name: str
    title: str
    description: str
    source: str
    compare_tokens: list[str] | None


class PresetList(RootModel[list[PresetSummary]]):
    """The seed tutorials, in order."""


class PresetDetail(PresetSummary):
    spec: AttentionRequest = Field(description="the preset as written, seeds and all")
    expanded: AttentionRequest = Field(description="the same with every number written out")


class Vocabulary(BaseModel):
    name: str
    dim: int
    words: dict[str, list[float]]


class VocabularyList(RootModel[list[Vocabulary]]):
    """The vocabularies a toy request may name."""


# attention_core's lesson rows as the API writes them (the fields are the core dataclasses').
@pydantic_dataclass(frozen=True)
class VarianceRowOut(VarianceRow):
    pass


@pydantic_dataclass(frozen=True)
class SharpnessRowOut(SharpnessRow):
    pass


class ScalingLesson(BaseModel):
    trials: int
    seed: int
    variance: list[VarianceRowOut]
    scores: list[float]
    sharpness: list[SharpnessRowOut]


class Limits(BaseModel):
    """What this server accepts (``ATTENTION_VIZ_*`` settings): pages cap their controls to it."""

    max_tokens: int = Field(description="tokens per sequence (queries or sources)")
    max_token_chars: int = Field(description="characters per token")
    max_dim: int = Field(description="embedding width, projection width, matrix rows")
    max_heads: int = Field(description="attention heads")
    max_vocabulary_words: int = Field(description="words a request may add to the vocabulary")
    max_abs_value: float = Field(description="largest magnitude of a number in a vector or matrix")
    max_body_bytes: int = Field(description="request body size")
    max_lesson_dims: int = Field(description="dimensions (and scales) in one scaling lesson")
    max_lesson_dim: int = Field(description="largest dimension in the scaling lesson")
    max_lesson_trials: int = Field(description="samples per dimension in the scaling lesson")
    max_lesson_samples: int = Field(description="sum(dims) × trials of one scaling lesson")
    max_lesson_scores: int = Field(description="scores in one scaling lesson")
    model_max_tokens: int | None = Field(
        description="tokens per model input (each model's context caps it too); null: per "
        "model, from the device's memory and its context (GET /api/model's max_tokens)"
    )
    model_full_maps_bytes: int = Field(
        description="an input whose maps (layers × heads × T² × 4 bytes) are larger takes "
        "the long path of /api/model/attention",
    )
    model_max_answer_cells: int = Field(
        description="map cells (after pooling) one long-path answer carries"
    )


class ErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every 4xx answer: what is wrong, and where (``loc`` names the field)."""

    detail: list[ErrorItem]
