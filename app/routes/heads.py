"""Which heads matter: head-type scores, ablation and the logit lens of a real model.

Thin routes over ``attention_core.analysis``; layers and heads are numbered
from 1 here as in the rest of the model API, from 0 in the core.  The work runs on
a model thread (``app.model_work``).
"""

from __future__ import annotations

import torch
from fastapi import APIRouter, Request, Response

from attention_core.analysis import (
    ablate,
    ablation_cost,
    check_heads,
    each_head_effects,
    head_model,
    logit_lens,
)
from attention_core.analysis.clean_predictions import CLEAN
from attention_core.analysis.model_scores import score_model
from attention_core.models import ModelRegistry

from ..ablation_answer import Ablated, Measure, Read, ablation_response, float32_grid
from ..limits import over_limit
from ..model_registry import load
from ..model_work import model_answer
from ..schemas.heads import (
    SCORE_GRIDS,
    SCORE_LABELS,
    AblateRequest,
    AblateResponse,
    HeadScoresRequest,
    HeadScoresResponse,
    LogitLensRequest,
    LogitLensResponse,
)
from ..seq2seq_heads_answer import seq2seq_ablation, seq2seq_lens
from ..settings import Settings
from ..work_limits import check_target
from .common import ERRORS, SettingsDep, json_response, reads_target

router = APIRouter(prefix="/api/model", tags=["model"])


@router.post("/head-scores", response_model=HeadScoresResponse, responses=ERRORS)
async def head_scores(body: HeadScoresRequest, request: Request, settings: SettingsDep) -> Response:
    """Every head's previous-token, duplicate-token, first-token, entropy and induction scores.

    The first four on the text's own maps; induction on a seeded random block
    of ordinary tokens repeated twice (``induction_ids``).  Encoder-decoders: one
    ``stack`` (the encoder's, the decoder's over ``target``, or the cross-attention's:
    first-token, entropy and the alignment's ``diagonal``; ``not_applicable`` names the
    scores that have no meaning there).  Any length the model takes: the scores are
    summed block by block from the pass, no full map held.
    """
    return await model_answer(request, lambda registry: _head_scores(body, registry, settings))


def _head_scores(body: HeadScoresRequest, registry: ModelRegistry, settings: Settings) -> Response:
    entry, model = load(registry, body.model)
    check_target(model, body.target)
    scored = score_model(
        model,
        body.text,
        target=body.target,
        stack=body.stack,
        seed=body.seed,
        induction_length=body.induction_length,
    )
    result = scored.scored
    layers, heads = result.scores.first_token.shape
    found = {name: float32_grid(grid) for name, grid in result.scores.as_dict().items()}
    return json_response(
        HeadScoresResponse(
            model=entry.name,
            family=model.family,
            causal=scored.stack == "decoder",
            layers=layers,
            heads=heads,
            tokens=list(result.tokens),
            labels=SCORE_LABELS,
            previous_token=found.get("previous_token"),
            duplicate_token=found.get("duplicate_token"),
            first_token=found["first_token"],
            entropy=found["entropy"],
            induction=found.get("induction"),
            diagonal=found.get("diagonal"),
            induction_ids=list(result.induction_ids),
            induction_tokens=scored.pieces(result.induction_ids),
            induction_start=result.induction_start,
            induction_length=result.induction_length,
            stack=model.capabilities.named(scored.stack),
            not_applicable=[name for name in SCORE_GRIDS if name not in found],
        )
    )


@router.post("/ablate", response_model=AblateResponse, responses=ERRORS)
async def ablate_heads(body: AblateRequest, request: Request, settings: SettingsDep) -> Response:
    """The text with some heads' context vectors zeroed (or set to their mean) just before
    the output projection: loss and next-token predictions before and after (decoders), or
    the sentence embedding's cosine (encoders).  ``each_head``: every head alone, as a grid."""
    return await model_answer(request, lambda registry: _ablate_heads(body, registry, settings))


def _ablate_heads(body: AblateRequest, registry: ModelRegistry, settings: Settings) -> Response:
    entry, model = load(registry, body.model)
    if reads_target(model):
        return json_response(seq2seq_ablation(model, entry.name, body, settings))
    model.capabilities.check_fields(entry.name, body.target, body.stack)
    heads = head_model(model)
    chosen = [(layer - 1, head - 1) for layer, head in body.heads or []]
    if not body.each_head or chosen:
        check_heads(chosen, heads.num_layers, heads.num_heads)
    ids = heads.tokenize(body.text).ids
    if body.each_head:
        cost = ablation_cost(heads.num_layers, heads.num_heads, len(ids))
        if cost > settings.max_ablation_cells:
            raise over_limit(
                ["body", "each_head"],
                f"each_head costs layers × heads × T² = {heads.num_layers} × {heads.num_heads} "
                f"× {len(ids)}² = {cost}; the limit is {settings.max_ablation_cells} "
                "(ATTENTION_VIZ_MAX_ABLATION_CELLS): use a shorter text",
                limit=settings.max_ablation_cells,
                found=cost,
                setting="ATTENTION_VIZ_MAX_ABLATION_CELLS",
            )
    with torch.inference_mode():
        result = None
        if chosen:  # a text ablated before: its clean predictions are kept
            result = ablate(heads, ids, chosen, body.mode, CLEAN.get(heads, ids))
            CLEAN.put(heads, ids, result.before)
        grid = each_head_effects(heads, ids, body.mode) if body.each_head else None
    read = Read(
        entry.name,
        model.family,
        model.causal,
        list(heads.tokenize(body.text).tokens),
        heads.token_texts,
    )
    measure: Measure = "delta_loss" if model.causal else "embedding_cosine"
    return json_response(ablation_response(read, Ablated(chosen, body.mode, result, grid, measure)))


@router.post("/logit-lens", response_model=LogitLensResponse, responses=ERRORS)
async def lens(body: LogitLensRequest, request: Request, settings: SettingsDep) -> Response:
    """Decoders: after each layer, each position's top five next tokens (final norm + LM head
    on the residual stream); the last layer's are the model's own predictions."""
    return await model_answer(request, lambda registry: _lens(body, registry, settings))


def _lens(body: LogitLensRequest, registry: ModelRegistry, settings: Settings) -> Response:
    entry, model = load(registry, body.model)
    if reads_target(model):
        return json_response(seq2seq_lens(model, entry.name, body))
    model.capabilities.check_fields(entry.name, body.target, body.stack)
    heads = head_model(model)
    result = logit_lens(model, body.text)
    ids = result.top_ids.tolist()
    return json_response(
        LogitLensResponse(
            model=entry.name,
            family=model.family,
            tokens=list(result.tokens),
            layers=len(ids),
            top_tokens=[[heads.token_texts(row) for row in layer] for layer in ids],
            top_ids=ids,
            top_probs=float32_grid(result.top_probs),
        )
    )
