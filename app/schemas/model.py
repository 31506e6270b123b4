"""Request and response bodies of the real-model API (``/api/models``, ``/api/model/...``).

Layers are numbered from 1 (the first layer) to L, so that layer l's
attention produces hidden state l; heads from 1 to H; in word comparisons
index 0 is the embedding output.  Every request takes an optional ``model``
(a name from ``GET /api/models``; default: the built-in MiniLM encoder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model

from attention_core.models.base.protocols import ModelSummary as LoadedModel
from attention_core.models.checkpoints.model_size import Sizes
from attention_core.models.maps.pooling import POOL_REDUCE

from . import examples
from .attention import MAX_SEED
from .core_fields import dataclass_fields
from .json_int import JsonInt
from .tensors import MapsOut, MatrixOut, NullableMatrixOut, VectorOut

# Characters per text, a static guard on the body's size only (as the default
# ATTENTION_VIZ_MAX_BODY_BYTES).  The bound that counts follows each model's token limit
# (attention_core.models.text.text_chars: 16 characters a token, checked before
# tokenizing); the token limit itself is checked after tokenizing.
MAX_TEXT_CHARS = 2_000_000
MAX_WORD_CHARS = 100


MAX_MODEL_NAME_CHARS = 300

ModelName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_MODEL_NAME_CHARS,
        description="a model name from GET /api/models; default: the built-in MiniLM",
        examples=["sentence-transformers/all-MiniLM-L6-v2"],
    ),
]
# Real models' activations are not bounded like the toy API's inputs: no ±1e6 here.
Rows = MatrixOut
NullableRows = NullableMatrixOut


# Maps per answer are bounded by the token limit and the JSON/compact limits; these
# bound the request's own fields (heads are per layer: Llama-3.2-1B has 32 a layer).
MAX_LISTED_HEADS = 256
MAX_POOL_CELLS = 1024
TokenRange = Annotated[list[JsonInt], Field(min_length=2, max_length=2)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListedModel(BaseModel):
    """One model the server can see.  Sizes are null when config.json could not be read."""

    name: str
    source: Literal["default", "package", "builtin", "cli", "env", "runs", "hf-cache"] = Field(
        description="where it was found (see the docs' Models page, Sources)"
    )
    default: bool = Field(description="the model requests without `model` get")
    family: str | None = Field(
        description="'bert', 'gpt2', 'llama' (the core's families), else the model_type "
        "transformers runs (e.g. 'qwen3'); null if unknown"
    )
    causal: bool | None = Field(description="true for decoders (each token sees the past only)")
    backend: Literal["core", "transformers"] | None = Field(
        description="what runs it: 'core' (the hand-written BERT, GPT-2 and Llama families) or "
        "'transformers' (any other architecture transformers knows, every attention layer "
        "still computed by the core); null if unknown"
    )
    kind: Literal["encoder", "decoder", "encoder-decoder"] | None = Field(
        description="the model's kind; null if unknown"
    )
    capture: Literal["core", "interface", "adapter"] | None = Field(
        None,
        description="how its attention reaches the core, decided when listed: 'core' (a "
        "hand-written family), 'interface' (transformers' attention interface) or 'adapter' "
        "(Bloom, MPT, Falcon, DeBERTa-v2, FSMT: attention in the family's own code, run "
        "through the core); null when unsupported",
    )
    parameters: int | None = Field(description="from the safetensors headers")
    dtype: str | None = Field(
        None,
        description="the weights' dtype in memory ('bfloat16' for a bfloat16 checkpoint: "
        "kept as stored, see ATTENTION_VIZ_DTYPE); the attention is computed in float32",
    )
    held_bytes: int | None = Field(
        None, description="what the weights take in memory once loaded (as held)"
    )
    device: Literal["cpu", "cuda"] | None = Field(
        None, description="where it runs (ATTENTION_VIZ_DEVICE); null when not supported"
    )
    placement: str | None = Field(
        None,
        description="how a model larger than ATTENTION_VIZ_MAX_MODEL_BYTES runs: accelerate's "
        "device map (layers in memory, layers read from disk, the expected extra time per "
        "forward pass, dtype); null when it fits",
    )
    loaded: bool = Field(description="in memory now")
    supported: bool
    reason: str | None = Field(description="why it is not supported (null when it is)")
    probe: str | None = Field(
        None, description="a trained run's probe text (its snapshots' text); null otherwise"
    )


# The listing's sizes are the core's ``Sizes`` fields (each null when unread).
if TYPE_CHECKING:
    ModelSummary = ListedModel
else:
    ModelSummary = create_model(
        "ModelSummary",
        __base__=ListedModel,
        __module__=__name__,
        __doc__=ListedModel.__doc__,
        **dataclass_fields(Sizes, nullable=True),
    )


class ModelList(BaseModel):
    default: str | None = Field(description="the default model's name (null: none installed)")
    models: list[ModelSummary]


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


class LoadedModelFacts(BaseModel):
    """What ``GET /api/model`` adds to the core's ``ModelSummary`` of a loaded model."""

    kind: Literal["encoder-decoder"] | None = Field(
        None, description="encoder-decoders only: its stacks are encoder, decoder and cross"
    )
    compact_formats: dict[str, CompactFormat]
    sliding_windows: list[int | None] = Field(
        description="per layer, its sliding window w (query i reads keys i - w + 1 to i; the "
        "others are masked like the causal triangle), null where the layer reads every "
        "earlier key"
    )

    @classmethod
    def of(
        cls,
        summary: LoadedModel,
        *,
        kind: str | None,
        compact_formats: Mapping[str, object],
        sliding_windows: list[int | None],
    ) -> Self:
        """The answer for ``summary``: its null fields and a one-stack model's ``kind`` are
        left out (absent from the JSON)."""
        given = {name: value for name, value in asdict(summary).items() if value is not None}
        if kind is not None:
            given["kind"] = kind
        facts = {"compact_formats": compact_formats, "sliding_windows": sliding_windows}
        return cls.model_validate({**given, **facts})


