"""Third-party assets served by this server, so the pages work offline.

plotly.min.js comes from the installed ``plotly`` package and the Swagger UI
files from ``swagger-ui-bundle``; both are read and gzip-compressed once.
"""

from __future__ import annotations

import gzip
from functools import cache
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request, Response

from ..paths import PLOTLY_JS, SWAGGER_UI_DIR

router = APIRouter(include_in_schema=False)
# Not content-hashed URLs, so cached for a day rather than for good.
DAY = "public, max-age=86400"
SWAGGER_FILES = {"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"}
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


@cache
def _compressed(path: Path) -> tuple[bytes, bytes]:
    raw = path.read_bytes()
    return raw, gzip.compress(raw, compresslevel=9, mtime=0)


def _serve(request: Request, path: Path, cache_control: str) -> Response:
    raw, packed = _compressed(path)
    media_type = MEDIA_TYPES[path.suffix]
    headers = {"cache-control": cache_control, "vary": "accept-encoding"}
    if "gzip" in request.headers.get("accept-encoding", "") and path.suffix != ".png":
        headers["content-encoding"] = "gzip"
        return Response(packed, media_type=media_type, headers=headers)
    return Response(raw, media_type=media_type, headers=headers)


@router.get("/vendor/plotly.min.js", name="plotly_js")
async def plotly_js(request: Request) -> Response:
    return _serve(request, PLOTLY_JS, DAY)


@router.get("/vendor/swagger-ui/{name}", name="swagger_asset")
async def swagger_asset(request: Request, name: str) -> Response:
    if name not in SWAGGER_FILES:
        raise HTTPException(404, f"no Swagger UI asset named {name!r}")
    return _serve(request, SWAGGER_UI_DIR / name, DAY)


def warm_up() -> None:
    """Compress the big assets now rather than on the first page load."""
    _compressed(PLOTLY_JS)
    _compressed(SWAGGER_UI_DIR / "swagger-ui-bundle.js")
