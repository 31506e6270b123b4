"""Our own JS/CSS: always revalidated, so a deploy is seen at once.

The files import each other by plain relative paths (ES modules, no build
step), so their URLs cannot carry a content hash; ``no-cache`` plus the ETag
Starlette sets makes a repeat visit a cheap 304 per file. What makes the first
visit fast instead is that no import waits for its parent: every page lists its
whole module graph as ``<link rel="modulepreload">`` (``module_graph``), so the
browser asks for all of them at once. The large third-party assets (Plotly,
Swagger UI) have versioned URLs and long caching (``app.routes.assets``).
"""

from __future__ import annotations

import re
from functools import cache

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from .paths import STATIC_DIR

JS_DIR = STATIC_DIR / "js"
# Static imports: `import ... from "./x.js"`, `export ... from "./x.js"`, `import "./x.js"`.
_IMPORT = re.compile(r"""^\s*(?:import|export)\b[^"';]*?["'](\./[\w./-]+\.js)["']""", re.MULTILINE)


class RevalidatedStaticFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["cache-control"] = "no-cache"
        return response


@cache
def module_graph(entry: str) -> tuple[str, ...]:
    """Every module ``static/js/<entry>`` imports, directly or not (paths under js/), in
    breadth-first order, the entry excluded. Dynamic imports and workers are not followed."""
    seen: list[str] = []
    queue = [entry]
    while queue:
        name = queue.pop(0)
        path = JS_DIR / name
        if not path.is_file():
            continue
        for spec in _IMPORT.findall(path.read_text(encoding="utf-8")):
            child = (path.parent / spec).resolve().relative_to(JS_DIR.resolve()).as_posix()
            if child != entry and child not in seen:
                seen.append(child)
                queue.append(child)
    return tuple(seen)