# GET /api/model's answer: the core's ``ModelSummary`` fields and the facts above.
if TYPE_CHECKING:
    ModelInfo = LoadedModelFacts
else:
    ModelInfo = create_model(
        "ModelInfo",
        __base__=LoadedModelFacts,
        __module__=__name__,
        __doc__="One loaded model: its sizes, its token limit and the compact formats.",
        **dataclass_fields(LoadedModel),
    )


HIDE_SPECIAL = (
    "hide special and first tokens, renormalize rows: drop the rows and columns of the "
    "special tokens ([CLS], [SEP], BOS…) and of the first token (where decoders put most "
    "of their attention), then rescale each row to sum to 1"
)


# Encoder-decoders (T5, BART, Marian): the decoder's text, fed as transformers feeds labels.
TARGET_FIELD: dict[str, Any] = {
    "min_length": 1,
    "max_length": MAX_TEXT_CHARS,
    "description": "encoder-decoders only: the decoder's text (the translation, the summary), "
    "tokenized as the tokenizer's text_target and fed the way transformers feeds labels: "
    "shifted right behind the decoder start token; default: the start token alone",
    "examples": ["Die Katze sass auf der Matte."],
}
Stack = Literal["encoder", "decoder", "cross"]


class RegionOptions(Strict):
    """Which part of each map to return, and how pooled (the maps and one head's trace)."""

    pool: JsonInt | None = Field(
        None,
        ge=1,
        le=MAX_POOL_CELLS,
        description=f"block-pool each returned map (after rows/cols) to at most pool × pool "
        f"cells, 1..{MAX_POOL_CELLS}; a cell is the {POOL_REDUCE} of its block, so a "
        "sharp head's one-cell line stays at full strength instead of being dimmed by the "
        "block's width as a mean would; default: full resolution",
    )
    rows: TokenRange | None = Field(
        None,
        description="[start, stop): only these rows (attending tokens), 0-based over "
        "`tokens`; default all",
    )
    cols: TokenRange | None = Field(
        None, description="[start, stop): only these columns (attended tokens), as rows"
    )


