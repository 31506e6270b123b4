"""``/api/model/why`` and ``/api/model/attribute`` of an encoder-decoder
(``attention_core.analysis.seq2seq_why``, ``seq2seq_attribution``), in the answers' shapes:
``tokens`` the rows' (the source for the encoder stack, else the decoder's input),
``source_tokens`` the source, ``stack`` named."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attention_core import SpecError

from .model_payloads import float_array
from .schemas.why import AttributeRequest, AttributeResponse, Confirmed, WhyRequest, WhyResponse
from .seq2seq_heads_answer import check_each_head
from .settings import Settings
from .why_payloads import why_payload

if TYPE_CHECKING:  # importing it imports transformers (the optional extra)
    from attention_core.models.hf.seq2seq import EncoderDecoder


def seq2seq_why_answer(model: EncoderDecoder, name: str, body: WhyRequest) -> WhyResponse:
    """One cell of one stack, its score split over both streams' components."""
    from attention_core.analysis.seq2seq_heads import read
    from attention_core.analysis.seq2seq_why import seq2seq_why

    stack = model.capabilities.stack(body.stack)
    text = read(model, body.text, body.target)  # no target: the decoder's start token alone
    result = seq2seq_why(model, text, stack, body.layer - 1, body.head - 1, body.row, body.col)
    source = list(model.tokenize(body.text).tokens)
    rows = source if stack == "encoder" else list(text.target.tokens)
    cell = (body.layer, body.head, body.row, body.col)
    return why_payload(name, model.family, rows, cell, result, body.top, stack, source)


def seq2seq_attribute_answer(
    model: EncoderDecoder, name: str, body: AttributeRequest, settings: Settings
) -> AttributeResponse:
    """Every head of every stack, estimated from one forward and one backward; ``exact`` and
    ``confirm_top`` on the chosen stack."""
    from attention_core.analysis import seq2seq_heads as heads
    from attention_core.analysis.seq2seq_attribution import seq2seq_attribute

    stack = model.capabilities.stack(body.stack)
    if body.target is not None and not isinstance(body.target, str):
        raise SpecError(
            "an encoder-decoder's target is the decoder's text (a string): the loss is the "
            "mean −log p of its tokens, each given the source and the tokens before it",
            field="target",
        )
    text = heads.read(model, body.text, body.target, "attribution")
    if body.method == "exact":
        check_each_head(
            model, stack, text, settings, "method", "exact", ", or attribution_patching"
        )
    result = seq2seq_attribute(model, text, stack, body.method, body.ablation, body.confirm_top)
    return AttributeResponse(
        model=name,
        family=model.family,
        tokens=list(text.target.tokens),
        method=result.method,
        ablation=result.mode,
        target=None,
        target_text=body.target,
        loss=result.loss,
        estimate=float_array(result.estimate),
        exact=None if result.exact is None else float_array(result.exact),
        direct=None if result.direct is None else float_array(result.direct),
        confirmed=[
            Confirmed(layer=n + 1, head=h + 1, estimate=float(result.estimate[n, h]), exact=e)
            for n, h, e in result.confirmed
        ],
        stack=stack,
        stacks={key: float_array(grid) for key, grid in result.estimates.items()},
        source_tokens=list(model.tokenize(body.text).tokens),
    )
