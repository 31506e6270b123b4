"""The body of ``POST /api/model/attention``, written once for its two routes.

The plain POST answers it as JSON; ``POST /api/model/attention/stream`` sends it
as the ``result`` event after the forward pass's progress (``app.work_stream``).
Both call ``attention_answer``, so the streamed result is the POST's body by
construction.
"""

from __future__ import annotations

import torch

from attention_core.analysis import value_norm_shares
from attention_core.models import ModelMaps, ModelRegistry

from .long_inputs import long_attention
from .model_payloads import maps_payload, require_attention
from .model_registry import load
from .schemas.model import ModelAttentionRequest
from .seq2seq_payloads import check_fields, is_encoder_decoder, seq2seq_attention
from .settings import Settings


def attention_answer(
    body: ModelAttentionRequest, registry: ModelRegistry, settings: Settings
) -> object:
    """The tokens and the asked-for maps of ``body.text`` (see ``model_attention``'s docs)."""
    entry, model = load(registry, body.model)
    long = long_attention(model, body, entry.name, settings)  # None: the full maps fit
    if long is not None:
        return long
    if is_encoder_decoder(model):  # encoder, decoder and cross maps of a source and target
        return seq2seq_attention(model, body, entry.name)
    check_fields(model, entry.name, body)
    require_attention(entry.name, model.info())
    with torch.inference_mode():
        maps: ModelMaps = (
            value_norm_shares(model, body.text, body.text_b)
            if body.measure == "value_norm"
            else model.encode(body.text, body.text_b)
        )
        return maps_payload(
            maps,
            body,
            model=entry.name,
            family=model.family,
            causal=model.causal,
            hidden_states=body.hidden_states,
            settings=settings,
        )
