"""The size a model text may have: its characters, a multiple of its token limit,
checked before tokenizing, and its tokens, checked after.

A text is refused by its token count, which only tokenizing tells; a text far longer
than any text of that many tokens is refused first, by its length, so that a megabyte
of text is never tokenized for nothing.  The bound follows the token limit (the
model's context, or the server's ``model_max_tokens``, which follows the device's
memory): ``CHARS_PER_TOKEN`` characters a token, far above what tokenizers give
(English text is ~4.5 characters a BPE token, code ~3; only runs of one repeated
character, which byte-level BPEs merge into long tokens, come near it).  The request
schemas keep one static cap besides (``app.schemas.model.MAX_TEXT_CHARS``), a guard
on the body's size only.
"""

from __future__ import annotations

from ...errors import LimitExceeded

CHARS_PER_TOKEN = 16


def check_text_chars(text: str, field: str, max_tokens: int, setting: str) -> None:
    """A ``LimitExceeded`` on ``field`` when ``text`` has more than ``CHARS_PER_TOKEN`` ×
    ``max_tokens`` characters; ``setting`` is what sets the token limit."""
    limit = CHARS_PER_TOKEN * max_tokens
    if len(text) > limit:
        raise LimitExceeded(
            f"{field} is {len(text)} characters; the limit is {limit} ({CHARS_PER_TOKEN} "
            f"characters a token × the token limit {max_tokens}, {setting})",
            field=field,
            limit=limit,
            found=len(text),
            setting=setting,
            extra={"unit": "characters", "chars_per_token": CHARS_PER_TOKEN},
        )


def check_token_count(count: int, field: str, limit: int, source: str, setting: str) -> None:
    """A ``LimitExceeded`` on ``field`` when its ``count`` tokens are over ``limit``;
    ``source`` says in words where the limit comes from (none when empty)."""
    if count > limit:
        why = f" ({source})" if source else ""
        words = f"{field} is {count} tokens; the limit is {limit}{why}"
        raise LimitExceeded(words, field=field, limit=limit, found=count, setting=setting)
