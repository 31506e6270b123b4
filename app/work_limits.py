"""The inputs besides ``text`` that size a model request's work, checked before the work:
an encoder-decoder's ``target`` (the answer's size: ``app.limits.check_answer_cells``).
``induction_length`` is bounded by the model's token limit only (``scoring.induction_ids``):
every stack's induction score is summed block by block, no map held.

Each refusal is a 422 ``limit_exceeded`` naming its own field, the size found, the limit
and its setting (``app.limits``).
"""

from __future__ import annotations

from attention_core import SpecError
from attention_core.models import TextModel
from attention_core.models.base.capabilities import Target


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
