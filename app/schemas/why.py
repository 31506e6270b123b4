"""Request and response bodies of ``/api/model/why`` (the QK decomposition of one cell's
score) and ``/api/model/attribute`` (every head's ablation effect, estimated in one pass).
Layers and heads from 1, as in the rest of the model API; rows, columns and positions are
token indices from 0."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from . import examples
from .heads import Grid, TextField
from .model import TARGET_FIELD, ModelName, Stack, Strict

MAX_PAIRS = 1000


class WhyRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.WHY)

    model: ModelName | None = None
    text: str = TextField
    layer: StrictInt = Field(ge=1, description="the head's layer, from 1")
    head: StrictInt = Field(ge=1, description="the head, from 1")
    row: StrictInt = Field(
        ge=0,
        description="the query token's index, from 0 (an encoder-decoder's decoder and cross "
        "stacks: a position of the decoder's input)",
    )
    col: StrictInt = Field(
        ge=0,
        description="the key token's index, from 0 (a decoder's col must be ≤ row; "
        "cross-attention's: a source token)",
    )
    target: str | None = Field(None, **TARGET_FIELD)
    stack: Stack | None = Field(
        None,
        description="encoder-decoders: the stack of the head ('encoder', the default: query "
        "and key source tokens; 'decoder': causal self-attention over the target; 'cross': "
        "a target position's query, a source token's key)",
    )
    top: StrictInt = Field(
        20,
        ge=1,
        le=MAX_PAIRS,
        description="how many (query, key) pairs to list, largest |value| first",
    )


class Contribution(BaseModel):
    query: str = Field(description="the query side's component (a name of ``components``)")
    key: str = Field(description="the key side's component")
    value: float = Field(description="q_row^(query) · k_col^(key) × scale")


class WhyResponse(BaseModel):
    """``contributions`` + ``rest`` = ``score``; ``grid`` holds every pair."""

    model: str
    family: str
    tokens: list[str]
    layer: int
    head: int
    row: int
    col: int
    score: float = Field(description="the pre-softmax score q_row · k_col × scale the map used")
    weight: float = Field(description="the cell's softmax weight (the map's value)")
    scale: float
    softcap: float | None = Field(
        default=None,
        description="Gemma 2's soft-cap, applied after the sum: the pairs add up to "
        "``score``, and the softmax reads softcap · tanh(score / softcap); null: no cap",
    )
    components: list[str] = Field(
        description="what wrote to the residual stream before the layer: 'embedding', "
        "'L1 H3' (layer 1 head 3's output), 'L1 MLP', and 'biases' (the projections' "
        "biases and the norms' shifts); norms frozen at the forward's values.  An "
        "encoder-decoder's decoder stream also has 'L1 cross H3' (its cross-attention's "
        "heads); a cross-attention query's components include its own layer's "
        "self-attention.  The grid's rows (and columns, without ``key_components``)"
    )
    key_components: list[str] | None = Field(
        default=None,
        description="cross-attention: the key side's components, the encoder output's "
        "('encoder embedding', 'encoder L1 H3', 'encoder L1 MLP', 'encoder biases'), the "
        "grid's columns; null: the key side's are ``components``",
    )
    stack: Stack | None = Field(
        default=None, description="encoder-decoders: the stack of the head; null otherwise"
    )
    source_tokens: list[str] | None = Field(
        default=None,
        description="encoder-decoders: the source's tokens (``tokens`` are the rows': the "
        "source for the encoder stack, the decoder's input for decoder and cross)",
    )
    contributions: list[Contribution] = Field(description="the largest pairs, by |value|")
    rest: float = Field(description="score − the listed values − score_bias")
    score_bias: float | None = Field(
        default=None,
        description="the family's score bias for this cell, a term of its own (T5's relative "
        "position bias): score = the grid's sum + score_bias; null: none",
    )
    grid: Grid = Field(description="[query component][key component] -> value, every pair")


class Target(Strict):
    position: StrictInt = Field(ge=0, description="the position whose next token is scored")
    token: StrictInt | StrictStr | None = Field(
        None,
        description="the token scored there: its id, or its text (one token of the "
        "vocabulary); null: the model's own most likely token there",
    )


class AttributeRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.ATTRIBUTE)

    model: ModelName | None = None
    text: str = TextField
    method: Literal["attribution_patching", "atp_star", "exact"] = Field(
        "attribution_patching",
        description="attribution_patching: gradient × change, one forward and one backward; "
        "atp_star: the same with every later softmax recomputed for the head's change to its "
        "queries and keys; exact: attribution patching and every head ablated on its own "
        "(costs layers × heads × T², limit ATTENTION_VIZ_MAX_ABLATION_CELLS)",
    )
    ablation: Literal["zero", "mean"] = Field(
        "zero", description="a head's context vector replaced by 0 or by its mean over positions"
    )
    target: Target | StrictStr | None = Field(
        None,
        description="decoders: null, the text's mean next-token loss; else {position, token}: "
        "−log p(token) at position.  Encoder-decoders: the decoder's text (a string, "
        "needed), the loss the mean of −log p(target token i | source, target tokens "
        "before i) over its tokens, as ablation's",
    )
    stack: Stack | None = Field(
        None,
        description="encoder-decoders: the stack whose grids are ``estimate``, ``exact`` and "
        "``confirmed`` ('encoder', the default, 'decoder' or 'cross'); ``stacks`` has every "
        "stack's estimate from the same pass",
    )
    confirm_top: StrictInt = Field(
        0,
        ge=0,
        le=16,
        description="also ablate exactly, each alone, this many heads of the largest "
        "|estimate| (atp_star: of the largest GradDrop score; one batched forward pass)",
    )


class HeadRef(BaseModel):
    layer: int
    head: int


class Confirmed(BaseModel):
    layer: int
    head: int
    estimate: float = Field(description="the estimate's Δloss")
    exact: float = Field(description="the Δloss of ablating the head alone")


class AttributeResponse(BaseModel):
    model: str
    family: str
    tokens: list[str]
    method: str
    ablation: str
    target: Target | None
    target_text: str | None = Field(
        description="the scored token's text (encoder-decoders: the target, each of whose "
        "tokens is scored)"
    )
    loss: float = Field(description="the loss without any ablation, nats")
    estimate: Grid = Field(
        description="[layer][head] estimated Δloss (ablated − clean): atp_star's with "
        "atp_star, attribution patching's otherwise"
    )
    exact: Grid | None = Field(description="with exact: [layer][head] the Δloss ablation gives")
    graddrop: Grid | None = Field(
        default=None,
        description="with atp_star: [layer][head] AtP*'s GradDrop score (Kramár et al. 2024, "
        "§3.2), (1/(L−1)) Σ over layers ℓ of |the estimate with no gradient through ℓ's "
        "residual write (its attention and MLP output)|: |estimate| for a head whose effect "
        "takes one path, more where its paths cancel; atp_star confirms the heads of the "
        "largest score",
    )
    cancelled: list[HeadRef] = Field(
        default_factory=list,
        description="with atp_star: heads whose GradDrop score is over twice |estimate| (and "
        "at least a tenth of the largest score): their effects through different later "
        "layers cancel in the estimate, so a small estimate there may hide a head that matters",
    )
    confirmed: list[Confirmed] = Field(description="with confirm_top: those heads, exactly")
    direct: Grid | None = Field(
        description="[layer][head] direct logit attribution: the head's output through the "
        "frozen final norm onto the scored token's unembedding (the mean over positions of "
        "the next token's, without a target), a logit.  Encoder-decoders' decoder and cross "
        "stacks: through every later norm of the decoder stream, frozen (Marian's and BART's "
        "post-norms, T5's final norm), onto the target's tokens, the mean over positions; "
        "null for their encoder stack (its heads reach the logits only through the "
        "cross-attention) and for families whose streams the app does not know"
    )
    stack: Stack | None = Field(
        default=None, description="encoder-decoders: the stack of the grids; null otherwise"
    )
    stacks: dict[Stack, Grid] | None = Field(
        default=None,
        description="encoder-decoders: every stack's [layer][head] estimate ('encoder', "
        "'decoder', 'cross'), from the same forward and backward",
    )
    source_tokens: list[str] | None = Field(
        default=None,
        description="encoder-decoders: the source's tokens (``tokens`` are the decoder's "
        "input, position i predicting the target's token i)",
    )
