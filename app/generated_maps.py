"""A decoder's generation's maps, at any length: one pass over what it read and wrote.

The generation itself keeps no map (``Decoder.generate(capture_attentions=False)``:
the prompt's pass computes each layer's context block by block, each new token
reads the cache).  Its maps are then those of one long pass over the prompt's ids
and the ids it wrote, read as they are (row i: what token i attended to as the
model's input, as the KV cache computed it), gathered into what the request asks
(heads, region, pool) from the kept q/k like any text's (``attention_answer``).
"""

from __future__ import annotations

from typing import Any

from attention_core.models import Decoder
from attention_core.models.base.contract import PassOptions
from attention_core.models.text.decoder import GeneratedText

from .attention_answer import MapsPlan, model_sizes, stacks_answer
from .map_view import select_layers
from .schemas.model import GenerateRequest, MapOptions, ModelAttentionRequest
from .settings import Settings


def generated_maps(
    model: Decoder, result: GeneratedText, body: GenerateRequest, settings: Settings
) -> dict[str, Any]:
    """``MapsResponse``'s fields of the prompt and the written tokens, as ``body`` asks."""
    shown = body.model_dump(include=set(MapOptions.model_fields))
    request = ModelAttentionRequest(model=body.model, text=body.prompt, **shown)
    num_layers, deepest, heads = model_sizes(model)
    heads = heads if num_layers else 0  # a trained bigram: no layer, no head
    plan = MapsPlan(request, settings, num_layers, select_layers(body.layers, deepest), heads)
    options = PassOptions(view=plan.view, averages_up_to=plan.rollout_up_to())
    kept = model.pass_of(result.sequence, options)
    return stacks_answer(model, kept, plan)
