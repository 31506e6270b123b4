"""Which Plotly.js bundle the pages load, and under which versioned URL.

The pages need only heatmap, scatter and bar traces, which Plotly's official
partial bundle ``plotly.js-cartesian-dist-min`` holds in a third of the full
bundle's bytes (and a third of its parse time). It is vendored under
``app/vendor/`` by ``scripts/fetch_plotly.py``, pinned here by version and by two
hashes: the npm tarball's ``dist.integrity`` and the file's own sha256. The
version is the one the ``plotly`` Python package ships, so the figures are
drawn by the same Plotly.js either way.

When the vendored file is missing (a checkout that dropped it), the pages fall
back to the ``plotly`` package's full bundle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .paths import PLOTLY_PACKAGE_JS, VENDOR_DIR

PARTIAL_PACKAGE = "plotly.js-cartesian-dist-min"
PARTIAL_VERSION = "4.1.1"
# The file inside the npm tarball (under its ``package/`` folder).
PARTIAL_FILE_IN_TARBALL = "plotly-cartesian.min.js"
# npm's ``dist.integrity`` of the tarball (``npm view plotly.js-cartesian-dist-min@4.1.1 dist``).
PARTIAL_TARBALL_INTEGRITY = (
    "sha512-o8GrFeusncwBIxbBynRJpY4pkgVB6caM+JLpwrLYbbsO7dZ8FJ+SVN2Fr+L7kiG/"
    "Z6w4P5O0Jus/Qr5EefHVeg=="
)
PARTIAL_SHA256 = "79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a"
PARTIAL_NAME = f"plotly-cartesian-{PARTIAL_VERSION}.min.js"
PARTIAL_PATH = VENDOR_DIR / PARTIAL_NAME

# "plotly.js v4.1.1" or "plotly.js (cartesian - minified) v4.1.1" in the first comment.
VERSION_HEADER = re.compile(rb"plotly\.js[^\n]*? v(\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class PlotlyBundle:
    path: Path
    # The versioned file name served under /vendor/: it changes whenever the bytes do.
    name: str
    version: str
    partial: bool


def package_bundle_version(path: Path = PLOTLY_PACKAGE_JS) -> str:
    """The Plotly.js version in the header comment of the plotly package's bundle."""
    with path.open("rb") as f:
        match = VERSION_HEADER.search(f.read(512))
    if match is None:
        raise RuntimeError(f"no 'plotly.js vX.Y.Z' header in {path}")
    return match.group(1).decode()


def choose(partial: Path | None = None, package_js: Path | None = None) -> PlotlyBundle:
    """The vendored partial bundle if present, else the plotly package's full one."""
    partial = PARTIAL_PATH if partial is None else partial
    if partial.is_file():
        return PlotlyBundle(partial, PARTIAL_NAME, PARTIAL_VERSION, partial=True)
    package_js = PLOTLY_PACKAGE_JS if package_js is None else package_js
    version = package_bundle_version(package_js)
    return PlotlyBundle(package_js, f"plotly-{version}.min.js", version, partial=False)


@cache
def current() -> PlotlyBundle:
    return choose()
