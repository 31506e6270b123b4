"""The notebook API in a real notebook (issue 23): nbclient runs it in a kernel of the fresh
venv (the installed wheel), nbconvert exports it to HTML, Chromium opens the file with every
other request refused: the views draw, with no page error and no request of their own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devtools.wheel import clean_env
from tests.requires import require

nbformat = require("nbformat")
for _module in ("nbclient", "nbconvert", "ipykernel", "transformers"):  # used in the kernel
    require(_module)

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
HOSTILE = "</script><b id=injected>x</b>"

CELLS = [
    f"HOSTILE = {HOSTILE!r}",
    """\
import torch
from transformers import GPT2Config, GPT2LMHeadModel
import attention_viz
from attention_viz import figure, head_view, model_view, show

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=64, n_positions=32,
                    bos_token_id=0, eos_token_id=0, attn_implementation="eager")
model = GPT2LMHeadModel(config).eval()
tokens = ["The", "Ġbank", "Ġof", "Ġthe", "Ġriver", HOSTILE, "Ġbank"]
ids = torch.tensor([[5, 9, 11, 3, 17, 21, 9]])
attention = model(ids, output_attentions=True).attentions
print(attention_viz.__file__, len(attention), tuple(attention[0].shape))""",
    "head_view(attention, tokens, layer=1, heads=[1])",
    "model_view(attention, tokens)",
    'show("tiny-bank-gpt", "the bank of the river")',
    "model_view(attention, tokens, pool_above=4)  # 7 tokens in blocks of 2",
    "fig = figure(attention, tokens, layer=1, head=0)\nprint(fig.data[0].z.shape)",
]

# How many canvases under `scope` hold a pixel that is not transparent.
PIXELS = """(scope) => [...document.querySelectorAll(`${scope} canvas`)].filter(c => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  for (let i = 3; i < d.length; i += 4) if (d[i]) return true;
  return false;
}).length"""


@pytest.fixture(scope="module")
def exported(installed, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    source, target = base / "views.ipynb", base / "views.html"
    nbformat.write(notebook, source)
    script = Path(__file__).with_name("run_notebook.py")
    done = subprocess.run(
        [str(installed.python), str(script), str(source), str(target)],
        cwd=installed.outside,
        # nbconvert's templates are data files of the project's venv, beside its packages.
        env={**clean_env(), "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return source, target


def _stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def test_the_kernel_ran_the_installed_wheel(exported, installed):
    notebook = nbformat.read(exported[0], as_version=4)
    first = _stdout(notebook.cells[1])
    assert first.startswith(str(installed.python.parent.parent))  # the fresh venv's attention_viz
    assert "2 (1, 2, 7, 7)" in first
    assert _stdout(notebook.cells[6]) == "(7, 7)\n"
    for cell in notebook.cells:
        assert not [o for o in cell.outputs if o.output_type == "error"]
        assert not [o for o in cell.outputs if o.get("name") == "stderr" and "attention" in o.text]
    for cell in notebook.cells[2:6]:
        (output,) = cell.outputs
        assert output.output_type == "display_data"
        assert output.data["text/html"].startswith('<iframe id="attention-viz-')


@pytest.mark.parametrize("width", [1440, 390])
def test_the_exported_notebook_draws_offline(exported, width, browser):
    url = exported[1].resolve().as_uri()
    refused: list[str] = []
    problems: list[str] = []
    with browser.new_page(viewport={"width": width, "height": 900}) as page:

        def route(r):
            if r.request.url == url:
                r.continue_()
            else:
                # nbconvert's own template asks for a CDN (require.js, MathJax): refused too.
                refused.append(f"{r.request.frame.url}: {r.request.url}")
                r.abort()

        page.route("**/*", route)
        page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
        page.goto(url)
        views = page.locator("iframe.attention-viz-view")
        assert views.count() == 4
        ids = views.evaluate_all("fs => fs.map(f => f.id)")
        assert len(set(ids)) == 4
        frames = [f for f in page.frames if f.parent_frame is page.main_frame]
        assert len(frames) == 4
        for frame in frames:
            frame.wait_for_function("document.body.dataset.drawn === '1'")
            assert frame.evaluate(PIXELS, "main") >= 2, frame.evaluate("document.title")
            assert frame.evaluate("document.documentElement.scrollWidth") <= width
        head, maps, shown, pooled = frames
        # Every map of the model view: 2 layers x (2 heads, mean, rollout); the head view's 2.
        grid = "[data-testid='head-grid']"
        assert maps.evaluate(PIXELS, grid) == 8 and head.evaluate(PIXELS, grid) == 2
        assert shown.evaluate(PIXELS, grid) == 2 * (4 + 2)  # tiny-bank-gpt: 2 layers, 4 heads
        zoom = "[data-testid='zoom-plot']"
        assert maps.evaluate(PIXELS, zoom) >= 1  # the map (and its colour bar)
        # The hostile token is text, in both views: nothing was injected or cut short.
        for frame in (head, maps):
            assert frame.locator("#injected").count() == 0
        options = head.locator("[data-testid='headview-query'] option").all_text_contents()
        assert HOSTILE in options
        assert shown.locator("[data-testid='wp-token']").count() == len("the bank of the river")
        # bertviz's layer and heads: layer 2 shown, only head 2 ticked.
        assert head.locator("[data-testid='hv-layer']").input_value() == "1"
        ticked = head.locator("[data-testid='headview-head']").evaluate_all(
            "bs => bs.map(b => b.checked)"
        )
        assert ticked == [False, True]
        # A long text's maps arrive pooled: 4 blocks a side, no token view.
        assert (
            "a block of 2 × 2 tokens"
            in pooled.locator("[data-testid='pooled-note']").text_content()
        )
        assert pooled.evaluate(PIXELS, grid) == 8
        assert (
            pooled.evaluate("document.querySelector('[data-testid=zoom-plot]').data[0].z.length")
            == 4
        )
        assert pooled.locator("[data-testid='token-view']").count() == 0
        # Each frame fits its content (same-origin srcdoc: the page sets the height).
        heights = views.evaluate_all("fs => fs.map(f => f.getBoundingClientRect().height)")
        inner = [f.evaluate("document.documentElement.offsetHeight") for f in frames]
        assert all(abs(h - i) <= 8 for h, i in zip(heights, inner, strict=True)), (heights, inner)
        # Reaching for a map (hover, click) fetches nothing: no Plotly.js to load.
        maps.locator("[data-testid='map-L2-H2']").click()
        maps.locator("[data-testid='zoom-plot']").hover()
        maps.wait_for_function(
            "document.querySelector(\"[data-testid='zoom-title']\").textContent"
            " === 'Layer 2, head 2'"
        )
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"notebook-{width}.png"), full_page=True)
    assert not problems, problems
    ours = [r for r in refused if not r.startswith(url)]
    assert ours == [], ours  # every refused request came from nbconvert's page, none from a view
