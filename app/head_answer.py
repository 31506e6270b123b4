"""``POST /api/model/head``: one real head step by step, at any length the model takes.

The steps are recomputed for the rows asked for (``rows``/``cols``, or ``pool``)
from the layer's call as the model's one pass kept it (``forward_stacks``: q as
the softmax saw it, k, the mask, score bias, soft-cap and sinks) and what a
context-only traced forward gave (x, q, k, v, before RoPE too): no map of the
text is held whole, unless the whole map is what was asked (then it counts
against the answer's limits like any map).
"""

from __future__ import annotations

from typing import Any

import torch

from attention_core import SpecError
from attention_core.models import TextModel
from attention_core.models.base.outputs import check_layer
from attention_core.models.maps.context_pass import context_only
from attention_core.models.maps.pooling import Region
from attention_core.models.text.head_trace import TraceView, mean_blocks, region_head_trace

from .limits import check_answer_cells
from .map_view import region_and_block, region_fields
from .model_payloads import check_head_numbers, float_array, head_payload, require_attention
from .schemas.model import ModelHeadRequest
from .seq2seq_payloads import check_fields, is_encoder_decoder
from .settings import Settings

# The maps of a trace: scores, scaled, masked and weights (and a bias's or cap's step).
TRACE_MAPS = 4


def _view(body: ModelHeadRequest, rows: int, cols: int, settings: Settings) -> TraceView:
    """The request's region and pooling of a (rows, cols) map, its cells checked."""
    region, block = region_and_block(body, rows, cols)
    view = TraceView(
        (region.row_start, region.row_stop), (region.col_start, region.col_stop), block
    )
    check_answer_cells(1, TRACE_MAPS, view.shape, rows, settings)
    check_head_numbers(TRACE_MAPS * view.shape[0] * view.shape[1], rows)
    return view


def _check_head(head: int, heads: int) -> None:
    if not 1 <= head <= heads:
        raise SpecError(
            f"head {head} does not exist; this layer has heads 1 to {heads}", field="head"
        )


def head_answer(model: TextModel, name: str, body: ModelHeadRequest, settings: Settings) -> Any:
    """The body of ``ModelHeadResponse`` for ``body`` on the loaded ``model``."""
    if is_encoder_decoder(model):
        return _stack_head(model, name, body, settings)
    check_fields(model, name, body)
    info = model.info()
    require_attention(name, info)
    check_layer(body.layer - 1, int(info["layers"]))  # type: ignore[call-overload]
    _check_head(body.head, int(info["heads"]))  # type: ignore[call-overload]
    pair = () if body.text_b is None else (body.text_b,)
    T = len(model.tokenize(body.text, *pair).tokens)
    view = _view(body, T, T, settings)
    with torch.inference_mode():
        kept = model.forward_stacks(body.text, text_b=body.text_b).stack()
        with context_only():
            tokenized, layer_trace = model.trace(body.text, body.layer - 1, body.text_b)
        trace = region_head_trace(
            layer_trace, kept.layers[body.layer - 1], body.head - 1, model.causal, view
        )
    payload = head_payload(
        trace, tokenized.tokens, tokenized.special, model=name, family=model.family
    )
    return _shown(payload, view, body, (T, T))


def _stack_head(model: Any, name: str, body: ModelHeadRequest, settings: Settings) -> Any:
    """An encoder-decoder's head of any ``stack`` (default the encoder; ``target``: the
    decoder's text)."""
    model.refuse_pair(body.text_b)
    stack = body.stack or "encoder"
    with torch.inference_mode():
        kept = model.forward_stacks(body.text, target=body.target).stack(stack)
        T, S = len(kept.tokens), len(kept.key_tokens.tokens)
        check_layer(body.layer - 1, len(kept.layers), f"the {stack} stack of this model")
        _check_head(body.head, kept.num_heads)
        view = _view(body, T, S, settings)
        with context_only():
            rows, layer_trace, source = model.trace_stack(
                body.text, body.target, stack, body.layer - 1
            )
        trace = region_head_trace(
            layer_trace, kept.layers[body.layer - 1], body.head - 1, stack == "decoder", view
        )
    payload = head_payload(trace, rows.tokens, rows.special, model=name, family=model.family)
    payload["stack"] = stack
    if source is not None:
        c0, c1 = view.cols
        shown = mean_blocks(source[0][c0:c1], view.block[1])  # (S, C) of the columns asked
        payload.update(
            {
                "cross": True,
                "source_tokens": list(kept.key_tokens.tokens),
                "source": float_array(shown),
            }
        )
        payload["shapes"]["source"] = list(shown.shape)
    return _shown(payload, view, body, (T, S))


def _shown(
    payload: dict[str, Any], view: TraceView, body: ModelHeadRequest, shape: tuple[int, int]
) -> dict[str, Any]:
    region = Region(*view.rows, *view.cols)
    payload.update(region_fields(region, view.block, view.shape, body.pool is not None, shape))
    return payload
