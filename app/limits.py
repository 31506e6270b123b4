"""Size limits on requests, checked before any tensor is built.

The limits are settings (``ATTENTION_VIZ_MAX_*``); each violation names the
field, the size found and the limit, and becomes a 422 whose ``type`` is
``limit_exceeded`` and whose ``ctx`` is ``{limit, found, setting}``: pages word
the error from those, never from the sentence.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from attention_core.errors import EMPTY_INPUT, Ctx, LimitExceeded

from .schemas.attention import (
    AttentionOptions,
    AttentionRequest,
    EmbeddingIn,
    ExplicitEmbeddingIn,
    ExplicitProjectionIn,
    HashedEmbeddingIn,
    SeededRandomEmbeddingIn,
    VocabularyEmbeddingIn,
)
from .settings import Settings


class LimitError(ValueError):
    """A request is well-formed but larger than this server accepts (or breaks a rule
    checked before any tensor is built). ``kind`` and ``ctx`` as ``SpecError``'s."""

    def __init__(
        self,
        loc: Sequence[str | int],
        message: str,
        *,
        kind: str = "invalid_request",
        ctx: Ctx | None = None,
    ) -> None:
        super().__init__(message)
        self.loc = list(loc)
        self.message = message
        self.kind = kind
        self.ctx: dict[str, int | float | str] = dict(ctx or {})


def over_limit(
    loc: Sequence[str | int], message: str, *, limit: int, found: int, setting: str
) -> LimitError:
    """A size over a limit: type ``limit_exceeded``, ctx ``{limit, found, setting}``."""
    ctx: Ctx = {"limit": limit, "found": found, "setting": setting}
    return LimitError(loc, message, kind=LimitExceeded.kind, ctx=ctx)


def _at_most(loc: Sequence[str | int], what: str, found: int, limit: int, env: str) -> None:
    if found > limit:
        setting = f"ATTENTION_VIZ_{env}"
        message = f"{what} is {found}; the limit is {limit} ({setting})"
        raise over_limit(loc, message, limit=limit, found=found, setting=setting)


def check_tokens(loc: str, tokens: Sequence[str] | None, settings: Settings) -> None:
    if tokens is None:
        return
    _at_most(["body", loc], f"the number of {loc}", len(tokens), settings.max_tokens, "MAX_TOKENS")
    for i, token in enumerate(tokens):
        _at_most(
            ["body", loc, i],
            f"the length of token {i}",
            len(token),
            settings.max_token_chars,
            "MAX_TOKEN_CHARS",
        )
        check_printable(["body", loc, i], token)


def check_printable(loc: list[str | int], text: str) -> None:
    """Reject control characters (NUL, newlines, escapes): they cannot be shown as a label.

    Markup such as ``<b>`` is fine: the pages display it literally.
    """
    for char in text:
        if unicodedata.category(char) == "Cc":
            raise LimitError(
                loc,
                f"token {text[:20]!r} contains the control character U+{ord(char):04X}; "
                "tokens must be printable text",
                kind="control_character",
                ctx={"codepoint": f"U+{ord(char):04X}"},
            )


def _check_matrix(
    loc: list[str | int], rows: list[list[float]], max_rows: int, s: Settings
) -> None:
    _at_most(loc, f"the number of rows of {loc[-1]}", len(rows), max_rows, "MAX_DIM")
    widest = max((len(r) for r in rows), default=0)
    _at_most(loc, f"the width of {loc[-1]}", widest, s.max_dim, "MAX_DIM")


def check_embedding(loc: str, e: EmbeddingIn | None, settings: Settings) -> None:
    base: list[str | int] = ["body", loc]
    if isinstance(e, VocabularyEmbeddingIn):
        _at_most(
            [*base, "extra"],
            "the number of added words",
            len(e.extra),
            settings.max_vocabulary_words,
            "MAX_VOCABULARY_WORDS",
        )
        for word, vector in e.extra.items():
            check_printable([*base, "extra", word], word)
            _at_most(
                [*base, "extra", word],
                f"the width of {word!r}",
                len(vector),
                settings.max_dim,
                "MAX_DIM",
            )
            _at_most(
                [*base, "extra", word],
                f"the length of word {word[:20]!r}",
                len(word),
                settings.max_token_chars,
                "MAX_TOKEN_CHARS",
            )
    elif isinstance(e, ExplicitEmbeddingIn):
        rows = e.vectors
        _at_most(
            [*base, "vectors"],
            "the number of vectors",
            len(rows),
            settings.max_tokens,
            "MAX_TOKENS",
        )
        widest = max((len(r) for r in rows), default=0)
        _at_most([*base, "vectors"], "the vector width", widest, settings.max_dim, "MAX_DIM")
    elif isinstance(e, SeededRandomEmbeddingIn | HashedEmbeddingIn):
        _at_most([*base, "dim"], "the embedding dim", e.dim, settings.max_dim, "MAX_DIM")


