"""The one exception type of the package, and its kind for sizes over a limit."""

from __future__ import annotations

from collections.abc import Mapping

# What an error's ``ctx`` may hold: plain numbers and short strings, so that a web
# layer can hand it on as JSON and a page can word the error itself.
Ctx = Mapping[str, int | float | str]

# The ``setting`` of a limit that the model itself sets (its context, in positions),
# and of the server's lower one per model input (the ``model_max_tokens`` setting).
MODEL_CONTEXT = "model_context"
MODEL_MAX_TOKENS = "model_max_tokens"

# Stable kinds (``SpecError.kind``) of the rules a page words itself.
EMPTY_INPUT = "empty_input"
PAIR_NEEDS_ENCODER = "pair_needs_encoder"
HEADS_INDIVISIBLE = "heads_indivisible"


class SpecError(ValueError):
    """A spec or a tensor argument breaks a rule.

    ``field`` names the offending input (``"tokens"``, ``"projection.W_key"``, …)
    so that a web layer can point at it; the message names the value and the rule.
    ``kind`` is a stable name of the rule (a client words the error from it and
    ``ctx``, never from the message).
    """

    kind = "spec_error"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        kind: str | None = None,
        ctx: Ctx | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        if kind is not None:
            self.kind = kind
        self.ctx: dict[str, int | float | str] = dict(ctx or {})


class LimitExceeded(SpecError):
    """A size over a limit: ``ctx`` holds ``limit``, ``found`` and ``setting`` (what sets
    the limit: an ``ATTENTION_VIZ_*`` setting or ``MODEL_CONTEXT``), and maybe more."""

    kind = "limit_exceeded"

    def __init__(
        self,
        message: str,
        *,
        field: str,
        limit: int,
        found: int,
        setting: str,
        extra: Ctx | None = None,
    ) -> None:
        ctx = {"limit": limit, "found": found, "setting": setting, **(extra or {})}
        super().__init__(message, field=field, ctx=ctx)
