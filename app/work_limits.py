"""The inputs besides ``text`` that size a model request's work, checked before the work:
``induction_length`` and an encoder-decoder's ``target`` (the answer's size: ``app.limits.
check_answer_cells``, which both map paths call).

Each refusal is a 422 ``limit_exceeded`` naming its own field, the size found, the limit
and its setting (``app.limits``).
"""

from __future__ import annotations

from attention_core.models import TextModel

from .full_maps import refuse_full_maps
from .settings import Settings


def refuse_induction(model: TextModel, length: int | None, settings: Settings) -> None:
    """Head scores run the model once more over a block of ``length`` tokens repeated twice:
    those maps are held whole, so ``induction_length`` is bounded as a text is."""
    if length is not None:
        what = "head scores' induction block (twice induction_length)"
        refuse_full_maps(model, 2 * length, "induction_length", settings, what)


def refuse_target(model: TextModel, target: str | None, settings: Settings, what: str) -> None:
    """An encoder-decoder's ``target`` (the decoder's text) sizes the decoder's and the
    cross-attention's maps: bounded as ``text`` is, and refused under its own name."""
    if target is not None:
        tokens = model.target_tokens(target)
        refuse_full_maps(model, tokens, "target", settings, what)
