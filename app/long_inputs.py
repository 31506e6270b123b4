"""Long inputs in the model API: the long path of /api/model/attention, and the refusals.

**Which requests take the long path.**  An input whose maps (layers × heads ×
T² float32) would take more than ``ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES``
(192 MiB: GPT-2 small up to ~590 tokens, a Llama-3.2-1B shape up to ~300).
Every smaller input keeps the full path and today's answers bit for bit.  The
long path serves every decoder (core and transformers backends) and the
transformers backend's encoders; BERT (core) keeps the full path up to 512
tokens (as before; its context usually ends there) and past them over the limit
is refused, as is an encoder-decoder over the limit.

On the long path (``attention_core.models.long_maps``) each layer's q and k
are kept and its maps gathered block by block into what the request shows
(``heads``, ``rows``/``cols``, ``pool``, ``hide_special``): no (H, T, T)
tensor is ever made.  A later request for another view of the same text (one
head at full resolution, a region) rebuilds it from the kept q and k
(``ATTENTION_VIZ_MODEL_LONG_CACHE_BYTES`` of them per model).  The answer:

- ``rollout`` is computed up to ``ATTENTION_VIZ_MODEL_LONG_ROLLOUT_TOKENS``
  (1,024) tokens: the pass also keeps each layer's full head average (T² a
  layer, not H × T²) and chains them; past that it is null (``rollout_note``
  says why): exact rollout chains L full T × T products (GPT-2 at 4,096
  tokens: ~1.6 TFLOP and 64 MB a layer), which no pooling or region avoids.
- ``head_average`` is computed from every head's blocks; ``head_average``:
  false in the request skips it (a zoom into one head then computes that head
  only).
- An answer over ``ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS`` map cells (layers
  × (heads + average) × rows × cols after pooling) is refused (422 on
  ``pool``) before any work: ask with ``pool`` or a smaller region.

Requests that need every full map (one head's step-by-step trace, generation,
``value_norm``, ``hidden_states``, head scores, ablation, the logit lens,
compare-word) refuse an input of more than ``LEGACY_MAX_TOKENS`` (512) tokens
past the limit with a 422 naming the field and the setting; up to 512 tokens,
the most any input had before the long path, every request answers as it did
(``value_norm`` and ``hidden_states`` then take the full path).
"""

from __future__ import annotations

from typing import Any

import torch

from attention_core.models import TextModel, hidden_tokens, hide_special
from attention_core.models.maps.map_grid import GridSpec
from attention_core.models.maps.pooling import Region
from attention_core.models.text.text_model_base import TextModelBase
from attention_core.progress import report

from .limits import check_answer_cells, over_limit
from .map_view import MapView, map_view
from .model_payloads import check_json_maps, map_json, require_attention, select_layers
from .schemas.model import ModelAttentionRequest
from .seq2seq_payloads import check_fields, is_encoder_decoder
from .settings import Settings

FULL_MAPS_SETTING = "ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES"
ROLLOUT_NOTE = (
    "not computed for an input this long: rollout multiplies every layer's full T × T map "
    "into the next (L products of T³), which no pooling or region avoids; the long path "
    "computes it up to ATTENTION_VIZ_MODEL_LONG_ROLLOUT_TOKENS tokens"
)
BYTES_PER_WEIGHT = 4  # float32
# ATTENTION_VIZ_MODEL_MAX_TOKENS's default before the long path: up to here every request
# answers as it did, whatever its maps take (BERT-large's 512 tokens: 403 MB).
LEGACY_MAX_TOKENS = 512


def full_maps_bytes(model: TextModel, tokens: int) -> int:
    """What every layer's (heads, T, T) float32 maps of ``tokens`` tokens would take."""
    info = model.info()
    layers, heads = info.get("layers"), info.get("heads")
    if not isinstance(layers, int) or not isinstance(heads, int):
        return 0
    return layers * heads * tokens * tokens * BYTES_PER_WEIGHT


def refuse_full_maps(
    model: TextModel, tokens: int, field: str, settings: Settings, what: str
) -> None:
    """A 422 on ``field`` when ``what`` would hold every full map of ``tokens`` tokens
    and they are over ``model_full_maps_bytes``, past ``LEGACY_MAX_TOKENS`` tokens (up
    to there every request answers as it did before the long path)."""
    found = full_maps_bytes(model, tokens)
    limit = settings.model_full_maps_bytes
    if tokens > LEGACY_MAX_TOKENS and found > limit:
        raise over_limit(
            ["body", field],
            f"{what} needs every attention map of the text: layers × heads × T² × 4 bytes "
            f"= {found} bytes for {tokens} tokens; the limit is {limit} ({FULL_MAPS_SETTING}): "
            "use a shorter text (POST /api/model/attention shows a long text's maps)",
            limit=limit,
            found=found,
            setting=FULL_MAPS_SETTING,
        )


def token_count(model: TextModel, text: str, field: str = "text") -> int:
    """How many tokens ``text`` (the request's ``field``) is for ``model``, its token
    limit checked on the way."""
    if isinstance(model, TextModelBase) or is_encoder_decoder(model):
        return len(model.tokenize(text, field=field))
    return len(model.tokenize(text))  # type: ignore[attr-defined]  # BERT's (text, text_b)


