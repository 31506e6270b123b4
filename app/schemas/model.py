"""Request and response bodies of the real-model API (``/api/model``).

Layers are numbered from 1 (the first encoder layer) to L, so that layer l's
attention produces hidden state l; in word comparisons index 0 is the
embedding output.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

# Characters per text: generous for 512 WordPieces, small enough to tokenize in
# a millisecond.  The token limit itself is checked after tokenizing.
MAX_TEXT_CHARS = 20_000
MAX_WORD_CHARS = 100


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompactFormat(BaseModel):
    """How to decode a compact tensor (also given inline with every compact tensor)."""

    encoding: Literal["base64"]
    dtype: Literal["uint8", "float16"]
    bytes_per_value: int
    order: str
    decode: str
    max_abs_error: float
    byte_order: str | None = None


class CompactTensorOut(CompactFormat):
    """A tensor as base64 bytes: ``shape`` in C order, ``decode`` says how to read a value."""

    shape: list[int]
    data: str


class ModelInfo(BaseModel):
    name: str
    layers: int
    heads: int
    hidden: int
    head_dim: int
    vocab_size: int
    max_tokens: int = Field(description="WordPiece tokens per input, [CLS] and [SEP] included")
    compact_formats: dict[str, CompactFormat]


class ModelAttentionRequest(Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["The bank approved it."])
    text_b: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="optional second text of a sentence pair (token_type_ids 1)",
    )
    hide_special: StrictBool = Field(
        False,
        description="drop [CLS]/[SEP] rows and columns and renormalize each row to sum to 1",
    )
    layers: list[StrictInt] | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="layers to return, 1..L; default all (fetch one at a time for long texts)",
    )
    format: Literal["json", "compact"] = Field(
        "json", description="'json': nested floats; 'compact': base64 per layer"
    )
    dtype: Literal["uint8", "float16"] = Field(
        "uint8", description="compact only: 1 byte (error <= 1/510) or 2 bytes per weight"
    )


Matrix = list[list[float]]
Weights = Matrix | list[Matrix] | CompactTensorOut


class ModelAttentionResponse(BaseModel):
    model: str
    tokens: list[str] = Field(description="the tokens shown (without [CLS]/[SEP] if hidden)")
    token_type_ids: list[int] = Field(description="segment of each shown token (0 = A, 1 = B)")
    positions: list[int] = Field(description="index of each shown token in all_tokens")
    all_tokens: list[str]
    hide_special: bool
    layers: list[int] = Field(description="layer numbers (1..L) of the lists below, in order")
    heads: int
    format: Literal["json", "compact"]
    attentions: list[Weights] = Field(description="per layer (heads, T, T); rows sum to 1")
    head_average: list[Weights] = Field(description="per layer (T, T), mean over heads")
    rollout: list[Weights] = Field(
        description="per layer (T, T): attention rollout through that layer, residual 0.5"
    )


class CompareWordRequest(Strict):
    text_a: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["the river bank"])
    text_b: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["the bank approved"])
    word: str = Field(min_length=1, max_length=MAX_WORD_CHARS, examples=["bank"])


class CompareWordResponse(BaseModel):
    model: str
    word: str
    pieces: list[str] = Field(description="the word's WordPieces; several are averaged")
    tokens_a: list[str]
    tokens_b: list[str]
    span_a: list[int] = Field(description="[start, stop) token indices of the word in text_a")
    span_b: list[int]
    cosines: list[float] = Field(
        description="cosine of the word's hidden state, index 0 = embeddings, l = after layer l"
    )


class EmbeddingsRequest(Strict):
    words: list[str] = Field(min_length=1, examples=[["bank", "river", "loan"]])


class EmbeddingsResponse(BaseModel):
    model: str
    dim: int
    words: list[str]
    pieces: list[list[str]]
    vectors: list[list[float]] = Field(
        description="word-embedding-table rows, mean over each word's WordPieces (no context)"
    )
