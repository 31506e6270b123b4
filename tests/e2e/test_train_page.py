"""/train in headless Chromium: the ladder fills the form, a run streams into the page
(progress bar, loss curve, attention snapshots, sample), the slider scrubs back through
training, Stop ends the run on the server, and errors show beside their field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from devtools.server import start_server, stop_server
from tests.e2e.conftest import plot_data
from tests.processes import exited, workers_of

pytestmark = pytest.mark.e2e

TINY = "n_layer=1&n_head=2&n_embd=16&block_size=16&batch_size=8"


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def train_server(runs_dir: Path) -> Iterator[tuple[str, int]]:
    env = {
        "ATTENTION_VIZ_RUNS_DIR": str(runs_dir),
        "ATTENTION_VIZ_TRAIN_NICE": "0",
        "ATTENTION_VIZ_TRAIN_CONCURRENT": "2",
    }
    url, process = start_server(env)
    try:
        yield url, process.pid
    finally:
        stop_server(process)


@pytest.fixture(scope="module")
def server_url(train_server: tuple[str, int]) -> str:
    """The page fixture's server: this module's, with a runs directory of its own."""
    return train_server[0]


def test_the_ladder_fills_the_form(page: Page) -> None:
    page.goto("/train")
    steps = page.locator("[data-testid='ladder'] button")
    expect(steps).to_have_text(
        [
            "1 · Bigram",
            "2 · Average the past",
            "3 · One head",
            "4 · Several heads",
            "5 · GPT blocks",
        ]
    )
    expect(page.get_by_test_id("arch-gpt")).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_test_id("n_layer")).to_have_value("2")
    page.get_by_test_id("arch-multi_head").click()
    expect(page.get_by_test_id("n_layer")).to_have_value("1")
    expect(page.get_by_test_id("n_layer")).to_be_disabled()
    expect(page.get_by_test_id("n_head")).to_have_value("4")
    expect(page.get_by_test_id("n_head")).to_be_enabled()
    page.get_by_test_id("arch-bigram").click()
    expect(page.get_by_test_id("n_layer")).to_have_value("0")
    expect(page.get_by_test_id("n_head")).to_be_disabled()
    assert "arch=bigram" in page.url
    page.get_by_test_id("source-paste").check()
    expect(page.get_by_test_id("text")).to_be_visible()
    expect(page.get_by_test_id("corpus-excerpt")).to_be_hidden()


# Chromium reports a no-store fetch stream read to its end as ERR_ABORTED (playwright#42742).
@pytest.mark.allow_console(r"/api/train \(net::ERR_ABORTED\)")
def test_a_run_streams_into_the_page_and_the_slider_scrubs(page: Page, runs_dir: Path) -> None:
    page.goto(f"/train?arch=gpt&{TINY}&max_steps=60")
    page.get_by_test_id("train-start").click()
    progress = page.get_by_test_id("train-progress")
    expect(page.get_by_test_id("train-stop")).to_be_enabled()
    # The bar moves: some step strictly between the start and the end is shown.
    page.wait_for_function(
        "() => { const p = document.querySelector(\"[data-testid='train-progress']\");"
        " return p.max == 60 && p.value > 0 && p.value < 60; }"
    )
    expect(page.get_by_test_id("train-done")).to_be_visible(timeout=120_000)
    expect(progress).to_have_attribute("value", "60")
    expect(page.get_by_test_id("train-status")).to_contain_text("Done in")
    # One final figure: the bar's line gives the last evaluation, the one the status gives.
    status = page.get_by_test_id("train-status").text_content() or ""
    final = status.split("val loss ")[1].split(" ")[0]
    expect(page.get_by_test_id("progress-text")).to_have_text(
        f"Step 60 / 60 · finished · val loss {final} at step 60"
    )
    name = page.get_by_test_id("model-name").text_content()
    assert name and (runs_dir / name / "model.safetensors").is_file()
    expect(page.get_by_test_id("open-model")).to_have_attribute("href", f"/model?model={name}")

    # Snapshots at steps 0, 25, 50 and 60; the slider follows the newest.
    slider = page.get_by_test_id("snapshot-slider")
    expect(slider).to_have_attribute("max", "3")
    expect(page.get_by_test_id("snapshot-step")).to_have_text("60")
    expect(page.locator("[data-testid='attn-grid'] canvas")).to_have_count(2)
    late = plot_data(page, "zoom-plot")
    slider.fill("0")  # scrub back to the untrained model
    expect(page.get_by_test_id("snapshot-step")).to_have_text("0")
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 1, head 1 after step 0")
    page.wait_for_function(
        "old => JSON.stringify(document.querySelector(\"[data-testid='zoom-plot']\").data[0].z)"
        " !== old",
        arg=__import__("json").dumps(late),
    )
    early = plot_data(page, "zoom-plot")
    # The probe's spaces are labelled ␣·position, as on /model (one helper, labels.js).
    labels = page.evaluate(
        "() => document.querySelector(\"[data-testid='zoom-plot']\").layout.yaxis.ticktext"
    )
    assert "␣·" in " ".join(labels) and " ·" not in " ".join(labels), labels
    # Untrained: every row nearly uniform over the past (row 3 ≈ 1/4 each), future masked.
    assert early[3][4] is None and abs(early[3][0] - 0.25) < 0.05
    # That snapshot's head scores: a layer × head grid; a head there opens its map.
    expect(page.get_by_test_id("train-score-grid")).to_have_attribute("data-step", "0")
    cells = page.locator("[data-testid='train-score-grid'] .hg-cell")
    expect(cells).to_have_count(2)
    page.get_by_test_id("train-score").select_option("entropy")
    uniform = sum(__import__("math").log(i + 1) for i in range(16)) / 16  # rows over the past
    assert abs(float(cells.first.get_attribute("data-value") or "nan") - uniform) < 0.1
    page.get_by_test_id("train-score-cells-L1-H2").click()
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 1, head 2 after step 0")
    page.get_by_test_id("map-1-1").click()
    page.get_by_test_id("map-1-2").click()
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 1, head 2 after step 0")
    # On a phone the probe's map fits its panel, every drawn label inside it (issue 24.6).
    page.set_viewport_size({"width": 390, "height": 844})
    zoom = page.get_by_test_id("zoom-plot")
    page.wait_for_function(
        "() => { const d = document.querySelector(\"[data-testid='zoom-plot']\");"
        " const f = d.querySelector('.quick-svg, .main-svg');"
        " return f && f.getBoundingClientRect().width <= d.clientWidth + 1; }"
    )
    assert zoom.evaluate("d => d.scrollWidth <= d.clientWidth + 1")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    clipped = zoom.evaluate(
        "d => { const b = d.getBoundingClientRect(); return [...d.querySelectorAll('text')]"
        ".filter(t => { const r = t.getBoundingClientRect();"
        " return r.width && (r.left < b.left - 1 || r.right > b.right + 1); }).length; }"
    )
    assert clipped == 0
    page.set_viewport_size({"width": 1280, "height": 900})
    # The loss curve has the val points and the bigram line.
    names = page.evaluate(
        "() => document.querySelector(\"[data-testid='loss-plot']\").data.map(t => t.name)"
    )
    assert names == ["batch", "train", "val", "bigram baseline"]
    assert plot_data(page, "loss-plot", trace=2, field="x") == [0, 50, 60]
    expect(page.get_by_test_id("sample-step")).to_have_text("after step 60")

    # One click opens the trained model on /model, picked in its list.
    page.get_by_test_id("open-model").click()
    page.wait_for_url(f"**/model?model={name}")
    expect(page.get_by_test_id("model-pick")).to_have_value(name)


@pytest.mark.allow_console(r"/api/train \(net::ERR_ABORTED\)")  # Stop aborts the fetch
def test_stop_ends_the_run_on_the_server(page: Page, train_server: tuple[str, int]) -> None:
    _, server_pid = train_server
    page.goto(f"/train?arch=gpt&{TINY}&max_steps=5000")
    page.get_by_test_id("train-start").click()
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='train-progress']\").value >= 3"
    )
    (worker,) = workers_of(server_pid)
    page.get_by_test_id("train-stop").click()
    expect(page.get_by_test_id("train-status")).to_contain_text("Stopped at step")
    # No time left is promised after Stop.
    expect(page.get_by_test_id("progress-text")).to_contain_text("· stopped")
    expect(page.get_by_test_id("progress-text")).not_to_contain_text("left")
    expect(page.get_by_test_id("train-start")).to_be_enabled()
    # The stopped run's process exits: waited for on its exit (the bound only fails it).
    assert exited(worker)
    assert workers_of(server_pid) == []


@pytest.mark.allow_console("422|Unprocessable")
def test_errors_show_beside_their_field(page: Page) -> None:
    page.goto(f"/train?arch=gpt&{TINY}")
    page.get_by_test_id("source-paste").check()
    page.get_by_test_id("text").fill("too short")
    page.get_by_test_id("train-start").click()
    expect(page.get_by_test_id("error-text")).to_contain_text(
        "text is 9 characters; with block_size 16 it must be at least 34"
    )
    page.get_by_test_id("source-file").check()
    page.get_by_test_id("file").set_input_files(
        files=[
            {
                "name": "latin1.txt",
                "mimeType": "text/plain",
                "buffer": "café ".encode("latin-1") * 50,
            }
        ]
    )
    page.get_by_test_id("train-start").click()
    expect(page.get_by_test_id("error-text")).to_contain_text(
        "the file 'latin1.txt' is not UTF-8 text: byte 0xe9 at offset 3"
    )
    page.get_by_test_id("source-corpus").check()
    page.get_by_test_id("n_embd").fill("30")
    page.get_by_test_id("n_head").fill("4")
    page.get_by_test_id("train-start").click()
    # Worded from the error's type and ctx ({width, heads}), never from its sentence.
    expect(page.get_by_test_id("error-sizes")).to_have_text(
        "4 heads cannot split n_embd of 30 evenly: choose 1, 2, 3, 5, 6, 10 or 15 heads, "
        "or change n_embd."
    )
    expect(page.get_by_test_id("train-status")).to_have_text("Not started.")
