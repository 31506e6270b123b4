"""The analyses that still read every full map of a text, and their limit.

Maps, value-weighted maps, head scores, ablation, the logit lens, the head trace,
compare-word and a decoder's generation are answered at every length from what the
pass kept.  ``refuse_full_maps``'s callers still hold each layer's full (heads, T, T)
maps: the QK decomposition and attribution (``routes/why.py``), an encoder-decoder's
generation (its maps recorded step by step) and an encoder-decoder's induction score.
Past ``FULL_MAPS_SETTING`` (and past 512 tokens, the most any input had before long
inputs) they are refused with a 422 naming the field and the setting.
"""

from __future__ import annotations

from attention_core.models import TextModel

from .attention_answer import FULL_MAPS_SETTING, full_maps_bytes, model_sizes
from .limits import over_limit
from .settings import Settings

# Up to here every request answers as it did before long inputs, whatever its maps take.
ANSWERED_TOKENS = 512


def refuse_full_maps(
    model: TextModel, tokens: int, field: str, settings: Settings, what: str
) -> None:
    """A 422 on ``field`` when ``what`` would hold every full map of ``tokens`` tokens
    and they are over ``model_full_maps_bytes``, past ``ANSWERED_TOKENS``."""
    layers, _, heads = model_sizes(model)
    found = full_maps_bytes(layers, heads, tokens)
    limit = settings.model_full_maps_bytes
    if tokens > ANSWERED_TOKENS and found > limit:
        raise over_limit(
            ["body", field],
            f"{what} needs every attention map of the text: layers × heads × T² × 4 bytes "
            f"= {found} bytes for {tokens} tokens; the limit is {limit} ({FULL_MAPS_SETTING}): "
            "use a shorter text (POST /api/model/attention shows a long text's maps)",
            limit=limit,
            found=found,
            setting=FULL_MAPS_SETTING,
        )
