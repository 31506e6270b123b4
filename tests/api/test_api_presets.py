"""Every preset through the API: listed, described, expanded, and giving REFERENCE.md's numbers.

The printed values (tests/reference_values.py, shared with the library's tests)
come from shared/REFERENCE.md and the seed tutorials it cites; each comes back
from POST /api/attention to the printed digits.  The exact-equality tests check
that serialization loses nothing: every float32 the core computes reads back
from the JSON as the same float32.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core import PRESETS, get_preset, run
from attention_core.presets import FINANCE, RIVER
from tests import reference_values as ref
from tests.printed import assert_printed

PRESET_NAMES = sorted(PRESETS)
HEAD_STEPS = ("q", "k", "v", "attn_scores", "scaled_scores", "attn_weights", "context_vec")


def attention(client, body: dict) -> dict:
    response = client.post("/api/attention", json=body)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def details(client) -> dict[str, dict]:
    return {name: client.get(f"/api/presets/{name}").json() for name in PRESET_NAMES}


def test_presets_list_every_preset(client):
    response = client.get("/api/presets")
    assert response.status_code == 200
    listed = response.json()
    assert [p["name"] for p in listed] == list(PRESETS)
    for item in listed:
        preset = PRESETS[item["name"]]
        assert item["title"] == preset.title and item["source"] == preset.source
        expected = None if preset.compare_tokens is None else list(preset.compare_tokens)
        assert item["compare_tokens"] == expected


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_preset_detail_has_spec_and_expanded(client, details, name):
    detail = details[name]
    assert detail["name"] == name
    assert detail["spec"]["tokens"] == list(PRESETS[name].spec.tokens)
    assert detail["expanded"]["tokens"] == detail["spec"]["tokens"]
    assert detail["expanded"]["embedding"]["kind"] == "explicit"
    assert detail["expanded"]["projection"]["kind"] in {"identity", "explicit"}


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_spec_and_expanded_give_identical_outputs(client, details, name):
    from_spec = attention(client, details[name]["spec"])
    from_expanded = attention(client, details[name]["expanded"])
    assert from_spec == from_expanded


@pytest.mark.parametrize("name", sorted(ref.SEED_004_OUTPUTS))
def test_seed_004_river_and_finance(client, details, name):
    spec = details[name]["spec"]
    assert spec["tokens"] == list(RIVER)
    river, finance = ref.SEED_004_OUTPUTS[name]
    assert_printed(attention(client, spec)["output"], river)
    assert_printed(attention(client, {**spec, "tokens": list(FINANCE)})["output"], finance)


def test_seed_001_next_day_rand(client, details):
    body = attention(client, details["next-day-rand"]["spec"])
    head = body["heads"][0]
    assert body["scale"] == 0.5
    assert_printed(head["q"][1], ref.SEED_001_QUERY_2)
    assert_printed(head["attn_scores"], ref.SEED_001_OMEGA)
    assert_printed(head["attn_weights"], ref.SEED_001_WEIGHTS)
    assert_printed(head["context_vec"], ref.SEED_001_CONTEXT_RAND)
    assert_printed(body["output"], ref.SEED_001_CONTEXT_RAND)
    assert_printed(body["output"][0], ref.SEED_001_CONTEXT_RAND_FIRST_ROW)


def test_seed_001_next_day_linear(client, details):
    body = attention(client, details["next-day-linear"]["spec"])
    assert_printed(body["output"], ref.SEED_001_CONTEXT_LINEAR)
    assert_printed(body["heads"][0]["context_vec"][0], ref.SEED_001_CONTEXT_LINEAR_FIRST_ROW)


def test_seed_003_gpt_head_32d(client, details):
    body = attention(client, details["gpt-head-32d"]["spec"])
    assert body["scale"] == 1.0
    weights = body["heads"][0]["attn_weights"]
    assert_printed(weights, ref.SEED_003_W0)
    assert_printed(weights[1][:3], ref.SEED_003_W0_ROW_2_START)
    assert_printed(body["output"][:6], ref.SEED_003_OUT0_ROWS_0_TO_5)
    assert_printed(body["output"][6][0], ref.SEED_003_OUT0_ROW_6_FIRST)


def test_seed_000_gpt_head_2d(client, details):
    body = attention(client, details["gpt-head-2d"]["spec"])
    assert body["scale"] == pytest.approx(16**-0.5)
    assert_printed(body["output"][:4], ref.SEED_000_OUT0_ROWS_0_TO_3)
    assert_printed(body["output"][0][:3], ref.SEED_000_OUT0_FIRST_ROW_START)


def _assert_float32_equal(json_matrix, tensor: torch.Tensor, where: str) -> None:
    expected = tensor.detach().numpy()
    got = np.array(
        [[np.float32(v) if v is not None else -np.inf for v in row] for row in json_matrix],
        dtype=np.float32,
    )
    assert got.shape == expected.shape, where
    assert np.array_equal(got, expected), f"{where}: {got} != {expected}"


@pytest.mark.parametrize(
    "name", ["bank-raw", "next-day-rand", "gpt-head-32d", "multi-head", "cross-attention"]
)
def test_every_number_comes_back_as_the_same_float32(client, details, name):
    trace = run(get_preset(name).spec)
    body = attention(client, details[name]["spec"])
    _assert_float32_equal(body["x"], trace.x, "x")
    _assert_float32_equal(body["source"], trace.source, "source")
    _assert_float32_equal(body["output"], trace.output, "output")
    assert len(body["heads"]) == trace.num_heads
    for h, head in enumerate(body["heads"]):
        for step in HEAD_STEPS:
            _assert_float32_equal(head[step], getattr(trace, step)[h], f"head {h} {step}")
        masked = trace.masked_scores[h]
        nulls = np.array([[v is None for v in row] for row in head["masked_scores"]])
        assert np.array_equal(nulls, torch.isneginf(masked).numpy()), f"head {h} mask"
        _assert_float32_equal(head["masked_scores"], masked, f"head {h} masked_scores")
    assert body["shapes"]["attn_weights"] == list(trace.attn_weights.shape)


def test_causal_preset_masks_exactly_the_future(client, details):
    body = attention(client, details["gpt-head-32d"]["spec"])
    masked = body["heads"][0]["masked_scores"]
    for i, row in enumerate(masked):
        assert [v is None for v in row] == [j > i for j in range(len(row))]


def test_steps_filter_returns_only_those_steps(client, details):
    body = attention(client, {**details["bank-raw"]["spec"], "steps": ["attn_weights"]})
    head = body["heads"][0]
    assert head["attn_weights"] is not None
    assert head.get("q") is None and body["x"] is None and body["output"] is None


def test_vocabularies_list_the_toy_words(client):
    (toy,) = client.get("/api/vocabularies").json()
    assert toy["dim"] == 4
    assert toy["words"]["bank"] == pytest.approx([0.8, 0.8, 0.2, 0.0])
    assert sorted(toy["words"]) == ["bank", "loan", "money", "mud", "stream"]
