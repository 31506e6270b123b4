"""An HTML 404 page for browsers; API clients keep the JSON error shape.

A request gets the HTML page only when it is not under ``/api/`` and its Accept
header names ``text/html`` (what a browser sends for a page). JSON clients,
curl's ``*/*`` and everything under ``/api/`` get ``{"detail": [...]}``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response


def wants_html(request: Request) -> bool:
    if request.url.path == "/api" or request.url.path.startswith("/api/"):
        return False
    return "text/html" in request.headers.get("accept", "").lower()


def not_found_page(request: Request) -> Response:
    from .templating import templates  # the pages' environment; imported late: it imports routes

    return templates.TemplateResponse(
        request=request,
        name="404.html",
        context={"page": "", "title": "Page not found", "path": request.url.path},
        status_code=404,
    )
