"""``/api/model/why`` and ``/api/model/attribute`` of an encoder-decoder
(``attention_core.analysis.seq2seq_why``, ``seq2seq_attribution``), in the answers' shapes:
``tokens`` the rows' (the source for the encoder stack, else the decoder's input),
``source_tokens`` the source, ``stack`` named."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .schemas.why import WhyRequest, WhyResponse
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
