"""The docs site's Python API page, as a reader opens it: `compare` is documented.

`attention_core.compare` is both a submodule and the function it exports; the
page's member list once resolved the name to the module and left the function out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def test_python_api_page_documents_compare(browser: Browser, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
    )
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.goto((site / "python-api" / "index.html").as_uri())
    heading = page.locator("[id='attention_core.compare.compare']")
    expect(heading).to_contain_text("compare")
    # The function's own docstring and signature, not the module's.
    expect(heading).to_contain_text("tokens_b")
    entry = heading.locator("xpath=..")
    expect(entry).to_contain_text("the shift of every shared token")
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        heading.scroll_into_view_if_needed()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"python_api_compare_{width}.png"))
    context.close()
