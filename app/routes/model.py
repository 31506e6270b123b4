"""The real-model API: attention maps, one head step by step, word shifts and vectors.

Every request names a ``model`` from ``GET /api/models`` (default: the
built-in MiniLM encoder, so older clients keep working); the registry
(``app.model_registry``) loads it on first use.  The POSTs' work runs on a model
thread (``app.model_work``: a 512-token forward pass takes a few hundred
milliseconds and must not block the event loop, nor the pages' threads), with a
deadline, and stops when the client leaves.

Torch threads: the app's lifespan sets ``torch.set_num_threads`` once for the
process (``ATTENTION_VIZ_TORCH_THREADS``, default 1).  Requests already run in
parallel on the model threads; one intra-op thread per request avoids OpenMP
oversubscription, which on a busy 2-core machine made a 7-token forward pass
20-50x slower with 2 threads than with 1.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from attention_core.models import (
    DECODE_DESCRIPTION,
    ModelNotFound,
    ModelRegistry,
    ModelUnsupported,
    TextModel,
)
from attention_core.models.base.capabilities import WordModel
from attention_core.models.registry.backends import sliding_windows

from ..attention_answer import attention_answer
from ..errors import error_response
from ..head_answer import head_answer
from ..limits import over_limit
from ..model_payloads import float_array, require_attention
from ..model_registry import RegistryDep, load
from ..model_work import model_answer
from ..schemas.model import (
    MAX_MODEL_NAME_CHARS,
    CompareWordRequest,
    CompareWordResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    ModelAttentionRequest,
    ModelAttentionResponse,
    ModelHeadRequest,
    ModelHeadResponse,
    ModelInfo,
)
from ..settings import Settings
from ..work_limits import head_target, token_count
from .common import ERRORS, SettingsDep, json_response

router = APIRouter(prefix="/api/model", tags=["model"])

ModelQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_MODEL_NAME_CHARS,
        description="a model name from GET /api/models; default: the built-in MiniLM",
    ),
]


def word_model(entry_name: str, model: TextModel, what: str) -> WordModel:
    """``model``'s word model (its own word vocabulary); else the error that says ``what``
    needs one."""
    words = model.capabilities.words
    if words is None:
        raise ModelUnsupported(
            f"{what} works with encoders (their WordPiece vocabulary: the BERT family); "
            f"{model.capabilities.described(entry_name, model.family)}",
            field="model",
        )
    return words


@router.get("", response_model=ModelInfo, responses=ERRORS)
def model_info(registry: RegistryDep, model: ModelQuery = None) -> Response:
    """One model (default: the built-in MiniLM): sizes, token limit, compact formats."""
    try:
        entry, loaded = load(registry, model)
    except ModelNotFound as exc:
        return error_response(404, ["query", "model"], exc.message, "model_not_found")
    except ModelUnsupported as exc:
        return error_response(422, ["query", "model"], exc.message, "model_unsupported")
    info = replace(loaded.info(), name=entry.name)
    capabilities = loaded.capabilities
    return json_response(
        ModelInfo.of(
            info,
            kind=capabilities.kind if capabilities.reads_target else None,
            compact_formats=DECODE_DESCRIPTION,
            sliding_windows=sliding_windows(loaded, info.layers),
        )
    )


@router.post("/attention", response_model=ModelAttentionResponse, responses=ERRORS)
async def model_attention(
    body: ModelAttentionRequest, request: Request, settings: SettingsDep
) -> Response:
    """The tokens and every layer's attention, head average and rollout.

    Attentions are (heads, T, T) per layer in Hugging Face's layout: row i is
    the attending token, rows sum to 1; a decoder's (``causal``) cells above
    the diagonal are masked.  ``format: "compact"`` sends each layer as base64
    (1 byte per weight with dtype uint8); ``layers`` fetches some layers only
    (results are cached, so fetching layer by layer is cheap).  With
    ``hide_special`` the special tokens and the first token are dropped and
    rows renormalized (the rollout is computed over all tokens first).

    An encoder-decoder (T5, BART, Marian) takes ``target``, the decoder's
    text, and adds ``encoder_attentions``, ``decoder_attentions`` and
    ``cross_attentions`` (target rows, source columns).

    A long input (maps over ``ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES``) takes the
    long path (``maps_path`` 'long', see ``app.attention_answer``): its maps are
    gathered block by block into what was asked, never all held.
    """
    return await model_answer(request, lambda registry: _model_attention(body, registry, settings))


def _model_attention(
    body: ModelAttentionRequest, registry: ModelRegistry, settings: Settings
) -> Response:
    return json_response(attention_answer(body, registry, settings))


@router.post("/head", response_model=ModelHeadResponse, responses=ERRORS)
async def model_head(body: ModelHeadRequest, request: Request, settings: SettingsDep) -> Response:
    """One real head, step by step, in /api/attention's shape (layer and head from 1).

    x is the layer's attention input (after the layer's norm), then q, k, v,
    attn_scores = q·kᵀ, scaled_scores, masked_scores (masked: null),
    attn_weights and context_vec, all computed by the core's attention
    function.  With grouped-query attention the head reads its ``kv_head``;
    with RoPE, q and k are rotated and ``q_unrotated``/``k_unrotated`` are given.
    An encoder-decoder's head may be of any ``stack`` (encoder, decoder, cross).
    """
    return await model_answer(request, lambda registry: _model_head(body, registry, settings))


def _model_head(body: ModelHeadRequest, registry: ModelRegistry, settings: Settings) -> Response:
    entry, model = load(registry, body.model)
    target = head_target(model, body.target, body.target_ids)
    require_attention(entry.name, model.info())
    return json_response(head_answer(model, entry.name, body, target, settings))


@router.post("/compare-word", response_model=CompareWordResponse, responses=ERRORS)
async def compare_word(
    body: CompareWordRequest, request: Request, settings: SettingsDep
) -> Response:
    """How one word's hidden state differs between two texts, layer by layer (cosine)."""
    return await model_answer(request, lambda registry: _compare_word(body, registry, settings))


