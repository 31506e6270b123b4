"""``POST /api/model/head``: one real head step by step, at any length, on every stack.

The steps are recomputed for the rows asked for (``rows``/``cols``, or ``pool``)
from the layer's call as the model's one pass kept it (``forward_stacks``: q as
the softmax saw it, k, the mask, score bias, soft-cap and sinks) and what a
context-only traced forward gave (``stack_trace``: x, q, k, v, before RoPE too):
no map of the text is held whole, unless the whole map is what was asked (then it
counts against the answer's limits like any map).
"""

from __future__ import annotations

from typing import Any

import torch

from attention_core import SpecError
from attention_core.models import TextModel
from attention_core.models.base.capabilities import StackTrace, Target
from attention_core.models.base.outputs import check_layer
from attention_core.models.maps.context_pass import ContextPass
from attention_core.models.maps.pooling import Region
from attention_core.models.text.head_trace import TraceView, mean_blocks, region_head_trace

from .limits import check_answer_cells
from .map_view import region_and_block, region_fields
from .model_payloads import check_head_numbers, float_array, head_payload
from .schemas.model import ModelHeadRequest, ModelHeadResponse
from .settings import Settings

# The maps of a trace: scores, scaled, masked and weights (and a bias's or cap's step).
TRACE_MAPS = 4


def _view(body: ModelHeadRequest, rows: int, cols: int, settings: Settings) -> TraceView:
    """The request's region and pooling of a (rows, cols) map, its cells checked."""
    region, block = region_and_block(body, rows, cols)
    shown = TraceView((region.row_start, region.row_stop), (region.col_start, region.col_stop))
    view = TraceView(shown.rows, shown.cols, block)
    check_answer_cells(1, TRACE_MAPS, view.shape, rows, settings)
    check_head_numbers(TRACE_MAPS * view.shape[0] * view.shape[1], rows)
    return view


def head_answer(
    model: TextModel,
    name: str,
    body: ModelHeadRequest,
    target: Target | None,
    settings: Settings,
) -> ModelHeadResponse:
    """``ModelHeadResponse`` for ``body`` on the loaded ``model`` (``target``:
    the decoder's text or ids, checked)."""
    model.capabilities.check_fields(name, target, body.stack)
    with torch.inference_mode():
        kept = model.forward_stacks(body.text, text_b=body.text_b, target=target).stack(
            model.capabilities.stack(body.stack)
        )
        several = model.capabilities.named(kept.name) is not None
        owner = f"the {kept.name} stack of this model" if several else "this model"
        check_layer(body.layer - 1, len(kept.layers), owner)
        if not 1 <= body.head <= kept.num_heads:
            raise SpecError(
                f"head {body.head} does not exist; this layer has heads 1 to {kept.num_heads}",
                field="head",
            )
        T, S = len(kept.tokens), len(kept.key_tokens.tokens)
        view = _view(body, T, S, settings)
        traced = model.stack_trace(
            body.text,
            body.layer - 1,
            text_b=body.text_b,
            target=target,
            stack=kept.name,
            # No map held, and not the fused kernel: the layer's input must be the maps
            # pass's bit for bit, so that q and k rebuilt from it are the ones it kept.
            blocked=ContextPass(fused=False),
        )
        trace = region_head_trace(
            traced.layer, kept.layers[body.layer - 1], body.head - 1, traced.causal, view
        )
    rows = traced.rows
    payload = head_payload(trace, rows.tokens, rows.special, model=name, family=model.family)
    stack = model.capabilities.named(traced.stack)
    if stack is not None:
        payload["stack"] = stack
    if traced.source is not None:
        _source(payload, traced, view)
    region = Region(*view.rows, *view.cols)
    payload.update(region_fields(region, view.block, view.shape, body.pool is not None, (T, S)))
    return ModelHeadResponse.model_validate(payload)


def _source(payload: dict[str, Any], traced: StackTrace, view: TraceView) -> None:
    """A cross head's answer: the encoder's output (S, C) its keys and values come from,
    the columns asked for (pooled as k and v are)."""
    assert traced.source is not None
    c0, c1 = view.cols
    source = mean_blocks(traced.source[c0:c1], view.block[1])
    payload.update(
        {
            "cross": True,
            "source_tokens": list(traced.source_tokens),
            "source": float_array(source),
        }
    )
    payload["shapes"]["source"] = list(source.shape)
