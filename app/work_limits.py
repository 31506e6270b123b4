"""The inputs besides ``text`` that size a model request's work, checked before the work:
``induction_length`` and an encoder-decoder's ``target`` (the answer's size: ``app.limits.
check_answer_cells``, which both map paths call).

Each refusal is a 422 ``limit_exceeded`` naming its own field, the size found, the limit
and its setting (``app.limits``).
"""

from __future__ import annotations

from attention_core import SpecError
from attention_core.models import TextModel
from attention_core.models.base.capabilities import Target

from .full_maps import refuse_full_maps
from .settings import Settings


def refuse_induction(model: TextModel, length: int | None, settings: Settings) -> None:
    """Head scores run the model once more over a block of ``length`` tokens repeated twice.
    A one-stack model sums the score block by block (any length it takes); an
    encoder-decoder's stack still holds those maps whole, so there ``induction_length`` is
    bounded as a text's full maps are."""
    if length is not None and model.capabilities.reads_target:
        what = "head scores' induction block (twice induction_length)"
        refuse_full_maps(model, 2 * length, "induction_length", settings, what)


def check_target(model: TextModel, target: str | None) -> None:
    """An encoder-decoder's ``target`` (the decoder's text) is tokenized before the work:
    over the model's token limit, or given to a one-stack model, it is refused under its
    own name.  Its maps are never held whole (the decoder's and cross-attention's
    analyses read them block by block from the pass), so no other bound applies."""
    if target is not None:
        model.target_tokens(target)


def head_target(
    model: TextModel, target: str | None, target_ids: list[int] | None
) -> Target | None:
    """The decoder's input of a head's trace: ``target`` (its text, tokenized) or
    ``target_ids`` (the ids a generation answered, read as they are, so the rows are the
    map's), not both; either is checked as ``check_target`` does, under its own name."""
    if target_ids is None:
        check_target(model, target)
        return target
    if target is not None:
        raise SpecError(
            "give the target as text (target) or as ids (target_ids), not both",
            field="target_ids",
        )
    ids = tuple(target_ids)
    model.target_tokens(ids)  # refused by a one-stack model; ids in the vocabulary, in the limit
    return ids


def token_count(model: TextModel, text: str, field: str = "text") -> int:
    """How many tokens ``text`` (the request's ``field``) is for ``model``, its token
    limit checked on the way (a 422 naming ``field``)."""
    return len(model.tokenize(text, field=field).tokens)