class MapOptions(RegionOptions):
    """How to return attention maps (for /api/model/attention and /api/model/generate)."""

    hide_special: StrictBool = Field(False, description=HIDE_SPECIAL)
    layers: list[JsonInt] | None = Field(
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
    heads: list[JsonInt] | None = Field(
        None,
        min_length=1,
        max_length=MAX_LISTED_HEADS,
        description="heads to return in `attentions`, 1..H; default all (head_average "
        "and rollout stay over every head)",
    )
    head_average: StrictBool = Field(
        True,
        description="false: no `head_average` in the answer (null).  On the long path "
        "(`maps_path` 'long') the average reads every head of the layer, so a zoom into "
        "one head is cheaper without it",
    )


class ModelAttentionRequest(MapOptions):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.MAPS)

    model: ModelName | None = None
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["The bank approved it."])
    text_b: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="encoders only: the second text of a sentence pair (token_type_ids 1)",
    )
    target: str | None = Field(None, **TARGET_FIELD)
    hidden_states: StrictBool = Field(
        False,
        description="also return each listed layer's output (T, hidden) as JSON numbers, "
        "as transformers' hidden_states[layer] (a decoder's last layer after its final norm)",
    )
    measure: Literal["weights", "value_norm"] = Field(
        "weights",
        description="'weights': the attention weights α_ij; 'value_norm': ‖α_ij · v_j W_O^h‖ "
        "(Kobayashi et al. 2020: what head h moves from token j, through its slice of the "
        "output projection), each row divided by its sum so it sums to 1 like the weights "
        "(one forward pass per layer)",
    )


Weights = MapsOut | CompactTensorOut


class MapRegion(BaseModel):
    rows: list[int] = Field(description="[start, stop) over `tokens`")
    cols: list[int] = Field(description="[start, stop) over `tokens`")


class Pooled(BaseModel):
    """Every map was cut into blocks of ``block`` = [rows, cols] (the last ones partial)."""

    block: list[int]
    shape: list[int] = Field(description="[rows, cols] of each pooled map")
    reduce: Literal["maximum"] = Field(
        description="a cell is the largest weight of its block (a sharp head stays visible)"
    )


class MapsResponse(BaseModel):
    """Attention maps of one sequence: every layer's heads, their mean, and the rollout."""

    model: str
    family: str
    causal: bool = Field(
        description="decoders: each row sees only its own and earlier tokens; the cells "
        "above the diagonal are masked (weight 0, never attended), not small"
    )
    tokens: list[str] = Field(
        description="the tokens shown, as the text each covers (without the hidden ones)"
    )
    token_type_ids: list[int] = Field(description="segment of each shown token (0 = A, 1 = B)")
    positions: list[int] = Field(description="index of each shown token in all_tokens")
    all_tokens: list[str]
    special: list[bool] = Field(description="per token of all_tokens: a special token")
    hide_special: bool
    layers: list[int] = Field(description="layer numbers (1..L) of the lists below, in order")
    heads: int
    format: Literal["json", "compact"]
    attentions: list[Weights] = Field(description="per layer (heads, T, T); rows sum to 1")
    head_average: list[Weights] | None = Field(
        description="per layer (T, T), mean over heads; null when the request's "
        "head_average is false"
    )
    rollout: list[Weights] | None = Field(
        description="per layer (T, T): attention rollout through that layer, residual 0.5; "
        "null on the long path past ATTENTION_VIZ_MODEL_LONG_ROLLOUT_TOKENS (see rollout_note)"
    )
    maps_path: Literal["full", "long"] = Field(
        "full",
        description="every answer's maps are gathered block by block from each layer's kept "
        "q and k into what was asked (heads, region, pool), never all held; another view "
        "of the same text is rebuilt from them. 'full': the text's full maps would fit "
        "ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES (the answer is whole when asked); 'long': "
        "they would not: the answer is at most ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS cells "
        "(ask with pool or a region) and rollout may be null",
    )
    rollout_note: str | None = Field(
        None, description="why `rollout` is null (the long path), else null"
    )
    head_numbers: list[int] | None = Field(
        None, description="the heads (1..H) in `attentions`, in order (all when not asked)"
    )
    region: MapRegion | None = Field(
        None, description="the rows and columns every map above holds (the whole map if null)"
    )
    pooled: Pooled | None = Field(None, description="how the maps were pooled (null: not)")


