"""Our own JS/CSS: always revalidated, so a deploy is seen at once.

The files import each other by plain relative paths (ES modules, no build
step), so their URLs cannot carry a content hash; ``no-cache`` plus the ETag
Starlette sets makes a repeat visit a cheap 304 per file.  The large
third-party assets (Plotly, Swagger UI) have versioned URLs and long caching
(``app.routes.assets``).
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope


class RevalidatedStaticFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["cache-control"] = "no-cache"
        return response
