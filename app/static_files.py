"""Our own JS/CSS, served from memory under content-versioned URLs.

The modules import each other by plain relative paths (ES modules, no build
step). The pages still give every file a versioned URL, ``/static/js/x.js?v=<hash
of its bytes>``, through an import map (``import_map()``, inlined in base.html and
allowed by its hash in the CSP): a relative import resolves to
``/static/js/x.js``, which the map sends to the versioned URL. A versioned URL
whose hash is current is cached for good (``immutable``), so a second visit asks
the server for none of them; any other request (no ``v``, an old ``v``, the model
page's worker) is ``no-cache`` with an ETag, so a deploy is seen at once.

Files are read, hashed and gzip-compressed once and kept in memory; a changed
modification time (an edit while the server runs) reloads a file. Each page
also lists its whole module graph (``module_graph``) as ``<link
rel="modulepreload">``, so on a first visit no import waits for its parent.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import mimetypes
import re
import stat
from base64 import b64encode
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import parse_qs

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from .paths import STATIC_DIR

JS_DIR = STATIC_DIR / "js"
STATIC_URL = "/static/"
IMMUTABLE = "public, max-age=31536000, immutable"
# Static imports: `import ... from "./x.js"`, `export ... from "./x.js"`, `import "./x.js"`.
_IMPORT = re.compile(r"""^\s*(?:import|export)\b[^"';]*?["'](\./[\w./-]+\.js)["']""", re.MULTILINE)
_MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".json": "application/json"}
_COMPRESSIBLE = {".js", ".css", ".json", ".svg", ".html", ".txt"}


@dataclass(frozen=True)
class Asset:
    raw: bytes
    gzipped: bytes | None
    version: str  # the first 12 hex digits of the bytes' sha256
    media_type: str | None
    mtime_ns: int

    @property
    def etag(self) -> str:
        return f'"{self.version}"'


_assets: dict[Path, Asset] = {}


def asset(path: Path) -> Asset:
    """The file's bytes, gzip and version, read again only when its mtime changes."""
    mtime_ns = path.stat().st_mtime_ns
    cached = _assets.get(path)
    if cached is not None and cached.mtime_ns == mtime_ns:
        return cached
    raw = path.read_bytes()
    packed = None
    if path.suffix in _COMPRESSIBLE and len(raw) > 512:
        packed = gzip.compress(raw, compresslevel=9, mtime=0)
    entry = Asset(
        raw=raw,
        gzipped=packed,
        version=hashlib.sha256(raw).hexdigest()[:12],
        media_type=_MEDIA_TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0],
        mtime_ns=mtime_ns,
    )
    _assets[path] = entry
    return entry


@cache
def versioned_url(relative: str) -> str:
    """``/static/<relative>?v=<hash>``: the URL the pages use for one of our files.

    Fixed for the process's life, like the import map and the CSP hash that allows
    it; a file edited later is still served fresh (its old ``v`` is not current, so
    the answer is ``no-cache``)."""
    return f"{STATIC_URL}{relative}?v={asset(STATIC_DIR / relative).version}"


@cache
def import_map() -> str:
    """The pages' import map: every module's plain URL to its versioned one."""
    names = sorted(p.name for p in JS_DIR.glob("*.js"))
    imports = {f"{STATIC_URL}js/{name}": versioned_url(f"js/{name}") for name in names}
    return json.dumps({"imports": imports}, separators=(",", ":"))


def import_map_csp_source() -> str:
    """The CSP source that allows exactly this import map inline: ``'sha256-…'``."""
    digest = hashlib.sha256(import_map().encode()).digest()
    return f"'sha256-{b64encode(digest).decode()}'"


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


def _header(scope: Scope, wanted: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    for name, value in headers:
        if name == wanted:
            return value.decode("latin-1")
    return None


def _accepts_gzip(scope: Scope) -> bool:
    return "gzip" in (_header(scope, b"accept-encoding") or "")


class RevalidatedStaticFiles(StaticFiles):
    """StaticFiles' path handling and 404s, with the bytes and headers described above."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            full_path, stat_result = self.lookup_path(path)
        except (OSError, ValueError):  # a NUL byte, a name too long: StaticFiles answers 404
            full_path, stat_result = "", None
        # Directories and anything but a regular file: StaticFiles' 404 (html mode is off).
        if (
            stat_result is None
            or not stat.S_ISREG(stat_result.st_mode)
            or scope["method"] not in ("GET", "HEAD")
        ):
            return await super().get_response(path, scope)
        entry = asset(Path(full_path))
        wanted = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("v", [""])[0]
        headers = {
            "etag": entry.etag,
            "cache-control": IMMUTABLE if wanted == entry.version else "no-cache",
            "vary": "accept-encoding",
        }
        match = _header(scope, b"if-none-match")
        if match is not None and entry.etag in [m.strip() for m in match.split(",")]:
            return Response(status_code=304, headers=headers)
        body = entry.raw
        if entry.gzipped is not None and _accepts_gzip(scope):
            body = entry.gzipped
            headers["content-encoding"] = "gzip"
        if scope["method"] == "HEAD":
            headers["content-length"] = str(len(body))
            return Response(status_code=200, headers=headers, media_type=entry.media_type)
        return Response(body, headers=headers, media_type=entry.media_type)
