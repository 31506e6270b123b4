"""``/api/model/ablate`` and ``/api/model/logit-lens`` of an encoder-decoder (its decoder's
predictions of the target; ``attention_core.analysis.seq2seq_heads``), in the answers'
shapes: ``tokens`` the decoder's input, ``source_tokens`` the source, ``stack`` named."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .ablation_answer import Ablated, Read, ablation_response, float32_grid
from .limits import over_limit
from .schemas.heads import (
    AblateRequest,
    AblateResponse,
    LogitLensRequest,
    LogitLensResponse,
)
from .settings import Settings

if TYPE_CHECKING:  # importing it imports transformers (the optional extra)
    from attention_core.analysis.seq2seq_heads import Seq2SeqText
    from attention_core.models.base.capabilities import StackName
    from attention_core.models.hf.seq2seq import EncoderDecoder


def seq2seq_ablation(
    model: EncoderDecoder, name: str, body: AblateRequest, settings: Settings
) -> AblateResponse:
    """Some heads of one stack ablated together (and each head alone): the decoder's
    predictions of the target before and after."""
    from attention_core.analysis import seq2seq_heads as heads

    stack = model.capabilities.stack(body.stack)
    chosen = [(layer - 1, head - 1) for layer, head in body.heads or []]
    if not body.each_head or chosen:
        heads.check_stack_heads(model, stack, chosen)
    text = heads.read(model, body.text, body.target, "ablation")
    if body.each_head:
        check_each_head(model, stack, text, settings, "each_head")
    with torch.inference_mode():
        result = heads.ablate_stack(model, text, stack, chosen, body.mode) if chosen else None
        grid = heads.each_head_effects(model, text, stack, body.mode) if body.each_head else None
    read = Read(
        name,
        model.family,
        False,
        list(text.target.tokens),
        model.tokenizer.pieces,
        stack,
        list(model.tokenize(body.text).tokens),
    )
    return ablation_response(read, Ablated(chosen, body.mode, result, grid, "delta_loss"))


def check_each_head(
    model: EncoderDecoder,
    stack: StackName,
    text: Seq2SeqText,
    settings: Settings,
    field: str,
    what: str | None = None,
    other: str = "",
) -> None:
    """Each head of ``stack`` ablated alone (``each_head``, attribution's ``exact``) within
    ATTENTION_VIZ_MAX_ABLATION_CELLS, else a 422 on ``field`` saying ``what`` costs that
    (default: the field) and ``other`` (what else to ask)."""
    from attention_core.analysis.seq2seq_heads import each_head_cost

    cost, limit = each_head_cost(model, stack, text), settings.max_ablation_cells
    if cost > limit:
        raise over_limit(
            ["body", field],
            f"{what or field} costs the {stack} stack's layers × heads × (source + target "
            f"tokens)² = {cost}; the limit is {limit} (ATTENTION_VIZ_MAX_ABLATION_CELLS): "
            f"use a shorter text or target{other}",
            limit=limit,
            found=cost,
            setting="ATTENTION_VIZ_MAX_ABLATION_CELLS",
        )


def seq2seq_lens(model: EncoderDecoder, name: str, body: LogitLensRequest) -> LogitLensResponse:
    """The decoder's logit lens over the target (or its start token alone)."""
    from attention_core.analysis import seq2seq_heads as heads

    heads.lens_stack(model, body.stack)
    text = heads.read(model, body.text, body.target)
    result = heads.seq2seq_lens(model, text)
    ids = result.top_ids.tolist()
    pieces = model.tokenizer.pieces
    return LogitLensResponse(
        model=name,
        family=model.family,
        tokens=list(result.tokens),
        layers=len(ids),
        top_tokens=[[pieces(row) for row in layer] for layer in ids],
        top_ids=ids,
        top_probs=float32_grid(result.top_probs),
        stack="decoder",
        source_tokens=list(model.tokenize(body.text).tokens),
    )
