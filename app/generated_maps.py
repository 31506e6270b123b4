"""A generation's maps, at any length: one pass over what it read and wrote.

The generation itself keeps no map (``generate(capture_attentions=False)``: the
prompt's (or the source's) pass computes each layer's context block by block, each
new token reads the cache).  Its maps are then those of one long pass over what the
model read, gathered into what the request asks (heads, region, pool) from the kept
q/k like any text's (``attention_answer``):

- a decoder: the prompt's ids and the ids it wrote, read as they are (row i: what
  token i attended to as the model's input, as the KV cache computed it);
- an encoder-decoder: the source (the prompt) and the target it wrote, the decoder
  reading the start token and every written id (the last included), as the steps fed
  them: its three stacks, as ``/api/model/attention`` answers them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attention_core.models import TextModel
from attention_core.models.base.contract import ModelPass, PassOptions
from attention_core.models.base.writing import Written

from .attention_answer import MapsPlan, model_sizes, stacks_answer
from .map_view import select_layers
from .schemas.model import GenerateRequest, MapOptions, ModelAttentionRequest
from .settings import Settings


def generated_maps(
    model: TextModel,
    body: GenerateRequest,
    settings: Settings,
    run: Callable[[PassOptions], ModelPass],
) -> dict[str, Any]:
    """``MapsResponse``'s fields (and an encoder-decoder's ``Seq2SeqMaps``) of what the
    generation read, as ``body`` asks: ``run(options)`` is the pass over it."""
    shown = body.model_dump(include=set(MapOptions.model_fields))
    request = ModelAttentionRequest(model=body.model, text=body.prompt, **shown)
    num_layers, deepest, heads = model_sizes(model)
    heads = heads if num_layers else 0  # a trained bigram: no layer, no head
    plan = MapsPlan(request, settings, num_layers, select_layers(body.layers, deepest), heads)
    options = PassOptions(view=plan.view, averages_up_to=plan.rollout_up_to())
    return stacks_answer(model, run(options), plan)


def written_fields(written: Written, positions: list[int]) -> dict[str, Any]:
    """``GenerateResponse``'s fields of what was written; ``positions``: the rows shown."""
    return {
        "prompt_tokens": written.read,
        "generated": [written.rows_written[i] for i in positions],
        "generated_ids": list(written.new_ids),
        "generated_tokens": list(written.new_tokens),
        "generated_text": written.text,
        "stop_reason": written.stop_reason,
        "seed": written.seed,
    }
