"""Vendor Plotly's partial bundle: fetch it with ``npm pack``, verify it, write it.

    .venv/bin/python scripts/fetch_plotly.py [--check]

Runs ``npm pack plotly.js-cartesian-dist-min@<version>`` in a temporary
directory (npm's own registry client and settings), then checks, before
writing anything:

1. the tarball's sha512 against the pinned npm ``dist.integrity``;
2. the bundle file's sha256 against the pinned ``PARTIAL_SHA256``;
3. that its header names the pinned version.

Only then is it written to ``app/vendor/plotly-cartesian-<version>.min.js``.
The pins live in ``app/plotly_bundle.py``; to move to a new version, change
``PARTIAL_VERSION`` and ``PARTIAL_TARBALL_INTEGRITY`` (from ``npm view
<package>@<version> dist.integrity``), run with ``--print-sha256`` and pin the
printed hash. ``--check`` verifies the vendored file without the network.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import plotly_bundle as pins  # noqa: E402


def sha512_integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def npm_pack(spec: str) -> bytes:
    """The tarball ``npm pack`` downloads for ``spec``."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            ["npm", "pack", spec, "--silent", "--pack-destination", tmp],
            check=True,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if len(tarballs) != 1:
            raise SystemExit(f"npm pack left {len(tarballs)} tarballs, expected one")
        return tarballs[0].read_bytes()


def bundle_from_tarball(tarball: bytes) -> bytes:
    member = f"package/{pins.PARTIAL_FILE_IN_TARBALL}"
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        f = tar.extractfile(member)
        if f is None:
            raise SystemExit(f"{member} is not a file in the tarball")
        return f.read()


def verify_bundle(data: bytes) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != pins.PARTIAL_SHA256:
        raise SystemExit(f"sha256 {digest} != pinned {pins.PARTIAL_SHA256}")
    match = pins.VERSION_HEADER.search(data[:512])
    if match is None or match.group(1).decode() != pins.PARTIAL_VERSION:
        raise SystemExit(f"the bundle's header does not say v{pins.PARTIAL_VERSION}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify the vendored file only")
    parser.add_argument(
        "--print-sha256", action="store_true", help="verify the tarball, print the file's sha256"
    )
    args = parser.parse_args()
    if args.check:
        verify_bundle(pins.PARTIAL_PATH.read_bytes())
        print(f"{pins.PARTIAL_PATH.relative_to(ROOT)}: sha256 matches the pin")
        return
    spec = f"{pins.PARTIAL_PACKAGE}@{pins.PARTIAL_VERSION}"
    tarball = npm_pack(spec)
    integrity = sha512_integrity(tarball)
    if integrity != pins.PARTIAL_TARBALL_INTEGRITY:
        raise SystemExit(
            f"{spec}: integrity {integrity} != pinned {pins.PARTIAL_TARBALL_INTEGRITY}"
        )
    data = bundle_from_tarball(tarball)
    if args.print_sha256:
        print(hashlib.sha256(data).hexdigest())
        return
    verify_bundle(data)
    pins.PARTIAL_PATH.parent.mkdir(parents=True, exist_ok=True)
    tmp = pins.PARTIAL_PATH.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(pins.PARTIAL_PATH)
    print(f"wrote {pins.PARTIAL_PATH.relative_to(ROOT)} ({len(data):,} bytes), hashes verified")


if __name__ == "__main__":
    main()