def _compare_word(
    body: CompareWordRequest, registry: ModelRegistry, settings: Settings
) -> Response:
    entry, model = load(registry, body.model)
    words = word_model(entry.name, model, "compare-word")
    for field, text in (("text_a", body.text_a), ("text_b", body.text_b)):
        token_count(model, text, field)  # each text's token limit, under its own name
    result = words.compare_word(body.text_a, body.text_b, body.word)
    return json_response(
        CompareWordResponse(
            model=entry.name,
            word=result.word,
            pieces=list(result.pieces),
            tokens_a=list(result.tokens_a),
            tokens_b=list(result.tokens_b),
            span_a=list(result.span_a),
            span_b=list(result.span_b),
            cosines=list(result.cosines),
        )
    )


@router.post("/embeddings", response_model=EmbeddingsResponse, responses=ERRORS)
async def embeddings(body: EmbeddingsRequest, request: Request, settings: SettingsDep) -> Response:
    """The model's own (context-free) vectors for any words, for the toy explorer."""
    return await model_answer(request, lambda registry: _embeddings(body, registry, settings))


def _embeddings(body: EmbeddingsRequest, registry: ModelRegistry, settings: Settings) -> Response:
    limit = settings.max_vocabulary_words
    if len(body.words) > limit:
        raise over_limit(
            ["body", "words"],
            f"the number of words is {len(body.words)}; the limit is {limit} "
            "(ATTENTION_VIZ_MAX_VOCABULARY_WORDS)",
            limit=limit,
            found=len(body.words),
            setting="ATTENTION_VIZ_MAX_VOCABULARY_WORDS",
        )
    for i, word in enumerate(body.words):
        if len(word) > settings.max_token_chars:
            raise over_limit(
                ["body", "words", i],
                f"word {i} is {len(word)} characters; the limit is {settings.max_token_chars} "
                "(ATTENTION_VIZ_MAX_TOKEN_CHARS)",
                limit=settings.max_token_chars,
                found=len(word),
                setting="ATTENTION_VIZ_MAX_TOKEN_CHARS",
            )
    entry, model = load(registry, body.model)
    encoder = word_model(entry.name, model, "embeddings")
    pieces = encoder.word_pieces(body.words)
    vectors = encoder.word_vectors(body.words)
    return json_response(
        EmbeddingsResponse(
            model=entry.name,
            dim=encoder.hidden_size,
            words=body.words,
            pieces=[list(p) for p in pieces],
            vectors=float_array(vectors),
        )
    )
