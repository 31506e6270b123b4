"""Editing numbers in the explorer can be taken back: Undo the last edit, Reset them all,
back to the example as it was (issue 24.9)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import plot_data
from tests.e2e.explorer_page import open_explorer, wait_ready

pytestmark = pytest.mark.e2e


def edit_cell(page: Page, label: str, value: str) -> None:
    before = plot_data(page, "plot-q")
    cell = page.get_by_label(label)
    cell.fill(value)
    cell.press("Enter")
    page.wait_for_function(
        "before => JSON.stringify(document.querySelector("
        "\"[data-testid='plot-q']\").data[0].z) !== JSON.stringify(before)",
        arg=before,
    )
    wait_ready(page)


def test_undo_and_reset_take_number_edits_back(page: Page) -> None:
    open_explorer(page)
    example_url = page.url
    q0 = plot_data(page, "plot-q")
    undo, reset = page.get_by_test_id("grid-undo"), page.get_by_test_id("grid-reset")
    expect(undo).to_be_disabled()
    expect(reset).to_be_disabled()
    edit_cell(page, "W_query row 1 (in0) column 2", "2")
    q1 = plot_data(page, "plot-q")
    edit_cell(page, "W_query row 2 (in1) column 1", "-3")
    assert "~explicit~" in page.url
    expect(page.get_by_test_id("grid-history")).to_have_text("2 numbers changed")
    # Undo: the first edit stays, the second goes.
    undo.click()
    page.wait_for_function(
        "q => JSON.stringify(document.querySelector(\"[data-testid='plot-q']\").data[0].z)"
        " === JSON.stringify(q)",
        arg=q1,
    )
    wait_ready(page)
    expect(page.get_by_label("W_query row 2 (in1) column 1")).to_have_value("0")
    expect(page.get_by_label("W_query row 1 (in0) column 2")).to_have_value("2")
    expect(page.get_by_test_id("grid-history")).to_have_text("1 number changed")
    # Reset: the example as it came, with its own URL and its button pressed again.
    edit_cell(page, "W_query row 3 (in2) column 3", "5")
    reset.click()
    page.wait_for_function(
        "q => JSON.stringify(document.querySelector(\"[data-testid='plot-q']\").data[0].z)"
        " === JSON.stringify(q)",
        arg=q0,
    )
    wait_ready(page)
    assert page.url == example_url
    expect(page.locator(".preset[aria-pressed='true']")).to_have_count(1)
    expect(undo).to_be_disabled()
    expect(reset).to_be_disabled()
    expect(page.get_by_test_id("grid-history")).to_have_text("")
