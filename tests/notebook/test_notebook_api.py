"""The notebook API's views from Python: what they embed (maps equal to transformers' eager
attentions, pooled when long, escaped), bertviz's arguments, figure() and the bundler."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from app.notebook import NotebookView, explore, figure, head_view, model_view, show
from app.notebook.attentions import POOL_ABOVE, is_causal, pool, stack_attention
from app.notebook.bundle import BundleError, _rewrite, bundle
from app.notebook.render import ENTRY
from app.static_files import module_graph
from attention_core.models.maps.features import attention_rollout
from tests.models.checkpoints import make_gpt2
from tests.requires import require

transformers = require("transformers")

QUANTUM = 1 / 510 + 1e-6  # uint8 transport: |error| <= 1/510


def _decode(compact: dict) -> torch.Tensor:
    raw = np.frombuffer(base64.b64decode(compact["data"]), dtype=np.uint8)
    return torch.from_numpy(raw.astype(np.float32) / 255).reshape(compact["shape"])


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """A random GPT-2 checkpoint, the eager model and its tokenizer."""
    directory = make_gpt2(tmp_path_factory.mktemp("gpt2") / "tiny-gpt2")
    model = transformers.GPT2LMHeadModel.from_pretrained(
        directory, attn_implementation="eager", local_files_only=True
    ).eval()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(directory / "tokenizer.json")
    )
    return directory, model, tokenizer


def _attentions(model, tokenizer, text):
    encoded = tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        out = model(**encoded, output_attentions=True)
    return out.attentions, tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())


def test_model_view_embeds_transformers_eager_attentions(gpt2):
    _, model, tokenizer = gpt2
    attentions, tokens = _attentions(model, tokenizer, "The bank of the river was muddy.")
    view = model_view(attentions, tokens, html_action="return")
    (section,) = view.payload["sections"]
    expected = torch.stack([a[0] for a in attentions])  # (L, H, T, T)
    assert section["maps"]["shape"] == list(expected.shape)
    assert (_decode(section["maps"]) - expected).abs().max() <= QUANTUM
    assert (_decode(section["mean"]) - expected.mean(dim=1)).abs().max() <= QUANTUM
    rollout = attention_rollout(list(expected))
    assert (_decode(section["rollout"]) - rollout).abs().max() <= QUANTUM
    assert section["causal"] is True and section["pooled"] == 1
    assert section["queries"] == [t.replace("Ġ", " ") for t in tokens]  # prettify_tokens
    assert section["layers"] == [1, 2] and section["heads"] == [1, 2, 3, 4]


def test_show_a_checkpoint_path_and_the_model_in_memory_agree_with_eager(gpt2):
    directory, model, tokenizer = gpt2
    text = "Money in the bank, fish in the stream."
    attentions, tokens = _attentions(model, tokenizer, text)
    expected = torch.stack([a[0] for a in attentions])
    for view in (
        show(str(directory), text, html_action="return"),
        show(model, text, tokenizer, html_action="return"),
    ):
        (section,) = view.payload["sections"]
        assert [t.replace("Ġ", " ") for t in tokens] == [
            t.replace("Ġ", " ") for t in section["queries"]
        ]
        assert (_decode(section["maps"]) - expected).abs().max() <= QUANTUM
        assert section["causal"] is True


def test_show_a_checkpoint_path_takes_the_server_s_token_limit_and_a_short_heading(
    tmp_path, monkeypatch
):
    """A checkpoint directory gets ATTENTION_VIZ_MODEL_MAX_TOKENS as a model by name does
    (not a fixed 512), and the heading quotes the start of a long text, not all of it."""
    from app.settings import get_settings

    directory = make_gpt2(tmp_path / "tiny-gpt2-long", n_positions=1024)
    monkeypatch.setenv("ATTENTION_VIZ_MODEL_MAX_TOKENS", "1024")
    get_settings.cache_clear()
    try:
        text = "the bank " * 300  # 600 tokens: over 512
        view = show(str(directory), text, html_action="return")
    finally:
        get_settings.cache_clear()
    assert view is not None
    (section,) = view.payload["sections"]
    assert section["tokens_total"] > 512  # refused before: "the server's token limit … 512"
    title = view.payload["title"]
    assert title == f"tiny-gpt2-long: “{text[:60].rstrip()}…” ({len(text):,} characters)"


def test_show_a_registry_name():
    view = show("tiny-bank-gpt", "the bank", html_action="return")
    (section,) = view.payload["sections"]
    assert section["queries"] == list("the bank")  # a character-level model
    assert view.payload["title"].startswith("tiny-bank-gpt")
    with pytest.raises(Exception, match="unknown model 'no-such-model'"):
        show("no-such-model", "text", html_action="return")


def test_head_view_takes_bertviz_arguments():
    torch.manual_seed(1)
    maps = torch.softmax(torch.randn(3, 2, 5, 5), dim=-1)  # (L, H, T, T): not causal
    attention = tuple(m[None] for m in maps)  # transformers' tuple of (1, H, T, T)
    tokens = ["[CLS]", "a", "b", "[SEP]", "c"]
    view = head_view(
        attention, tokens, sentence_b_start=4, layer=2, heads=[1], html_action="return"
    )
    payload = view.payload
    assert payload["view"] == "head" and payload["layer"] == 2
    assert payload["shown_heads"] == [2] and payload["sentence_b_start"] == 4
    (section,) = payload["sections"]
    assert section["causal"] is False
    assert (_decode(section["maps"]) - maps).abs().max() <= QUANTUM
    some = model_view(
        attention, tokens, include_layers=[0, 2], include_heads=[1], html_action="return"
    )
    (section,) = some.payload["sections"]
    assert section["layers"] == [1, 3] and section["heads"] == [2]
    assert (_decode(section["maps"]) - maps[[0, 2]][:, [1]]).abs().max() <= QUANTUM
    assert section["rollout"] is None and section["mean"] is None  # not every layer and head


def test_encoder_decoder_sections():
    torch.manual_seed(2)
    enc = tuple(torch.softmax(torch.randn(1, 2, 4, 4), -1) for _ in range(2))
    dec = tuple(torch.softmax(torch.randn(1, 2, 3, 3), -1).tril() for _ in range(2))
    cross = tuple(torch.softmax(torch.randn(1, 2, 3, 4), -1) for _ in range(2))
    view = model_view(
        encoder_attention=enc,
        decoder_attention=dec,
        cross_attention=cross,
        encoder_tokens=["a", "b", "c", "</s>"],
        decoder_tokens=["<pad>", "x", "y"],
        html_action="return",
    )
    names = [
        (s["name"], s["causal"], s["square"], len(s["queries"]), len(s["keys"]))
        for s in view.payload["sections"]
    ]
    assert names == [
        ("encoder", False, True, 4, 4),
        ("decoder", True, True, 3, 3),
        ("cross", False, False, 3, 4),
    ]
    cross_section = view.payload["sections"][2]
    assert cross_section["mean"] is None and cross_section["rollout"] is None
    assert cross_section["maps"]["shape"] == [2, 2, 3, 4]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda a, t: model_view(a, t[:-1], html_action="return"),
            "maps are 6 × 6 tokens; the tokens given are 5 × 5",
        ),
        (
            lambda a, t: model_view(a, t, include_layers=[2], html_action="return"),
            r"layers \[2\] out of range: there are 2",
        ),
        (
            lambda a, t: model_view(a, t, include_heads=[-1], html_action="return"),
            r"heads \[-1\] out of range",
        ),
        (
            lambda a, t: head_view(a, t, layer=5, html_action="return"),
            "layer 5 is not among the layers",
        ),
        (
            lambda a, t: model_view(a, t, html_action="show"),
            "html_action must be 'view' or 'return'",
        ),
        (
            lambda a, t: model_view(torch.cat(a), t, html_action="return"),  # (L, H, T, T)
            None,
        ),
        (
            lambda a, t: model_view(
                tuple(x.expand(2, -1, -1, -1) for x in a), t, html_action="return"
            ),
            "a batch of 2; pass one text",
        ),
        (lambda a, t: model_view(html_action="return"), "no attention given"),
    ],
)
def test_bad_arguments_are_named(call, message):
    attention = tuple(torch.softmax(torch.randn(1, 2, 6, 6), -1) for _ in range(2))
    tokens = list("abcdef")
    if message is None:
        assert isinstance(call(attention, tokens), NotebookView)  # (L, H, T, T) as a tensor
        return
    with pytest.raises(ValueError, match=message):
        call(attention, tokens)


def test_long_maps_are_max_pooled_in_blocks():
    torch.manual_seed(3)
    T = 10
    maps = torch.softmax(torch.randn(1, 1, T, T), -1)
    pooled = pool(maps, 3)  # ceil(10 / 3) = 4 blocks a side
    assert pooled.shape == (1, 1, 4, 4)
    for bi in range(4):
        for bj in range(4):
            block = maps[0, 0, 3 * bi : 3 * bi + 3, 3 * bj : 3 * bj + 3]
            assert pooled[0, 0, bi, bj] == block.max()
    tokens = [f"t{i}" for i in range(T)]
    view = model_view((maps,), tokens, pool_above=4, html_action="return")
    (section,) = view.payload["sections"]
    assert section["pooled"] == 3 and section["tokens_total"] == T
    assert section["queries"] == ["t0 [0–2]", "t3 [3–5]", "t6 [6–8]", "t9 [9–9]"]
    assert (_decode(section["maps"]) - pooled).abs().max() <= QUANTUM
    assert POOL_ABOVE == 128


def test_a_long_text_stays_light():
    T = 1024
    causal = torch.softmax(
        torch.randn(2, 4, T, T).masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf")), -1
    )
    view = model_view(
        tuple(m[None] for m in causal), [f"w{i}" for i in range(T)], html_action="return"
    )
    (section,) = view.payload["sections"]
    assert section["pooled"] == 8 and section["maps"]["shape"] == [2, 4, 128, 128]
    assert len(view.data) < 1_500_000  # ~36 MB of float32 weights without pooling


def test_causal_detection():
    T = 5
    upper = torch.ones(T, T).triu(1).bool()
    decoder = torch.softmax(torch.randn(2, 2, T, T).masked_fill(upper, float("-inf")), -1)
    assert is_causal(decoder) is True
    assert is_causal(torch.softmax(torch.randn(2, 2, T, T), -1)) is False
    assert stack_attention(tuple(decoder[:, None].unbind(0))).shape == (2, 2, T, T)


def test_the_data_block_is_json_that_cannot_close_its_script():
    hostile = "</script><script>alert(1)</script><!-- &amp; -->"
    attention = (torch.softmax(torch.randn(1, 1, 3, 3), -1),)
    view = model_view(attention, ["a", hostile, "b"], html_action="return")
    match = re.search(
        r"<script type='application/json' id='view-data'>(.*?)</script>", view.page, re.S
    )
    assert match is not None
    block = match.group(1)
    assert "<" not in block and ">" not in block and "&" not in block
    assert json.loads(block)["sections"][0]["queries"][1] == hostile
    # The page is whole inside the frame: srcdoc holds it escaped as an attribute.
    assert view.data.count("<iframe") == 1 and "</script" not in view.data.split("srcdoc=")[1]


def test_every_view_has_its_own_id():
    attention = (torch.softmax(torch.randn(1, 1, 3, 3), -1),)
    views = [model_view(attention, list("abc"), html_action="return") for _ in range(3)]
    ids = [re.match(r'<iframe id="([^"]+)"', v.data).group(1) for v in views]
    assert len(set(ids)) == 3 and all(i.startswith("attention-viz-") for i in ids)


def test_explore_embeds_the_pipeline():
    view = explore("multi-head", html_action="return")
    trace = view.payload["trace"]
    assert (
        view.payload["view"] == "explore" and view.payload["title"] == "Four heads on one sentence"
    )
    assert trace["num_heads"] == 4 and "attn_weights" in view.payload["steps"]
    block = re.search(r"id='view-data'>(.*?)</script>", view.page, re.S).group(1)
    weights = np.array(json.loads(block)["trace"]["heads"][0]["attn_weights"])
    assert np.allclose(weights.sum(axis=1), 1, atol=1e-6)
    with pytest.raises(ValueError, match="steps \\['nope'\\] unknown"):
        explore("multi-head", steps=["nope"], html_action="return")


def test_figure_is_the_map_as_plotly():
    torch.manual_seed(4)
    attention = tuple(torch.softmax(torch.randn(1, 2, 4, 4), -1) for _ in range(3))
    tokens = ["the", "bank", "the", "river"]
    fig = figure(attention, tokens, layer=2, head=1)
    assert np.array_equal(np.asarray(fig.data[0].z), attention[2][0, 1].numpy())
    assert list(fig.data[0].y) == ["the·0", "bank", "the·2", "river"]  # repeats kept apart
    mean = figure(attention, tokens, layer=0, head="mean")
    assert np.allclose(np.asarray(mean.data[0].z), attention[0][0].mean(0).numpy())
    assert np.array_equal(
        np.asarray(figure(attention[0][0, 0]).data[0].z), attention[0][0, 0].numpy()
    )
    with pytest.raises(ValueError, match="head 2 out of range: there are 2 heads"):
        figure(attention, tokens, head=2)
    html = fig.to_html(include_plotlyjs=False)
    assert "Viridis" in html or "#440154" in html


def test_the_bundle_holds_every_module_the_entry_imports():
    text = bundle(ENTRY)
    for name in (ENTRY, *module_graph(ENTRY)):
        assert f'__modules["{name}"] = ' in text
    assert "import {" not in text and "\nexport " not in text


def test_the_bundler_rewrites_imports_and_exports_and_refuses_the_rest():
    body, imports = _rewrite(
        "a.js",
        'import { x, y as z } from "./b.js";\nexport const K = 1;\nexport async function f() {}\n'
        "function g() {}\nexport { g, K as L };\n",
    )
    assert imports == ["b.js"]
    assert 'const { x, y: z } = __modules["b.js"];' in body
    assert "return { K: K, f: f, g: g, L: K };" in body
    for bad in (
        'import x from "./b.js";',
        "export default 1;",
        'export * from "./b.js";',
        'import "./b.js";',
    ):
        with pytest.raises(BundleError):
            _rewrite("a.js", bad)


def test_a_view_saves_a_standalone_page(tmp_path: Path):
    view = model_view(
        (torch.softmax(torch.randn(1, 1, 3, 3), -1),), list("abc"), html_action="return"
    )
    path = view.save(tmp_path / "view.html")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and "<script type='module'>" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing from a CDN


def test_explore_takes_a_spec():
    from dataclasses import replace

    from attention_core import get_preset

    spec = replace(get_preset("bank-hand-set").spec, causal=True)
    trace = explore(spec, steps=["attn_weights"], html_action="return").payload["trace"]
    weights = np.asarray(trace["heads"][0]["attn_weights"])
    assert trace["causal"] is True
    assert np.all(np.triu(weights, 1) == 0) and np.allclose(weights.sum(axis=1), 1, atol=1e-6)