def long_attention(
    model: TextModel, body: ModelAttentionRequest, name: str, settings: Settings
) -> dict[str, Any] | None:
    """``MapsResponse`` of the long path, or None when the full maps fit (the full path)."""
    if is_encoder_decoder(model):
        what = "an encoder-decoder's maps"
        refuse_full_maps(model, token_count(model, body.text), "text", settings, what)
        if body.target is not None:
            refuse_full_maps(model, len(model.target_text(body.target)), "target", settings, what)
        return None
    if not isinstance(model, TextModelBase):  # BERT: no long path
        refuse_full_maps(model, token_count(model, body.text), "text", settings, "BERT's maps")
        return None
    tokenized = model.tokenize(body.text)
    if full_maps_bytes(model, len(tokenized)) <= settings.model_full_maps_bytes:
        return None
    check_fields(model, name, body)
    require_attention(name, model.info())
    if body.measure == "value_norm" or body.hidden_states:  # the long path has neither
        field = "measure" if body.measure == "value_norm" else "hidden_states"
        what = "measure 'value_norm'" if field == "measure" else "hidden_states"
        refuse_full_maps(model, len(tokenized), field, settings, what)
        return None  # up to LEGACY_MAX_TOKENS: the full path, as before
    return long_maps_payload(model, body, name, settings)


def long_maps_payload(
    model: TextModelBase[Any], body: ModelAttentionRequest, name: str, settings: Settings
) -> dict[str, Any]:
    """The long path's answer: ``maps_payload``'s fields, the maps gathered block by block."""
    tokenized = model.tokenize(body.text)
    tokens, special = tokenized.tokens, tokenized.special
    hidden = hidden_tokens(special) if body.hide_special else (False,) * len(tokens)
    positions = [i for i, h in enumerate(hidden) if not h]
    if not positions:
        hide_special(torch.zeros(1, len(hidden), len(hidden)), hidden)  # raises the reason
    config = model.config
    layers = select_layers(body.layers, config.num_layers)
    view = map_view(body, len(positions), config.num_heads)
    rows, cols = view.shape
    rollout = len(tokens) <= settings.model_long_rollout_tokens
    maps_per_layer = len(view.heads) + (1 if body.head_average else 0) + (1 if rollout else 0)
    cells = len(layers) * maps_per_layer * rows * cols
    check_answer_cells(len(layers), maps_per_layer, view.shape, len(positions), settings)
    check_json_maps(cells if body.format == "json" else 0, len(layers), f"{len(positions)} tokens")
    spec = GridSpec(
        hidden if body.hide_special else None,
        view.region,
        view.block or (1, 1),
        None if view.all_heads else tuple(h - 1 for h in view.heads),
        average=body.head_average,
    )
    long = model.encode_long(body.text, spec, body.text_b, rollout=rollout)
    grids = []
    for i, n in enumerate(layers):  # another view of a cached text is rebuilt layer by layer
        grids.append(long.grid(n - 1, spec))
        report("maps", i + 1, len(layers))
    return {
        "model": name,
        "family": model.family,
        "causal": model.causal,
        "tokens": [tokens[i] for i in positions],
        "token_type_ids": [0] * len(positions),
        "positions": positions,
        "all_tokens": list(tokens),
        "special": list(special),
        "hide_special": body.hide_special,
        "layers": layers,
        "heads": config.num_heads,
        "format": body.format,
        "attentions": [map_json(g.heads, body) for g in grids],
        "head_average": (
            [map_json(g.average, body) for g in grids if g.average is not None]
            if body.head_average
            else None
        ),
        "rollout": None
        if long.rollout is None
        else [
            map_json(shown(long.rollout[n - 1], hidden if body.hide_special else None, view), body)
            for n in layers
        ],
        "rollout_note": None if long.rollout is not None else ROLLOUT_NOTE,
        "maps_path": "long",
        **view.describe(),
    }


def long_pooled_maps(model: TextModel, text: str, cells: int) -> dict[str, Any] | None:
    """``attention-viz maps``' result through the long path (``rollout`` None past
    ``model_long_rollout_tokens``), or None when the full maps fit ``model_full_maps_bytes``."""
    import numpy as np

    from attention_core.models.maps.pooling import POOL_REDUCE, block_size, max_pool_blocks

    from .settings import get_settings

    if not isinstance(model, TextModelBase):
        return None
    T = len(model.tokenize(text))
    settings = get_settings()
    if full_maps_bytes(model, T) <= settings.model_full_maps_bytes:
        return None
    block = (block_size(T, cells), block_size(T, cells))
    spec = GridSpec(None, Region(0, T, 0, T), block, None)
    long = model.encode_long(text, spec, rollout=T <= settings.model_long_rollout_tokens)
    grids = [long.grid(n, spec) for n in range(model.config.num_layers)]
    return {
        "tokens": list(long.tokens),
        "pooled": {"block": list(block), "shape": list(spec.shape), "reduce": POOL_REDUCE},
        "attentions": np.stack([g.heads.numpy() for g in grids]),  # (L, H, r, c)
        "head_average": np.stack([g.average.numpy() for g in grids if g.average is not None]),
        "rollout": (
            None
            if long.rollout is None
            else np.stack([max_pool_blocks(r, *block).numpy() for r in long.rollout])
        ),
        "rollout_note": None if long.rollout is not None else ROLLOUT_NOTE,
    }


def shown(maps: torch.Tensor, hidden: tuple[bool, ...] | None, view: MapView) -> torch.Tensor:
    """A full (T, T) map as the answer shows it: special tokens hidden, then the view's
    region and pooling (the order of ``maps_payload``)."""
    return view.apply(maps if hidden is None else hide_special(maps, hidden))
