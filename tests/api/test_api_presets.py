"""Every preset through the API: listed, described, expanded, and giving REFERENCE.md's numbers.

The printed values are copied from shared/REFERENCE.md and the seed tutorials it
cites; each comes back from POST /api/attention to the printed digits.  The
exact-equality tests check that serialization loses nothing: every float32 the
core computes reads back from the JSON as the same float32.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core import PRESETS, get_preset, run
from attention_core.presets import FINANCE, RIVER

PRESET_NAMES = sorted(PRESETS)
HEAD_STEPS = ("q", "k", "v", "attn_scores", "scaled_scores", "attn_weights", "context_vec")

SEED_004 = {
    "bank-raw": (
        "[[1.001,0.188,0.047,0.438],[0.949,0.356,0.089,0.313],[0.987,0.150,0.037,0.520]]",
        "[[0.161,1.181,0.040,0.243],[0.325,1.078,0.081,0.190],[0.158,1.163,0.040,0.278]]",
    ),
    "bank-hand-set": (
        "[[0.992,0.221,0.261],[0.957,0.314,0.256],[0.986,0.232,0.263]]",
        "[[0.188,1.158,0.169],[0.297,1.089,0.180],[0.204,1.146,0.172]]",
    ),
    "bank-seeded-rand": (
        "[[0.540,0.705,1.030],[0.538,0.706,1.030],[0.541,0.703,1.025]]",
        "[[0.220,0.418,0.642],[0.213,0.404,0.624],[0.216,0.409,0.630]]",
    ),
}
OMEGA = """[[ 8.7252, 10.8803, 11.0007,  7.7678,  9.7598],
 [ 9.7351, 12.0370, 12.2923,  8.7149, 10.9628],
 [10.4691, 12.9987, 13.1878,  9.3438, 11.8256],
 [ 7.7531,  9.6199,  9.7608,  6.9217,  8.7864],
 [ 8.8185, 10.9612, 11.1314,  7.8699,  9.8633]]"""
WEIGHTS = """[[0.1069, 0.3140, 0.3335, 0.0662, 0.1793],
 [0.0980, 0.3099, 0.3521, 0.0589, 0.1811],
 [0.0911, 0.3227, 0.3547, 0.0519, 0.1795],
 [0.1162, 0.2954, 0.3170, 0.0767, 0.1947],
 [0.1063, 0.3103, 0.3379, 0.0662, 0.1793]]"""
CONTEXT_RAND = """[[1.3246, 1.5236, 1.8652, 2.3285],
 [1.3301, 1.5304, 1.8753, 2.3433],
 [1.3325, 1.5353, 1.8866, 2.3537],
 [1.3211, 1.5153, 1.8390, 2.3002],
 [1.3253, 1.5242, 1.8657, 2.3304]]"""
CONTEXT_LINEAR = """[[ 0.0174,  0.0553, -0.1093,  0.1026],
 [ 0.0175,  0.0556, -0.1089,  0.1024],
 [ 0.0175,  0.0559, -0.1087,  0.1022],
 [ 0.0179,  0.0544, -0.1091,  0.1028],
 [ 0.0172,  0.0543, -0.1105,  0.1032]]"""
W0_003 = """[[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.1574, 0.8426, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.2088, 0.1646, 0.6266, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.5792, 0.1187, 0.1889, 0.1131, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.0294, 0.1052, 0.0469, 0.0276, 0.7909, 0.0000, 0.0000, 0.0000],
 [0.0176, 0.2689, 0.0215, 0.0089, 0.6812, 0.0019, 0.0000, 0.0000],
 [0.1691, 0.4066, 0.0438, 0.0416, 0.1048, 0.2012, 0.0329, 0.0000],
 [0.0210, 0.0843, 0.0555, 0.2297, 0.0573, 0.0709, 0.2423, 0.2391]]"""
OUT0_ROW0_003 = """[-0.1571,  0.8801,  0.1615, -0.7824, -0.1429,  0.7468,  0.1007, -0.5239,
  -0.8873,  0.1907,  0.1762, -0.5943, -0.4812, -0.4860,  0.2862,  0.5710]"""
OUT0_ROW0_000 = """[ 6.6016e-02,  8.6541e-02, -2.1800e-03, -9.7871e-02,  4.9378e-02,
  -8.4692e-02, -1.6165e-01, -4.9517e-02,  1.2838e-01,  1.3316e-01,
   9.1477e-03,  5.9705e-02,  1.5792e-01, -3.8152e-02,  4.1841e-02,
  -8.9396e-02]"""


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


@pytest.mark.parametrize("name", sorted(SEED_004))
def test_seed_004_river_and_finance(client, details, name, assert_printed):
    spec = details[name]["spec"]
    assert spec["tokens"] == list(RIVER)
    river, finance = SEED_004[name]
    assert_printed(attention(client, spec)["output"], river)
    assert_printed(attention(client, {**spec, "tokens": list(FINANCE)})["output"], finance)


def test_seed_001_next_day_rand(client, details, assert_printed):
    body = attention(client, details["next-day-rand"]["spec"])
    head = body["heads"][0]
    assert body["scale"] == 0.5
    assert_printed(head["q"][1], "[0.8463, 2.3367, 1.1531, 1.9900]")
    assert_printed(head["attn_scores"], OMEGA)
    assert_printed(head["attn_weights"], WEIGHTS)
    assert_printed(head["context_vec"], CONTEXT_RAND)
    assert_printed(body["output"], CONTEXT_RAND)
    assert_printed(body["output"][0], "[1.3246, 1.5236, 1.8652, 2.3285]")


def test_seed_001_next_day_linear(client, details, assert_printed):
    body = attention(client, details["next-day-linear"]["spec"])
    assert_printed(body["output"], CONTEXT_LINEAR)
    assert_printed(body["heads"][0]["context_vec"][0], "[0.0174, 0.0553, -0.1093, 0.1026]")


def test_seed_003_gpt_head_32d(client, details, assert_printed):
    body = attention(client, details["gpt-head-32d"]["spec"])
    assert body["scale"] == 1.0
    weights = body["heads"][0]["attn_weights"]
    assert_printed(weights, W0_003)
    assert_printed(weights[1][:3], "[0.1574, 0.8426, 0.0000]")
    assert_printed(body["output"][0], OUT0_ROW0_003)


def test_seed_000_gpt_head_2d(client, details, assert_printed):
    body = attention(client, details["gpt-head-2d"]["spec"])
    assert body["scale"] == pytest.approx(16**-0.5)
    assert_printed(body["output"][0], OUT0_ROW0_000)
    assert_printed(body["output"][0][:3], "[0.0660, 0.0865, -0.0022]")


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