class Seq2SeqMaps(BaseModel):
    """What an encoder-decoder adds to ``MapsResponse`` (null for other models).

    ``tokens``, ``attentions``, ``head_average`` and ``rollout`` are then the
    encoder's (the source); the three stacks follow in ``attentions``' format,
    per listed layer: the encoder's (heads, S, S) (the same as ``attentions``),
    the decoder's self-attention (heads, T, T) (causal) and the cross-attention
    (heads, T, S): target rows, source columns.
    """

    source_tokens: list[str] | None = Field(
        None, description="encoder-decoders: the source tokens shown (the same as tokens)"
    )
    target_tokens: list[str] | None = Field(
        None,
        description="encoder-decoders: the decoder's input tokens shown, the start token "
        "first; row i of the decoder and cross maps is what target token i read",
    )
    target_positions: list[int] | None = Field(
        None, description="index of each shown target token in all_target_tokens"
    )
    all_target_tokens: list[str] | None = None
    target_special: list[bool] | None = Field(
        None, description="per token of all_target_tokens: a special token"
    )
    encoder_attentions: list[Weights] | None = Field(
        None, description="per layer (heads, S, S): the encoder's self-attention"
    )
    decoder_attentions: list[Weights] | None = Field(
        None, description="per layer (heads, T, T): the decoder's causal self-attention"
    )
    cross_attentions: list[Weights] | None = Field(
        None, description="per layer (heads, T, S): each target token's attention over the source"
    )


class ModelAttentionResponse(Seq2SeqMaps, MapsResponse):
    hidden_states: list[MatrixOut] | None = Field(
        None, description="per listed layer (T, hidden), when asked for; rows of shown tokens"
    )


class GenerateRequest(MapOptions):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.GENERATE)

    model: ModelName | None = None
    prompt: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["The cat sat on"])
    max_new_tokens: JsonInt = Field(
        32, ge=1, description="tokens to write at most (limit: ATTENTION_VIZ_MAX_NEW_TOKENS)"
    )
    temperature: float = Field(
        0.0,
        strict=True,
        allow_inf_nan=False,
        ge=0.0,
        le=100.0,
        description="0: greedy (argmax); above 0: sample from softmax(logits / temperature)",
    )
    top_k: JsonInt | None = Field(
        None, ge=1, description="sample among the k most likely tokens only (default: all)"
    )
    seed: JsonInt | None = Field(
        None,
        ge=0,
        le=MAX_SEED,
        description="seeds the sampler (temperature above 0); default: a random seed, "
        "returned in the answer",
    )


class GenerateResponse(Seq2SeqMaps, MapsResponse):
    """The prompt, the tokens written after it, and the attention over all of them."""

    prompt_tokens: int = Field(description="how many tokens the prompt is (they come first)")
    generated: list[bool] = Field(description="per shown token: written by the model")
    generated_ids: list[int]
    generated_tokens: list[str] = Field(description="the text each generated token adds")
    generated_text: str
    stop_reason: Literal["eos", "max_new_tokens"]
    seed: int | None = Field(
        description="the sampler's seed (send it again for the same tokens); "
        "null when greedy (temperature 0), where no seed plays a part"
    )
    temperature: float
    top_k: int | None


