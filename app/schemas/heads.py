"""Request and response bodies of the head-analysis API (``/api/model/head-scores``,
``/api/model/ablate``, ``/api/model/logit-lens``).  Layers and heads from 1, as in
the rest of the model API; grids are layers × heads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from . import examples
from .attention import MAX_SEED
from .json_int import JsonInt
from .model import MAX_TEXT_CHARS, TARGET_FIELD, ModelName, Stack, Strict
from .tensors import CubeOut, MatrixOut, VectorOut

Grid = MatrixOut

# What each score means, written once: the page's labels come from here (``labels``).
SCORE_LABELS: dict[str, str] = {
    "previous_token": "previous token: share of attention on the token just before",
    "duplicate_token": "duplicate token: share on earlier copies of the same token",
    "first_token": "first token: mean weight on position 0 (the attention sink)",
    "entropy": "entropy: mean row entropy in nats (low = sharp, high = spread)",
    "induction": "induction: on a random block seen twice, weight on the token after the "
    "earlier copy of the current one",
}

# Every score grid an answer may carry: the labelled ones, and cross-attention's diagonal.
SCORE_GRIDS = (*SCORE_LABELS, "diagonal")

TextField = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["The bank approved it."])


class HeadScoresRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.HEAD_SCORES)

    model: ModelName | None = None
    text: str = TextField
    seed: JsonInt = Field(
        0, ge=0, le=MAX_SEED, description="seeds the random block induction is measured on"
    )
    induction_length: JsonInt | None = Field(
        None,
        ge=2,
        description="R, the random block's length (default 32, or what fits the model twice)",
    )
    target: str | None = Field(None, **TARGET_FIELD)
    stack: Stack | None = Field(
        None,
        description="encoder-decoders: the stack to score ('encoder', the default; "
        "'decoder' or 'cross', which need target); cross-attention's rows and columns are "
        "different sequences: it gets first_token, entropy and diagonal, the others null "
        "(not_applicable)",
    )


class HeadScoresResponse(BaseModel):
    """Each score as layers × heads (TransformerLens' head_detector definitions, "mul")."""

    model: str
    family: str
    causal: bool
    layers: int
    heads: int
    tokens: list[str]
    labels: dict[str, str] = Field(description="what each score measures")
    previous_token: Grid | None = Field(
        description="Σ_i A[i, i-1] / Σ A (null for cross-attention)"
    )
    duplicate_token: Grid | None = Field(
        description="Σ A[i, j] over j < i with token j = token i, / Σ A (null for cross)"
    )
    first_token: Grid = Field(description="mean over rows of A[i, 0]")
    entropy: Grid = Field(description="mean over rows of -Σ_j A[i, j] log A[i, j], nats")
    induction: Grid | None = Field(
        description="mean over the second copy of A[i, i - R + 1] (null for cross)"
    )
    diagonal: Grid | None = Field(
        None,
        description="cross-attention only: mean over target rows i of A[i, ⌊(i + ½)·S/T⌋], "
        "the weight on the source position proportional to the row (a monotone alignment)",
    )
    not_applicable: list[str] = Field(
        default_factory=list, description="the scores that have no meaning on this stack"
    )
    induction_ids: list[int] = Field(
        description="the sequence induction was measured on: special tokens, R random "
        "ordinary tokens, the same R again (then an encoder's closing special token)"
    )
    induction_tokens: list[str]
    induction_start: int = Field(description="index of the block's first copy")
    induction_length: int = Field(description="R")
    stack: str | None = Field(None, description="encoder-decoders: the stack scored")


HeadPair = tuple[JsonInt, JsonInt]


class AblateRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.ABLATE)

    model: ModelName | None = None
    text: str = TextField
    heads: list[HeadPair] | None = Field(
        None,
        max_length=4096,
        examples=[[[1, 2]]],
        description="[layer, head] pairs (from 1) to ablate together; needed unless each_head",
    )
    mode: Literal["zero", "mean"] = Field(
        "zero",
        description="replace the heads' context vectors (just before the output projection) "
        "by 0, or by their mean over the text's positions",
    )
    each_head: StrictBool = Field(
        False,
        description="also ablate every head on its own (batched), as a layers × heads grid; "
        "costs layers × heads × T² (limit: ATTENTION_VIZ_MAX_ABLATION_CELLS; an "
        "encoder-decoder's T: its source and target tokens together)",
    )
    target: str | None = Field(None, **TARGET_FIELD)
    stack: Stack | None = Field(
        None,
        description="encoder-decoders: the stack whose heads are ablated ('encoder', the "
        "default, 'decoder' or 'cross'); every stack's ablation is read in the decoder's "
        "predictions of target (needed)",
    )


class Position(BaseModel):
    """One position's prediction of the next token (decoders)."""

    top_tokens: list[str]
    top_ids: list[int]
    top_probs: list[float]


class AblateResponse(BaseModel):
    model: str
    family: str
    causal: bool
    tokens: list[str]
    heads: list[list[int]] = Field(description="the [layer, head] pairs ablated (from 1)")
    mode: Literal["zero", "mean"]
    loss_before: float | None = Field(description="decoders: mean -log p(next token), nats")
    loss_after: float | None
    logprobs_before: VectorOut | None = Field(
        description="decoders: per position i < T-1, log p(token i+1 | tokens ..i)"
    )
    logprobs_after: VectorOut | None
    predictions_before: list[Position] | None = Field(
        description="decoders: per position, the top next tokens"
    )
    predictions_after: list[Position] | None
    embedding_cosine: float | None = Field(
        description="encoders: cosine of the sentence embedding (mean of the last layer's "
        "states) with the heads ablated to the one without"
    )
    each_head: Grid | None = Field(
        description="with each_head: per [layer][head], decoders Δloss (loss without that "
        "head − loss_before), encoders the embedding cosine without that head"
    )
    each_head_measure: Literal["delta_loss", "embedding_cosine"] | None
    stack: Stack | None = Field(
        None,
        description="encoder-decoders: the stack ablated; tokens are then the decoder's "
        "input and the log-probabilities those of the target's tokens (position i: "
        "log p(target token i | source, target tokens before i))",
    )
    source_tokens: list[str] | None = Field(None, description="encoder-decoders: the source")


class LogitLensRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.LOGIT_LENS)

    model: ModelName | None = None
    text: str = TextField
    target: str | None = Field(None, **TARGET_FIELD)
    stack: Stack | None = Field(
        None,
        description="encoder-decoders: 'decoder' (the default: the LM head reads the "
        "decoder's states; without target it reads its start token alone); 'encoder' and "
        "'cross' are refused with the reason",
    )


class LogitLensResponse(BaseModel):
    """After each layer l (1..L), each position's top next tokens: softmax(lm_head(norm(h_l)))."""

    model: str
    family: str
    tokens: list[str]
    layers: int
    top_tokens: list[list[list[str]]] = Field(description="(layers, T, k)")
    top_ids: list[list[list[int]]]
    top_probs: CubeOut
    stack: Stack | None = Field(
        None, description="encoder-decoders: 'decoder' (tokens: the decoder's input)"
    )
    source_tokens: list[str] | None = Field(None, description="encoder-decoders: the source")
