"""/docs on a phone: laid out for the device's width, with the site's header to go back."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e


def test_docs_fits_a_phone_and_links_back_to_the_app(page: Page) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_be_visible()
    # Without a viewport meta, a phone lays the page out 980 px wide.
    assert page.evaluate("window.innerWidth") == 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    nav = page.get_by_role("navigation", name="Pages")
    expect(nav.get_by_role("link", name="API docs")).to_have_attribute("aria-current", "page")
    nav.get_by_role("link", name="Explorer").click()
    page.wait_for_url("**/")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
