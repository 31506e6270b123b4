"""Every number in shared/REFERENCE.md, reproduced through the presets to the printed digits.

The expected values are copied verbatim from the tutorials in shared/seeds/
(the oracle); each is checked with atol = half a unit in its last printed digit.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attention_core import compare, get_preset, run, softmax_sharpness
from attention_core.presets import FINANCE, RIVER

# ---- seed 004: "bank" in two contexts (printed with precision=3) ----

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


@pytest.mark.parametrize("name", sorted(SEED_004))
def test_seed_004_river_and_finance_via_compare(name, assert_printed):
    preset = get_preset(name)
    assert preset.spec.tokens == RIVER and preset.compare_tokens == FINANCE
    river, finance = SEED_004[name]
    comparison = compare(preset.spec, preset.spec.tokens, preset.compare_tokens)
    assert_printed(comparison.trace_a.output, river)
    assert_printed(comparison.trace_b.output, finance)


@pytest.mark.parametrize("name", sorted(SEED_004))
def test_seed_004_finance_via_replace(name, assert_printed):
    preset = get_preset(name)
    trace = run(dataclasses.replace(preset.spec, tokens=FINANCE))
    assert_printed(trace.output, SEED_004[name][1])


def test_seed_004_embeddings_and_raw_scores(assert_printed):
    river = run(get_preset("bank-raw").spec)
    finance = run(dataclasses.replace(get_preset("bank-raw").spec, tokens=FINANCE))
    assert_printed(
        river.x,
        "[[1.200, 0.000, 0.000, 0.300],[0.800, 0.800, 0.200, 0.000],[0.900, 0.000, 0.000, 0.900]]",
    )
    assert_printed(
        finance.x,
        "[[0.000, 1.400, 0.000, 0.100],[0.800, 0.800, 0.200, 0.000],[0.000, 1.100, 0.000, 0.600]]",
    )
    # softmax(x xᵀ) with no scaling: the scores printed in the seed, unscaled.
    assert river.scale == 1.0
    assert_printed(
        river.attn_scores[0], "[[1.530, 0.960, 1.350],[0.960, 1.320, 0.720],[1.350, 0.720, 1.620]]"
    )
    assert_printed(
        finance.attn_scores[0],
        "[[1.970, 1.120, 1.600],[1.120, 1.320, 0.880],[1.600, 0.880, 1.570]]",
    )


# ---- seed 001: "The next day is bright" (precision 4) ----

W_QUERY_123 = """[[0.2961, 0.5166, 0.2517, 0.6886], [0.0740, 0.8665, 0.1366, 0.1025],
 [0.1841, 0.7264, 0.3153, 0.6871], [0.0756, 0.1966, 0.3164, 0.4017],
 [0.1186, 0.8274, 0.3821, 0.6605], [0.8536, 0.5932, 0.6367, 0.9826],
 [0.2745, 0.6584, 0.2775, 0.8573], [0.8993, 0.0390, 0.9268, 0.7388]]"""
W_KEY_123 = """[[0.7179, 0.7058, 0.9156, 0.4340], [0.0772, 0.3565, 0.1479, 0.5331],
 [0.4066, 0.2318, 0.4545, 0.9737], [0.4606, 0.5159, 0.4220, 0.5786],
 [0.9455, 0.8057, 0.6775, 0.6087], [0.6179, 0.6932, 0.4354, 0.0353],
 [0.1908, 0.9268, 0.5299, 0.0950], [0.5789, 0.9131, 0.0275, 0.1634]]"""
W_VALUE_123 = """[[0.3009, 0.5201, 0.3834, 0.4451], [0.0126, 0.7341, 0.9389, 0.8056],
 [0.1459, 0.0969, 0.7076, 0.5112], [0.7050, 0.0114, 0.4702, 0.8526],
 [0.7320, 0.5183, 0.5983, 0.4527], [0.2251, 0.3111, 0.1955, 0.9153],
 [0.7751, 0.6749, 0.1166, 0.8858], [0.6568, 0.8459, 0.3033, 0.6060]]"""
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


@pytest.fixture(scope="module")
def next_day_rand():
    return run(get_preset("next-day-rand").spec)


def test_seed_001_projection_matrices(assert_printed):
    from attention_core import materialize

    projections = materialize(get_preset("next-day-rand").spec).projections
    assert_printed(projections.W_query, W_QUERY_123)
    assert_printed(projections.W_key, W_KEY_123)
    assert_printed(projections.W_value, W_VALUE_123)


def test_seed_001_query_2(next_day_rand, assert_printed):
    assert_printed(next_day_rand.q[0, 1], "[0.8463, 2.3367, 1.1531, 1.9900]")


def test_seed_001_scores_omega(next_day_rand, assert_printed):
    assert_printed(next_day_rand.attn_scores[0], OMEGA)
    assert_printed(next_day_rand.attn_scores[0, 1, 1], "12.0370")


def test_seed_001_weights_are_softmax_of_omega_over_2(next_day_rand, assert_printed):
    assert next_day_rand.scale == pytest.approx(0.5)
    assert_printed(next_day_rand.attn_weights[0], WEIGHTS)
    assert_printed(
        next_day_rand.attn_weights[0].sum(dim=1), "[1.0000, 1.0000, 1.0000, 1.0000, 1.0000]"
    )


def test_seed_001_context_rows(next_day_rand, assert_printed):
    assert_printed(next_day_rand.output, CONTEXT_RAND)
    assert_printed(next_day_rand.context_vec[0, 1], "[1.3301, 1.5304, 1.8753, 2.3433]")


def test_seed_001_linear_789_context_rows(assert_printed):
    trace = run(get_preset("next-day-linear").spec)
    assert_printed(trace.output, CONTEXT_LINEAR)


def test_seed_001_softmax_sharpness(assert_printed):
    plain, sharp = softmax_sharpness([0.1, -0.2, 0.3, -0.2, 0.5], [1.0, 8.0])
    assert_printed(torch.tensor(plain.weights), "[0.1925, 0.1426, 0.2351, 0.1426, 0.2872]")
    assert_printed(torch.tensor(sharp.weights), "[0.0326, 0.0030, 0.1615, 0.0030, 0.8000]")
    assert sharp.max_weight > plain.max_weight
    assert sharp.entropy < plain.entropy


# ---- seeds 000 and 003: nanoGPT-style causal heads ----

W0_003 = """[[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.1574, 0.8426, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.2088, 0.1646, 0.6266, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.5792, 0.1187, 0.1889, 0.1131, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.0294, 0.1052, 0.0469, 0.0276, 0.7909, 0.0000, 0.0000, 0.0000],
 [0.0176, 0.2689, 0.0215, 0.0089, 0.6812, 0.0019, 0.0000, 0.0000],
 [0.1691, 0.4066, 0.0438, 0.0416, 0.1048, 0.2012, 0.0329, 0.0000],
 [0.0210, 0.0843, 0.0555, 0.2297, 0.0573, 0.0709, 0.2423, 0.2391]]"""
# result_self_attention[0]: rows 0-5 are printed in full (row 6 is cut off).
OUT0_003 = """[[-0.1571,  0.8801,  0.1615, -0.7824, -0.1429,  0.7468,  0.1007, -0.5239,
  -0.8873,  0.1907,  0.1762, -0.5943, -0.4812, -0.4860,  0.2862,  0.5710],
 [ 0.6764, -0.5477, -0.2478,  0.3143, -0.1280, -0.2952, -0.4296, -0.1089,
  -0.0493,  0.7268,  0.7130, -0.1164,  0.3266,  0.3431, -0.0710,  1.2716],
 [ 0.4823, -0.1069, -0.4055,  0.1770,  0.1581, -0.1697,  0.0162,  0.0215,
  -0.2490, -0.3773,  0.2787,  0.1629, -0.2895, -0.0676, -0.1416,  1.2194],
 [ 0.1971,  0.2856, -0.1303, -0.2655,  0.0668,  0.1954,  0.0281, -0.2451,
  -0.4647,  0.0693,  0.1528, -0.2032, -0.2479, -0.1621,  0.1947,  0.7678],
 [ 0.2510,  0.7346,  0.5939,  0.2516,  0.2606,  0.7582,  0.5595,  0.3539,
  -0.5934, -1.0807, -0.3111, -0.2781, -0.9054,  0.1318, -0.1382,  0.6371],
 [ 0.3428,  0.4960,  0.4725,  0.3028,  0.1844,  0.5814,  0.3824,  0.2952,
  -0.4897, -0.7705, -0.1172, -0.2541, -0.6892,  0.1979, -0.1513,  0.7666]]"""
# out[0] of seed 000: rows 0-3 are printed in full, in scientific notation.
OUT0_000 = """[[ 6.6016e-02,  8.6541e-02, -2.1800e-03, -9.7871e-02,  4.9378e-02,
  -8.4692e-02, -1.6165e-01, -4.9517e-02,  1.2838e-01,  1.3316e-01,
   9.1477e-03,  5.9705e-02,  1.5792e-01, -3.8152e-02,  4.1841e-02,
  -8.9396e-02],
 [-2.5548e-01,  1.1884e-01, -2.2966e-01, -1.9912e-01,  3.3471e-01,
   1.5141e-01, -2.4099e-01,  7.8147e-02,  2.9808e-02,  2.5287e-01,
   1.9010e-01, -9.2274e-02,  2.7042e-01, -6.0876e-02, -1.4815e-01,
  -2.5797e-01],
 [-2.7583e-02,  1.5441e-01, -9.9084e-02, -2.0180e-01,  2.0019e-01,
  -3.8674e-02, -2.9640e-01, -2.6971e-02,  1.6753e-01,  2.6698e-01,
   9.0885e-02,  3.3340e-02,  3.0425e-01, -7.1635e-02, -1.1698e-02,
  -2.1629e-01],
 [ 1.5503e-01,  2.0607e-01, -6.6096e-03, -2.3345e-01,  1.1925e-01,
  -1.9999e-01, -3.8504e-01, -1.1699e-01,  3.0476e-01,  3.1750e-01,
   2.2893e-02,  1.4108e-01,  3.7636e-01, -9.0899e-02,  9.8343e-02,
  -2.1371e-01]]"""
TRIL_WEIGHTS = """[[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.5000, 0.5000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.3333, 0.3333, 0.3333, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.2500, 0.2500, 0.2500, 0.2500, 0.0000, 0.0000, 0.0000, 0.0000],
 [0.2000, 0.2000, 0.2000, 0.2000, 0.2000, 0.0000, 0.0000, 0.0000],
 [0.1667, 0.1667, 0.1667, 0.1667, 0.1667, 0.1667, 0.0000, 0.0000],
 [0.1429, 0.1429, 0.1429, 0.1429, 0.1429, 0.1429, 0.1429, 0.0000],
 [0.1250, 0.1250, 0.1250, 0.1250, 0.1250, 0.1250, 0.1250, 0.1250]]"""


def test_seed_003_weights_w0(assert_printed):
    trace = run(get_preset("gpt-head-32d").spec)
    assert trace.scale == 1.0  # the tutorial leaves the scores unscaled
    assert_printed(trace.attn_weights[0], W0_003)


def test_seed_003_first_output_rows(assert_printed):
    trace = run(get_preset("gpt-head-32d").spec)
    assert_printed(trace.output[:6], OUT0_003)
    assert_printed(trace.output[6, 0], "0.1866")  # the one complete number of row 6


def test_seed_000_out0_rows(assert_printed):
    trace = run(get_preset("gpt-head-2d").spec)
    assert trace.scale == pytest.approx(16**-0.5)
    assert_printed(trace.output[:4], OUT0_000)


def test_causal_average_tril_weights(assert_printed):
    trace = run(get_preset("causal-average").spec)
    assert_printed(trace.attn_weights[0], TRIL_WEIGHTS)
    assert bool((trace.attn_weights[0].triu(diagonal=1) == 0).all())
