"""The browser for e2e tests and benches: Debian's Chromium, kept off the network.

``playwright install`` cannot download browsers here, so Playwright launches
``CHROMIUM`` (``CHROMIUM_PATH`` overrides it) with ``CHROMIUM_ARGS``:
``p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)``.
"""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
