"""One shape for every error: ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}``.

It is FastAPI's own validation-error shape, so clients handle one format;
``type`` is a stable name of the rule and ``ctx`` (when there is one) its numbers:
every size over a limit is ``limit_exceeded`` with ``ctx`` ``{limit, found, setting}``
(``setting`` is the ``ATTENTION_VIZ_*`` variable, or ``model_context``). Clients
word errors from those, never from ``msg``.
Starlette's plain-string HTTP errors (404, 405, unparsable bodies) are
rewritten into it. The one exception: a browser asking for a page that does not
exist gets an HTML 404 page (``app.not_found``).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from attention_core import SpecError
from attention_core.models import ModelNotFound

from .limits import LimitError
from .not_found import not_found_page, wants_html
from .settings import Settings

E = TypeVar("E", bound=Exception)

MAX_EXACT_INT = 2**53

UNPARSABLE_BODY = (
    "the body could not be parsed: it must be UTF-8 JSON, nested at most a few hundred levels deep"
)


def error_response(
    status: int,
    loc: list[str | int],
    msg: str,
    kind: str,
    headers: Mapping[str, str] | None = None,
    ctx: Mapping[str, Any] | None = None,
) -> Response:
    item: dict[str, Any] = {"loc": loc, "msg": msg, "type": kind}
    if ctx:
        item["ctx"] = _published_ctx(ctx)
    body = orjson.dumps({"detail": [item]})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _published_ctx(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """``ctx`` as JSON: finite numbers and short strings only (never a rejected input),
    and a limit's ``setting`` named as the variable that sets it."""
    out: dict[str, Any] = {}
    for key, value in ctx.items():
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            continue
        if isinstance(value, int) and abs(value) > MAX_EXACT_INT:
            value = float(value)  # JSON numbers past 2**53 (orjson refuses past 64 bits)
        if isinstance(value, str):
            value = value[:200]
        out[key] = value
    setting = out.get("setting")
    if isinstance(setting, str) and setting in Settings.model_fields:
        out["setting"] = f"ATTENTION_VIZ_{setting.upper()}"
    return out


def spec_error_loc(exc: SpecError) -> list[str | int]:
    return ["body", *(exc.field.split(".") if exc.field else [])]


def spec_error_response(exc: SpecError) -> Response:
    status = 404 if isinstance(exc, ModelNotFound) else 422
    return error_response(status, spec_error_loc(exc), exc.message, exc.kind, ctx=exc.ctx)


def limit_error_response(exc: LimitError) -> Response:
    return error_response(422, exc.loc, exc.message, exc.kind, ctx=exc.ctx)


def known_error_response(exc: Exception) -> Response | None:
    """The answer the handlers give ``exc`` raised inside a route, or None for a bug.

    For work that runs outside a route's return (a streamed answer's ``error`` event).
    """
    if isinstance(exc, SpecError):
        return spec_error_response(exc)
    if isinstance(exc, LimitError):
        return limit_error_response(exc)
    return None


async def _spec_error(_: Request, exc: SpecError) -> Response:
    return spec_error_response(exc)


async def _limit_error(_: Request, exc: LimitError) -> Response:
    return limit_error_response(exc)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
        return error_response(400, ["body"], UNPARSABLE_BODY, "body_unparsable")
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404 and wants_html(request):
        return not_found_page(request)
    if exc.status_code == 404 and message == "Not Found":
        message = f"nothing at {request.url.path}; see /docs for the API"
    kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return error_response(exc.status_code, ["path"], message, kind, exc.headers)


def _validation_message(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    if kind == "finite_number":
        return "Input should be a finite number within ±1e6 (NaN and Infinity are not allowed)"
    if kind == "json_invalid":
        reason = (error.get("ctx") or {}).get("error", "invalid JSON")
        return f"the body is not valid JSON: {reason} at character {error['loc'][-1]}"
    return str(error.get("msg"))


def validation_item(error: Mapping[str, Any], prefix: Sequence[str | int] = ()) -> dict[str, Any]:
    """One pydantic error as loc/msg/type and its ``ctx`` (the rule's bounds, e.g. ``ge``).

    The rejected input is not echoed back (it may be NaN, which plain JSON cannot
    carry, or megabytes long).
    """
    item: dict[str, Any] = {
        "loc": [*prefix, *error.get("loc", ())],
        "msg": _validation_message(error),
        "type": error.get("type"),
    }
    ctx = _published_ctx(error.get("ctx") or {})
    if ctx:
        item["ctx"] = ctx
    return item


async def _validation_error(_: Request, exc: RequestValidationError) -> Response:
    detail = [validation_item(e) for e in exc.errors()]
    return Response(orjson.dumps({"detail": detail}), 422, media_type="application/json")


def _add_handler(
    app: FastAPI, kind: type[E], handler: Callable[[Request, E], Awaitable[Response]]
) -> None:
    """Register ``handler`` for ``kind``, with the pairing checked by the type checker.

    Starlette types every handler as taking any ``Exception``; it calls this one
    only for ``kind`` and its subclasses, which the wrapper narrows to.
    """

    async def narrowed(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, kind):
            raise exc
        return await handler(request, exc)

    app.add_exception_handler(kind, narrowed)


INTERNAL_ERROR = "the server failed to answer this request; the error is in its log"


async def _internal_error(_: Request, exc: Exception) -> Response:
    # Starlette's ServerErrorMiddleware calls this for any unhandled exception, then
    # re-raises it (the server logs the traceback); the client sees only this sentence.
    return error_response(500, [], INTERNAL_ERROR, "internal_error")


def install_error_handlers(app: FastAPI) -> None:
    _add_handler(app, RequestValidationError, _validation_error)
    _add_handler(app, SpecError, _spec_error)
    _add_handler(app, LimitError, _limit_error)
    _add_handler(app, HTTPException, _http_error)
    _add_handler(app, Exception, _internal_error)
