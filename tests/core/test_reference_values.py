"""Every number in shared/REFERENCE.md, reproduced through the presets to the printed digits.

The expected values live in tests/reference_values.py (copied verbatim from the
tutorials in shared/seeds/, the oracle); each is checked with atol = half a unit
in its last printed digit.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attention_core import compare, get_preset, materialize, run, softmax_sharpness
from attention_core.presets import FINANCE, RIVER
from tests import reference_values as ref
from tests.printed import assert_printed

# ---- seed 004: "bank" in two contexts ----


@pytest.mark.parametrize("name", sorted(ref.SEED_004_OUTPUTS))
def test_seed_004_river_and_finance_via_compare(name):
    preset = get_preset(name)
    assert preset.spec.tokens == RIVER and preset.compare_tokens == FINANCE
    river, finance = ref.SEED_004_OUTPUTS[name]
    comparison = compare(preset.spec, preset.spec.tokens, preset.compare_tokens)
    assert_printed(comparison.trace_a.output, river)
    assert_printed(comparison.trace_b.output, finance)


@pytest.mark.parametrize("name", sorted(ref.SEED_004_OUTPUTS))
def test_seed_004_finance_via_replace(name):
    preset = get_preset(name)
    trace = run(dataclasses.replace(preset.spec, tokens=FINANCE))
    assert_printed(trace.output, ref.SEED_004_OUTPUTS[name][1])


def test_seed_004_embeddings_and_raw_scores():
    river = run(get_preset("bank-raw").spec)
    finance = run(dataclasses.replace(get_preset("bank-raw").spec, tokens=FINANCE))
    assert_printed(river.x, ref.SEED_004_X_RIVER)
    assert_printed(finance.x, ref.SEED_004_X_FINANCE)
    # softmax(x xᵀ) with no scaling: the scores printed in the seed, unscaled.
    assert river.scale == 1.0
    assert_printed(river.attn_scores[0], ref.SEED_004_SCORES_RIVER)
    assert_printed(finance.attn_scores[0], ref.SEED_004_SCORES_FINANCE)


# ---- seed 001: "The next day is bright" ----


@pytest.fixture(scope="module")
def next_day_rand():
    return run(get_preset("next-day-rand").spec)


def test_seed_001_projection_matrices():
    projections = materialize(get_preset("next-day-rand").spec).projections
    assert_printed(projections.W_query, ref.SEED_001_W_QUERY)
    assert_printed(projections.W_key, ref.SEED_001_W_KEY)
    assert_printed(projections.W_value, ref.SEED_001_W_VALUE)


def test_seed_001_query_2(next_day_rand):
    assert_printed(next_day_rand.q[0, 1], ref.SEED_001_QUERY_2)


def test_seed_001_scores_omega(next_day_rand):
    assert_printed(next_day_rand.attn_scores[0], ref.SEED_001_OMEGA)
    assert_printed(next_day_rand.attn_scores[0, 1, 1], ref.SEED_001_ATTN_SCORE_22)


def test_seed_001_weights_are_softmax_of_omega_over_2(next_day_rand):
    assert next_day_rand.scale == pytest.approx(0.5)
    assert_printed(next_day_rand.attn_weights[0], ref.SEED_001_WEIGHTS)
    assert_printed(
        next_day_rand.attn_weights[0].sum(dim=1), "[1.0000, 1.0000, 1.0000, 1.0000, 1.0000]"
    )


def test_seed_001_context_rows(next_day_rand):
    assert_printed(next_day_rand.output, ref.SEED_001_CONTEXT_RAND)
    assert_printed(next_day_rand.output[0], ref.SEED_001_CONTEXT_RAND_FIRST_ROW)
    assert_printed(next_day_rand.context_vec[0, 1], ref.SEED_001_CONTEXT_VEC_2)


def test_seed_001_linear_789_context_rows():
    trace = run(get_preset("next-day-linear").spec)
    assert_printed(trace.output, ref.SEED_001_CONTEXT_LINEAR)
    assert_printed(trace.output[0], ref.SEED_001_CONTEXT_LINEAR_FIRST_ROW)


def test_seed_001_softmax_sharpness():
    plain, sharp = softmax_sharpness(list(ref.SEED_001_SOFTMAX_SCORES), [1.0, 8.0])
    assert_printed(torch.tensor(plain.weights), ref.SEED_001_SOFTMAX)
    assert_printed(torch.tensor(sharp.weights), ref.SEED_001_SOFTMAX_TIMES_8)
    assert sharp.max_weight > plain.max_weight
    assert sharp.entropy < plain.entropy


# ---- seeds 000 and 003: nanoGPT-style causal heads ----


def test_seed_003_weights_w0():
    trace = run(get_preset("gpt-head-32d").spec)
    assert trace.scale == 1.0  # the tutorial leaves the scores unscaled
    assert_printed(trace.attn_weights[0], ref.SEED_003_W0)
    assert_printed(trace.attn_weights[0, 1, :3], ref.SEED_003_W0_ROW_2_START)


def test_seed_003_first_output_rows():
    trace = run(get_preset("gpt-head-32d").spec)
    assert_printed(trace.output[:6], ref.SEED_003_OUT0_ROWS_0_TO_5)
    assert_printed(trace.output[6, 0], ref.SEED_003_OUT0_ROW_6_FIRST)  # row 6's one full number


def test_seed_000_out0_rows():
    trace = run(get_preset("gpt-head-2d").spec)
    assert trace.scale == pytest.approx(16**-0.5)
    assert_printed(trace.output[:4], ref.SEED_000_OUT0_ROWS_0_TO_3)
    assert_printed(trace.output[0, :3], ref.SEED_000_OUT0_FIRST_ROW_START)


def test_causal_average_tril_weights():
    trace = run(get_preset("causal-average").spec)
    assert_printed(trace.attn_weights[0], ref.CAUSAL_AVERAGE_WEIGHTS)
    assert bool((trace.attn_weights[0].triu(diagonal=1) == 0).all())