def check_options(body: AttentionOptions, settings: Settings) -> None:
    """Every size in the shared options: heads, widths, matrices."""
    _at_most(["body", "num_heads"], "num_heads", body.num_heads, settings.max_heads, "MAX_HEADS")
    check_embedding("embedding", body.embedding, settings)
    p = body.projection
    if isinstance(p, ExplicitProjectionIn):
        for name in ("W_query", "W_key", "W_value", "W_out"):
            matrix = getattr(p, name)
            if matrix is not None:
                _check_matrix(["body", "projection", name], matrix, settings.max_dim, settings)
    elif hasattr(p, "d_out"):
        _at_most(
            ["body", "projection", "d_out"],
            "projection d_out",
            p.d_out,
            settings.max_dim,
            "MAX_DIM",
        )


def check_lesson(
    dims: list[int], trials: int, scores: list[float], scales: list[float], s: Settings
) -> None:
    """Bounds on the scaling lesson's query parameters."""
    _at_most(
        ["query", "dims"], "the number of dims", len(dims), s.max_lesson_dims, "MAX_LESSON_DIMS"
    )
    for i, d in enumerate(dims):
        if d < 1:
            raise LimitError(
                ["query", "dims", i],
                f"dims[{i}] is {d}; it must be at least 1",
                kind="greater_than_equal",
                ctx={"ge": 1},
            )
        _at_most(["query", "dims", i], f"dims[{i}]", d, s.max_lesson_dim, "MAX_LESSON_DIM")
    _at_most(["query", "trials"], "trials", trials, s.max_lesson_trials, "MAX_LESSON_TRIALS")
    _at_most(
        ["query", "trials"],
        "sum(dims) × trials",
        sum(dims) * trials,
        s.max_lesson_samples,
        "MAX_LESSON_SAMPLES",
    )
    _at_most(["query", "scores"], "the number of scores", len(scores), s.max_tokens, "MAX_TOKENS")
    _at_most(
        ["query", "scales"],
        "the number of scales",
        len(scales),
        s.max_lesson_dims,
        "MAX_LESSON_DIMS",
    )
    for name, values in (("scores", scores), ("scales", scales)):
        if not values:
            raise LimitError(
                ["query", name], f"{name} is empty; give at least one number", kind=EMPTY_INPUT
            )
        for i, v in enumerate(values):
            if not -1e6 <= v <= 1e6:  # also false for NaN
                raise LimitError(
                    ["query", name, i],
                    f"{name}[{i}] is {v}; it must be finite, within ±1e6",
                    kind="finite_number",
                )


def check_attention_request(body: AttentionRequest, settings: Settings) -> None:
    """Every size in a POST /api/attention (or /api/expand) body."""
    check_tokens("tokens", body.tokens, settings)
    check_tokens("source_tokens", body.source_tokens, settings)
    check_options(body, settings)
    check_embedding("source_embedding", body.source_embedding, settings)


ANSWER_CELLS_SETTING = "ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS"


def check_answer_cells(
    layers: int, maps_per_layer: int, shape: tuple[int, int], tokens: int, settings: Settings
) -> None:
    """A 422 on ``pool`` when an answer's maps (layers × maps × rows × cols, after pooling
    and the region) are over ``ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS``: on every path."""
    rows, cols = shape
    cells = layers * maps_per_layer * rows * cols
    limit = settings.model_max_answer_cells
    if cells > limit:
        raise over_limit(
            ["body", "pool"],
            f"the maps asked for are {cells} cells ({layers} layers × {maps_per_layer} "
            f"maps × {rows} × {cols}) of a {tokens}-token text; the limit is {limit} "
            f"({ANSWER_CELLS_SETTING}): ask with pool, a smaller rows/cols region, or fewer "
            "heads or layers",
            limit=limit,
            found=cells,
            setting=ANSWER_CELLS_SETTING,
        )
