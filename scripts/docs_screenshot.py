"""Take the docs' and README's picture: /model in headless Chromium, 1440 × 1300.

    .venv/bin/python scripts/docs_screenshot.py [--out docs/images/model-page.png]

Starts the app on a free port (devtools/server.py), opens /model with the shipped
tiny-bank-gpt on one of its stories, waits until every map of the grid is drawn and
writes the PNG.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from devtools.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from devtools.server import serving  # noqa: E402

TEXT = "she rowed the boat, then went to the bank of the river"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs/images/model-page.png")
    query = urlencode({"model": "tiny-bank-gpt", "text": TEXT})
    parser.add_argument("--path", default=f"/model?{query}")
    args = parser.parse_args()
    with serving() as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1300})
        page.goto(url + args.path)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(args.out))
        browser.close()
    print(args.out)


if __name__ == "__main__":
    main()