class ModelHeadRequest(RegionOptions):
    """One head's trace: the whole (T, S) steps by default; a long text's with ``rows``/
    ``cols`` (its steps for that region: x, q and the context over the rows, k and v over
    the columns) or ``pool`` (each map max-pooled, each vector the mean of its block of
    tokens); the maps asked for count against ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.HEAD)

    model: ModelName | None = None
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, examples=["The cat sat on the mat"])
    text_b: str | None = Field(
        None, min_length=1, max_length=MAX_TEXT_CHARS, description="encoders only, as above"
    )
    target: str | None = Field(None, **TARGET_FIELD)
    target_ids: list[JsonInt] | None = Field(
        None,
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="encoder-decoders only, instead of target: the target as token ids, "
        "as /api/model/generate answered them (generated_ids); the decoder reads the start "
        "token then every id, as the generation's maps do, so the rows are that map's "
        "(a written target tokenized again may split differently)",
    )
    stack: Stack | None = Field(
        None,
        description="encoder-decoders: the head's stack ('encoder', 'decoder' or 'cross'; "
        "default 'encoder'); other models have one stack, their own kind",
    )
    layer: JsonInt = Field(ge=1, description="1..L")
    head: JsonInt = Field(ge=1, description="1..H (a query head)")


class ModelHeadSteps(BaseModel):
    """One real head's steps, named as in /api/attention's heads.  Masked entries are null."""

    q: Rows = Field(description="(T, D) queries, as attention used them (after RoPE if any)")
    k: Rows = Field(description="(T, D) keys of the head's key/value head")
    v: Rows
    attn_scores: Rows
    scaled_scores: Rows
    masked_scores: NullableRows
    attn_weights: Rows
    context_vec: Rows
    q_unrotated: Rows | None = Field(description="RoPE families: q before the rotation")
    k_unrotated: Rows | None = Field(description="RoPE families: k before the rotation")
    biased_scores: Rows | None = Field(
        None,
        description="scaled_scores plus the model's score bias (T5's relative positions, "
        "ALiBi), before the mask; null without one",
    )
    capped_scores: Rows | None = Field(
        None,
        description="softcap · tanh(scores / softcap) (Gemma 2's logit soft-capping), "
        "before the mask; null without it",
    )
    sink_weights: VectorOut | None = Field(
        None,
        description="per query, the weight the head's attention sink took (gpt-oss); the "
        "row of attn_weights sums to 1 minus it; null without sinks",
    )


class ModelHeadResponse(BaseModel):
    """One head of a real model in /api/attention's shape (one head).

    For a cross-attention head ``tokens`` are the target (rows) and
    ``source_tokens`` the source (columns)."""

    model: str
    family: str
    layer: int = Field(description="1..L")
    head: int = Field(description="1..H")
    kv_head: int = Field(description="1..H_kv: the key/value head this query head reads")
    rope: bool = Field(description="q and k are rotated (q_unrotated, k_unrotated given)")
    qk_norm: bool = Field(
        False, description="q and k are normalized (q_norm, k_norm: Qwen3, OLMo 2) before RoPE"
    )
    softcap: float | None = Field(
        None, description="the logit soft-cap of capped_scores (Gemma 2); null without it"
    )
    tokens: list[str]
    source_tokens: list[str]
    special: list[bool]
    mode: Literal["attention"]
    num_heads: Literal[1]
    causal: bool
    cross: bool = Field(description="cross-attention: keys and values come from source")
    stack: Stack | None = Field(None, description="encoder-decoders: the head's stack")
    scale: float
    shapes: dict[str, list[int]]
    x: Rows = Field(description="(T, C): the layer's attention input, after its norm")
    source: Rows | None = Field(
        None,
        description="cross-attention: (S, C) the encoder's output that keys and values "
        "come from; null for self-attention (keys come from x)",
    )
    heads: list[ModelHeadSteps] = Field(description="one entry: the head asked for")
    output: None = Field(None, description="always null: one head has no output projection")
    region: MapRegion | None = Field(
        None, description="the rows and columns the steps above hold (the whole map if null)"
    )
    pooled: Pooled | None = Field(None, description="how the steps were pooled (null: not)")


class CompareWordRequest(Strict):
    model: ModelName | None = None
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
    model: ModelName | None = None
    words: list[str] = Field(min_length=1, examples=[["bank", "river", "loan"]])


class EmbeddingsResponse(BaseModel):
    model: str
    dim: int
    words: list[str]
    pieces: list[list[str]]
    vectors: MatrixOut = Field(
        description="word-embedding-table rows, mean over each word's WordPieces (no context)"
    )
