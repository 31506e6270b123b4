"""/model with decoders: the picker, masked maps, generation, one token's row in every
head, a head step by step in the explorer, errors beside their fields, 390 px.

A server of its own (module scope) lists the built-in MiniLM and small random GPT-2
checkpoints made here (``tests/models/checkpoints.py``), through ``ATTENTION_VIZ_MODELS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.conftest import api, plot_data, tick_texts, wait_for_plot
from tests.e2e.servers import models_server
from tests.models.checkpoints import make_gpt2, make_llama, metaspace_tokenizer, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.model]

UINT8_ERROR = 1 / 510
MAX_NEW_TOKENS = 60  # above a tiny model's context, so both limits can be met
# name -> (layers, heads); n_positions 48 (tests/models/checkpoints.py)
DECODERS = {"tiny-gpt2": (2, 4), "tiny-gpt2-deep": (3, 2), "tiny-gpt2-unk": (2, 4)}
CONTEXT = 48
TEXT = "The bank approved the loan because the river"
PROMPT = "The dog ran in the park because"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("page-models")
    make_gpt2(root / "tiny-gpt2")
    make_gpt2(root / "tiny-gpt2-deep", seed=3, n_layer=3, n_head=2)
    # A SentencePiece-style vocabulary with <unk> (no byte fallback), as some Llama-family
    # tokenizers have: characters it lacks become <unk>.
    make_gpt2(root / "tiny-gpt2-unk", seed=5)
    metaspace_tokenizer().save(str(root / "tiny-gpt2-unk" / "tokenizer.json"))
    make_llama(root / "tiny-llama")  # RoPE, 4 query heads on 2 kv heads
    write_config(root / "tiny-t5", {"model_type": "t5", "is_encoder_decoder": True})
    return root


@pytest.fixture(scope="module")
def server_url(models_dir: Path) -> Iterator[str]:
    """Overrides the session server for this module: one that also lists the decoders."""
    with models_server(models_dir, ATTENTION_VIZ_MAX_NEW_TOKENS=str(MAX_NEW_TOKENS)) as url:
        yield url


# ---------- helpers ----------


def query(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def wait_for_grid(page: Page, layers: int, heads: int, tokens: int | None = None) -> None:
    grid = page.get_by_test_id("head-grid")
    expect(grid).to_have_attribute("data-drawn", str(layers * (heads + 2)), timeout=WAIT)
    if tokens is not None:
        expect(grid).to_have_attribute("data-tokens", str(tokens), timeout=WAIT)
        expect(page.get_by_test_id("zoom-plot")).to_have_attribute(
            "data-tokens", str(tokens), timeout=WAIT
        )
    wait_for_plot(page, "zoom-plot")


def attention(server_url: str, model: str, text: str, **extra: Any) -> dict[str, Any]:
    return api(server_url, "/api/model/attention", {"model": model, "text": text, **extra})


def generation(server_url: str, **body: Any) -> dict[str, Any]:
    return api(server_url, "/api/model/generate", body)


def assert_rows_close(actual: list[list[float | None]], expected: list[list[float]]) -> None:
    assert len(actual) == len(expected)
    for i, (row_a, row_e) in enumerate(zip(actual, expected, strict=True)):
        assert len(row_a) == len(row_e), (i, len(row_a), len(row_e))
        for j, (a, e) in enumerate(zip(row_a, row_e, strict=True)):
            assert a is not None and abs(a - e) <= UINT8_ERROR + 1e-6, (i, j, a, e)


def assert_causal_map(z: list[list[float | None]], expected: list[list[float]]) -> None:
    """The page's map: masked (null) above the diagonal, the API's weights on and below it."""
    assert len(z) == len(expected)
    for i, row in enumerate(z):
        assert all(v is None for v in row[i + 1 :]), (i, row)
        assert_rows_close([row[: i + 1]], [expected[i][: i + 1]])
        assert all(v == 0 for v in expected[i][i + 1 :])  # what the API sends there


def flat(matrix: list[list[float]]) -> list[float]:
    return [v for row in matrix for v in row]


def pixel(page: Page, testid: str, x: int, y: int) -> list[int]:
    """RGBA of one pixel of the canvas in a grid button."""
    return page.evaluate(
        "([id, x, y]) => Array.from(document.querySelector(`[data-testid='${id}'] canvas`)"
        ".getContext('2d').getImageData(x, y, 1, 1).data)",
        [testid, x, y],
    )


def open_model(page: Page, model: str, text: str = TEXT, **params: str) -> int:
    """/model with this model and text; returns the token count once the grid is drawn."""
    layers, heads = DECODERS[model]
    extra = "".join(f"&{k}={quote(v)}" for k, v in params.items())
    page.goto(f"/model?model={model}&text={quote(text)}{extra}")
    wait_for_grid(page, layers, heads)
    return int(page.get_by_test_id("head-grid").get_attribute("data-tokens") or 0)


# ---------- the picker ----------


def test_picker_lists_every_model_and_switches(page: Page, server_url: str) -> None:
    listing = api(server_url, "/api/models")
    page.goto("/model")
    wait_for_grid(page, 6, 12)
    picker = page.get_by_test_id("model-pick")
    options = picker.locator("option")
    assert options.evaluate_all("os => os.map(o => o.value)") == [
        m["name"] for m in listing["models"]
    ]
    t5 = picker.locator("option[value='tiny-t5']")
    expect(t5).to_be_disabled()
    reason = next(m["reason"] for m in listing["models"] if m["name"] == "tiny-t5")
    expect(t5).to_contain_text("not supported")
    assert t5.get_attribute("title") == reason
    expect(picker.locator("option[value='tiny-gpt2']")).to_be_enabled()
    # An encoder takes a second text; a decoder does not, and offers generation.
    expect(page.get_by_test_id("text-b-field")).to_be_visible()
    expect(page.get_by_test_id("task")).to_be_hidden()

    picker.select_option("tiny-gpt2")
    wait_for_grid(page, 2, 4)
    assert query(page)["model"] == ["tiny-gpt2"]
    expect(page.get_by_test_id("model-name")).to_have_text("tiny-gpt2")
    expect(page.get_by_test_id("model-facts")).to_contain_text("GPT-2 decoder · 2 layers × 4 heads")
    expect(page.get_by_test_id("text-b-field")).to_be_hidden()
    expect(page.get_by_test_id("task")).to_be_visible()
    expect(page.get_by_test_id("compare-word-card")).to_be_hidden()
    expect(page.get_by_test_id("tokens-kind")).to_have_text("Tokens")
    assert page.locator("[data-testid=head-grid] [data-kind=head]").count() == 2 * 4
    text = page.get_by_test_id("model-text").input_value()
    expected = attention(server_url, "tiny-gpt2", text, layers=[1])["tokens"]
    expect(page.get_by_test_id("wp-token")).to_have_count(len(expected))

    # A reload keeps the model (the server renders the picker with it chosen).
    page.reload()
    expect(page.get_by_test_id("model-pick")).to_have_value("tiny-gpt2")
    wait_for_grid(page, 2, 4, tokens=len(expected))

    # Another decoder, other sizes: the grid is rebuilt.
    page.get_by_test_id("model-pick").select_option("tiny-gpt2-deep")
    wait_for_grid(page, 3, 2)
    assert page.locator("[data-testid=head-grid] [data-kind=head]").count() == 3 * 2
    assert query(page)["model"] == ["tiny-gpt2-deep"]
    # Back to the default: it leaves the URL (links stay short).
    page.get_by_test_id("model-pick").select_option(listing["default"])
    wait_for_grid(page, 6, 12)
    assert "model" not in query(page)


# ---------- a decoder's maps ----------


def test_decoder_maps_show_the_upper_triangle_masked(page: Page, server_url: str) -> None:
    count = open_model(page, "tiny-gpt2", layer="2", head="3")
    expected = attention(server_url, "tiny-gpt2", TEXT, layers=[2])
    assert count == len(expected["tokens"])
    zoom = page.get_by_test_id("zoom-plot")
    expect(zoom).to_have_attribute("data-head", "3", timeout=WAIT)
    expect(zoom).to_have_attribute("data-causal", "true")
    assert_causal_map(plot_data(page, "zoom-plot"), expected["attentions"][0][2])
    # Masked cells say so on hover, not "weight: 0".
    text = plot_data(page, "zoom-plot", field="text")
    assert "masked" in text[0][1] and "weight" not in text[0][1]
    assert "weight: " in text[1][0]
    # The quick map's gaps show grey, as Plotly's do (plot_bgcolor).
    grey = "rgb(208, 215, 222)"
    cells = page.locator("[data-testid='zoom-plot'] .quick-cells")
    expect(cells).to_have_css("background-color", grey)
    assert (
        page.evaluate(
            "() => document.querySelector(\"[data-testid='zoom-plot']\").layout.plot_bgcolor"
        )
        == "#d0d7de"
    )
    expect(page.get_by_test_id("zoom-legend")).to_contain_text("Grey: masked")
    # Thumbnails: the top-right cell is grey, the top-left one a Viridis colour.
    assert pixel(page, "map-L2-H3", count - 1, 0) == [208, 215, 222, 255]
    assert pixel(page, "map-L2-H3", 0, 0) != [208, 215, 222, 255]

    # Head averages and rollout are causal too.
    page.get_by_test_id("map-L2-mean").click()
    expect(zoom).to_have_attribute("data-head", "mean", timeout=WAIT)
    assert_causal_map(plot_data(page, "zoom-plot"), expected["head_average"][0])
    page.get_by_test_id("map-L2-rollout").click()
    expect(zoom).to_have_attribute("data-head", "rollout", timeout=WAIT)
    z = plot_data(page, "zoom-plot")
    assert_causal_map(z, expected["rollout"][0])
    for row in z:
        assert abs(sum(v for v in row if v is not None) - 1) <= len(row) * UINT8_ERROR


def test_hide_special_and_first_tokens_for_a_decoder(page: Page, server_url: str) -> None:
    count = open_model(page, "tiny-gpt2", layer="1", head="2")
    full = attention(server_url, "tiny-gpt2", TEXT, layers=[1])
    page.get_by_test_id("hide-special").check()
    wait_for_grid(page, 2, 4, tokens=count - 1)
    expected = attention(server_url, "tiny-gpt2", TEXT, layers=[1], hide_special=True)
    assert expected["tokens"] == full["tokens"][1:]  # GPT-2 has no BOS: the first token goes
    expect(page.get_by_test_id("wp-token")).to_have_text(
        [t.replace("\n", "↵") for t in expected["tokens"]]
    )
    expect(page.get_by_test_id("token-count")).to_have_text(f"({count - 1} shown, 1 hidden)")
    z = plot_data(page, "zoom-plot")
    assert_causal_map(z, expected["attentions"][0][1])
    for row in z:  # renormalized
        assert abs(sum(v for v in row if v is not None) - 1) <= len(row) * UINT8_ERROR
    assert query(page)["hide"] == ["1"]


# ---------- generation ----------


def generate_on_page(page: Page, prompt: str, max_new: int) -> None:
    page.get_by_test_id("task-generate").check()
    expect(page.get_by_test_id("generate-fields")).to_be_visible()
    expect(page.get_by_test_id("text-field")).to_be_hidden()
    page.get_by_test_id("gen-prompt").fill(prompt)
    page.get_by_test_id("gen-max").fill(str(max_new))
    page.get_by_test_id("model-run").click()


def test_generation_marks_tokens_and_shows_what_each_read(page: Page, server_url: str) -> None:
    open_model(page, "tiny-gpt2")
    generate_on_page(page, PROMPT, 6)
    expected = generation(server_url, model="tiny-gpt2", prompt=PROMPT, max_new_tokens=6)
    T = len(expected["tokens"])
    wait_for_grid(page, 2, 4, tokens=T)
    chips = page.get_by_test_id("wp-token")
    expect(chips).to_have_count(T)
    flags = chips.evaluate_all("bs => bs.map(b => b.classList.contains('generated'))")
    assert flags == expected["generated"] and sum(flags) == 6
    expect(page.get_by_test_id("gen-text")).to_have_text(expected["generated_text"])
    expect(page.get_by_test_id("gen-summary")).to_contain_text("greedy")
    # The large map marks the generated rows: ▸ on their labels, an outline around them.
    labels = tick_texts(page, "zoom-plot", "y")
    assert [label.startswith("▸") for label in labels] == expected["generated"]
    shapes = page.evaluate(
        "() => document.querySelector(\"[data-testid='zoom-plot']\").layout.shapes"
    )
    assert shapes[0]["y0"] == expected["prompt_tokens"] - 0.5 and shapes[0]["y1"] == T - 0.5
    assert page.locator("[data-testid='zoom-plot'] .quick-shape").count() == 1
    assert_causal_map(plot_data(page, "zoom-plot"), expected["attentions"][0][0])
    params = query(page)
    assert params["gen"] == ["1"] and params["n"] == ["6"] and params["prompt"] == [PROMPT]

    # The third generated token: what the model read when it wrote it (the row before it).
    s = expected["prompt_tokens"] + 2
    chips.nth(s).click()
    view = page.get_by_test_id("token-view")
    expect(view).to_have_attribute("data-token", str(s), timeout=WAIT)
    expect(view).to_have_attribute("data-mode", "written")
    expect(view).to_have_attribute("data-query", str(s - 1))
    expect(page.get_by_test_id("tv-what")).to_contain_text("when it wrote")
    z = plot_data(page, "tv-strip")
    rows = [
        expected["attentions"][layer][head][s - 1][:s] for layer in range(2) for head in range(4)
    ]
    assert_rows_close(z, rows)
    assert plot_data(page, "tv-strip", field="y") == list(range(8))
    # The head view shows the same row of the chosen layer, one line per head and key.
    lines = page.locator("[data-testid='headview-lines'] line")
    expect(lines).to_have_count(4 * s)
    weights = lines.evaluate_all(
        "ls => ls.map(l => [Number(l.dataset.head), Number(l.dataset.key),"
        " Number(l.dataset.weight)])"
    )
    for head, key, weight in weights:
        assert abs(weight - expected["attentions"][0][head][s - 1][key]) <= UINT8_ERROR + 1e-6
    # As the next input instead: its own row, which reads itself too.
    page.get_by_test_id("tv-when-input").check()
    expect(view).to_have_attribute("data-mode", "input", timeout=WAIT)
    expect(view).to_have_attribute("data-query", str(s))
    page.wait_for_function(
        "n => document.querySelector(\"[data-testid='tv-strip']\").data[0].x.length === n",
        arg=s + 1,
    )
    assert_rows_close(
        plot_data(page, "tv-strip"),
        [expected["attentions"][ly][h][s][: s + 1] for ly in range(2) for h in range(4)],
    )
    assert query(page)["tok"] == [str(s)] and query(page)["when"] == ["input"]

    # A reload writes the same (greedy) and shows the same token view.
    page.reload()
    wait_for_grid(page, 2, 4, tokens=T)
    expect(page.get_by_test_id("gen-text")).to_have_text(expected["generated_text"])
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-query", str(s), timeout=WAIT)


def test_sampled_generation_follows_its_seed(page: Page, server_url: str) -> None:
    open_model(page, "tiny-gpt2")
    page.get_by_test_id("task-generate").check()
    page.get_by_test_id("gen-prompt").fill("The river")
    page.get_by_test_id("gen-max").fill("5")
    page.get_by_test_id("gen-sampling").select_option("sample")
    page.get_by_test_id("gen-temperature").fill("1.5")
    page.get_by_test_id("gen-top-k").fill("20")
    page.get_by_test_id("gen-seed").fill("7")
    page.get_by_test_id("model-run").click()
    expected = generation(
        server_url,
        model="tiny-gpt2",
        prompt="The river",
        max_new_tokens=5,
        temperature=1.5,
        top_k=20,
        seed=7,
    )
    wait_for_grid(page, 2, 4, tokens=len(expected["tokens"]))
    expect(page.get_by_test_id("gen-text")).to_have_text(expected["generated_text"])
    expect(page.get_by_test_id("gen-summary")).to_contain_text("temperature 1.5, top-k 20, seed 7")
    params = query(page)
    assert params["sample"] == ["1"] and params["seed"] == ["7"] and params["topk"] == ["20"]

    # No seed: the server draws one, and the page keeps it (form and link).
    page.get_by_test_id("gen-seed").fill("")
    page.get_by_test_id("model-run").click()
    expect(page.get_by_test_id("gen-seed")).not_to_have_value("", timeout=WAIT)
    seed = int(page.get_by_test_id("gen-seed").input_value())
    assert query(page)["seed"] == [str(seed)]
    expect(page.get_by_test_id("gen-summary")).to_contain_text(f"seed {seed}")


# ---------- a head step by step ----------


def test_a_head_opens_step_by_step_in_the_explorer(page: Page, server_url: str) -> None:
    open_model(page, "tiny-gpt2")
    page.get_by_test_id("map-L2-H3").click()
    link = page.get_by_test_id("open-head")
    expect(link).to_have_text("Layer 2, head 3 step by step →")
    page.get_by_test_id("map-L2-mean").click()
    expect(link).to_be_hidden()  # a mean is not one head
    page.get_by_test_id("map-L2-H3").click()
    link.click()
    expect(page).to_have_url(re.compile(r"/\?real=tiny-gpt2&"))
    assert query(page) == {
        "real": ["tiny-gpt2"],
        "text": [TEXT],
        "layer": ["2"],
        "head": ["3"],
    }
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    expected = api(
        server_url, "/api/model/head", {"model": "tiny-gpt2", "text": TEXT, "layer": 2, "head": 3}
    )
    steps = expected["heads"][0]
    for key in ("q", "k", "v", "attn_scores", "context_vec"):
        assert flat(plot_data(page, f"plot-{key}")) == pytest.approx(flat(steps[key]), abs=1e-6)
    assert flat(plot_data(page, "plot-x")) == pytest.approx(flat(expected["x"]), abs=1e-6)
    masked = plot_data(page, "plot-masked_scores")
    assert masked[0][1] is None and masked[1][0] == pytest.approx(steps["masked_scores"][1][0])
    # The weights: the API's below the diagonal; above it blank (masked), not a weight of 0.
    weights = plot_data(page, "plot-attn_weights")
    for i, row in enumerate(weights):
        assert all(v is None for v in row[i + 1 :]), (i, row)
        assert row[: i + 1] == pytest.approx(steps["attn_weights"][i][: i + 1], abs=1e-6)
        assert all(v == 0 for v in steps["attn_weights"][i][i + 1 :])
    expect(page.locator("[data-step='attn_weights'] .step-text")).to_contain_text("stay blank")
    # A number on the page equals the API's: row 2's largest weight, as its hover text says.
    j = max(range(2), key=lambda j: steps["attn_weights"][1][j])
    text = plot_data(page, "plot-attn_weights", field="text")
    assert f"value: {steps['attn_weights'][1][j]:.4f}" in text[1][j]
    expect(page.get_by_test_id("real-head-title")).to_have_text("tiny-gpt2: layer 2, head 3")
    expect(page.get_by_test_id("real-head-facts")).to_contain_text(
        f"GPT-2 decoder · {len(expected['tokens'])} tokens · layer 2, head 3 · d_k = 8"
    )
    caption = page.locator("[data-step='x'] .step-text")
    expect(caption).to_contain_text("after its norm")
    expect(page.locator("[data-step='masked_scores'] .step-text")).to_contain_text("decoder")
    # Not the toy controls: nothing to edit, no examples.
    expect(page.get_by_test_id("preset-gallery")).to_be_hidden()
    expect(page.get_by_test_id("token-chips")).to_be_hidden()
    expect(page.get_by_test_id("grids")).to_be_hidden()
    expect(page.get_by_test_id("plot-output")).to_be_hidden()
    # Back to the model page, on the same model, text and head.
    page.get_by_test_id("real-back").click()
    expect(page).to_have_url(re.compile(r"/model\?"))
    wait_for_grid(page, 2, 4)
    expect(page.get_by_test_id("model-pick")).to_have_value("tiny-gpt2")
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-head", "3", timeout=WAIT)
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 2, head 3")
    expect(page.get_by_test_id("model-text")).to_have_value(TEXT)


def test_a_rotary_head_shows_q_and_k_before_and_after_the_rotation(
    page: Page, server_url: str
) -> None:
    """A Llama-family head: q and k before and after RoPE, the shared kv head named."""
    page.goto(f"/?real=tiny-llama&text={quote(TEXT)}&layer=1&head=3")
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    expected = api(
        server_url, "/api/model/head", {"model": "tiny-llama", "text": TEXT, "layer": 1, "head": 3}
    )
    steps = expected["heads"][0]
    assert expected["kv_head"] == 2  # query head 3 of 4 reads kv head 2 of 2 (from 1)
    assert steps["q_unrotated"] != steps["q"]  # the rotation changed something
    for step in ("q_unrotated", "q", "k_unrotated", "k"):
        wait_for_plot(page, f"plot-{step}")
        assert flat(plot_data(page, f"plot-{step}")) == pytest.approx(flat(steps[step]), abs=1e-5)
    expect(page.locator("[data-step='q'] .step-title")).to_have_text("q = RoPE(x @ W_query)")
    expect(page.locator("[data-step='q_unrotated'] .step-title")).to_have_text(
        "q before RoPE = x @ W_query"
    )
    # Before then after: the unrotated panel comes first.
    order = page.eval_on_selector_all(
        "[data-testid='pipeline'] > figure:not([hidden])", "fs => fs.map(f => f.dataset.step)"
    )
    assert order.index("q_unrotated") == order.index("q") - 1
    assert order.index("k_unrotated") == order.index("k") - 1
    facts = page.get_by_test_id("real-head-facts")
    expect(facts).to_contain_text("rotary positions (RoPE)")
    expect(facts).to_contain_text("key/value head 2")


@pytest.mark.allow_console(r"422")
def test_a_head_link_with_a_bad_layer_says_why(page: Page) -> None:
    page.goto(f"/?real=tiny-gpt2&text={quote(TEXT)}&layer=9&head=1")
    expect(page.get_by_test_id("error-general")).to_contain_text(
        "layer 9 does not exist; this model has layers 1 to 2", timeout=WAIT
    )
    page.goto("/?real=tiny-gpt2&layer=1&head=1")
    expect(page.get_by_test_id("error-general")).to_contain_text("This link names no text")


# ---------- errors beside their fields ----------


def wait_for_minilm(page: Page) -> None:
    """MiniLM's grid and its word comparison (started with the page) both drawn, so the
    next navigation aborts no request."""
    wait_for_grid(page, 6, 12)
    expect(page.get_by_test_id("cw-row")).to_have_count(7, timeout=WAIT)


def test_unknown_model_in_the_url_is_said_beside_the_picker(page: Page) -> None:
    page.goto("/model?model=no-such-model")
    wait_for_minilm(page)
    error = page.get_by_test_id("error-model")
    expect(error).to_contain_text("There is no model called “no-such-model” on this server")
    expect(page.get_by_test_id("model-pick")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("error-general")).to_be_empty()
    page.goto("/model?model=tiny-t5")
    wait_for_minilm(page)
    expect(page.get_by_test_id("error-model")).to_contain_text("“tiny-t5” cannot be shown")


@pytest.mark.allow_console(r"422")
def test_generation_errors_are_beside_their_fields(page: Page, server_url: str) -> None:
    open_model(page, "tiny-gpt2")
    results = page.get_by_test_id("model-results")
    # Over the server's limit: said at once, beside Max new tokens; the maps marked stale.
    generate_on_page(page, PROMPT, 4)
    wait_for_grid(page, 2, 4)
    page.get_by_test_id("gen-max").fill(str(MAX_NEW_TOKENS + 6))
    page.get_by_test_id("model-run").click()
    error = page.get_by_test_id("error-max_new_tokens")
    expect(error).to_contain_text(f"at most {MAX_NEW_TOKENS}")
    expect(results).to_have_attribute("data-stale", "true")
    expect(page.get_by_test_id("stale-note")).to_contain_text("Out of date")
    # A prompt longer than the model's context: the server's answer, beside the prompt.
    page.get_by_test_id("gen-max").fill("4")
    page.get_by_test_id("gen-prompt").fill(" ".join(["the river bank"] * 30))
    page.get_by_test_id("model-run").click()
    prompt_error = page.get_by_test_id("error-prompt")
    expect(prompt_error).to_contain_text(f"this model reads at most {CONTEXT}", timeout=WAIT)
    expect(error).to_be_empty()
    expect(page.get_by_test_id("gen-prompt")).to_have_attribute("aria-invalid", "true")
    # Prompt plus new tokens past the context: beside Max new tokens, with the room left.
    prompt = "The cat sat"
    n = len(generation(server_url, model="tiny-gpt2", prompt=prompt, max_new_tokens=1)["tokens"])
    page.get_by_test_id("gen-prompt").fill(prompt)
    page.get_by_test_id("gen-max").fill(str(CONTEXT - n + 3))
    page.get_by_test_id("model-run").click()
    expect(error).to_contain_text(f"it can write at most {CONTEXT - n + 1} more", timeout=WAIT)
    expect(prompt_error).to_be_empty()
    # Fixed: the maps are current again (the run's start clears "Out of date"; the grid's
    # data-drawn, "0" since the last run, says the new maps arrived).
    page.get_by_test_id("gen-max").fill("3")
    page.get_by_test_id("model-run").click()
    wait_for_grid(page, 2, 4)
    expect(results).not_to_have_attribute("data-stale", "true")
    expect(error).to_be_empty()
    for box in page.locator("[data-error-for]").all():
        assert "Input should" not in box.inner_text()


@pytest.mark.allow_console(r"422")
def test_too_long_text_for_a_decoder_is_said_beside_the_text(page: Page) -> None:
    open_model(page, "tiny-gpt2")
    page.get_by_test_id("model-text").fill(" ".join(["the river bank"] * 30))
    page.get_by_test_id("model-run").click()
    error = page.get_by_test_id("error-text")
    expect(error).to_contain_text(f"this model reads at most {CONTEXT}", timeout=WAIT)
    expect(error).to_contain_text("Shorten it")
    expect(page.get_by_test_id("model-results")).to_have_attribute("data-stale", "true")


def test_a_decoder_has_no_unk_notice_for_emoji(page: Page, server_url: str) -> None:
    text = "She said 😀 and 東京"
    open_model(page, "tiny-gpt2", text=text)
    tokens = attention(server_url, "tiny-gpt2", text, layers=[1])["tokens"]
    assert "[UNK]" not in tokens
    expect(page.get_by_test_id("unk-note")).to_be_hidden()
    assert "😀" in "".join(page.get_by_test_id("wp-token").all_text_contents())


def test_a_decoder_says_which_tokens_are_unknown(page: Page, server_url: str) -> None:
    text = "The cat ☃ sat on the mat"
    tokens = attention(server_url, "tiny-gpt2-unk", text, layers=[1])["tokens"]
    assert tokens.count("<unk>") == 1
    open_model(page, "tiny-gpt2-unk", text=text)
    note = page.get_by_test_id("unk-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("1 token is <unk>")
    expect(page.locator("[data-testid='wp-token'].unk")).to_have_text(["<unk>"])


# ---------- 390 px ----------


def test_generation_and_token_view_fit_390_px(narrow: Page) -> None:
    narrow.goto(f"/model?model=tiny-gpt2&gen=1&prompt={quote(PROMPT)}&n=8&tok=9")
    wait_for_grid(narrow, 2, 4)
    expect(narrow.get_by_test_id("token-view")).to_have_attribute("data-token", "9", timeout=WAIT)
    wait_for_plot(narrow, "tv-strip")
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 390
    rights = narrow.eval_on_selector_all(
        ".plot:not([hidden]), select, textarea, input",
        "els => els.map(e => e.getBoundingClientRect().right)",
    )
    assert all(r <= 390 for r in rights), rights
    narrow.goto(f"/?real=tiny-gpt2&text={quote(TEXT)}&layer=1&head=1")
    expect(narrow.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 390
