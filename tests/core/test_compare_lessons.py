"""compare(): how a shared word moves between two sentences; and the sqrt(d_k) lessons."""

from __future__ import annotations

import math

import pytest
import torch

from attention_core import PRESETS, compare, cosine, dot_product_variance, get_preset, run
from attention_core.presets import FINANCE, RIVER

BANK_PRESETS = sorted(name for name, p in PRESETS.items() if p.compare_tokens is not None)


def test_bank_presets_are_the_three_of_seed_004():
    assert BANK_PRESETS == ["bank-hand-set", "bank-raw", "bank-seeded-rand"]


@pytest.mark.parametrize("name", BANK_PRESETS)
def test_bank_enters_equal_and_leaves_different(name):
    preset = get_preset(name)
    comparison = compare(preset.spec, preset.spec.tokens, preset.compare_tokens)
    (bank,) = comparison.shared
    assert (bank.token, bank.position_a, bank.position_b) == ("bank", 1, 1)
    assert bank.input_cosine == pytest.approx(1.0, abs=1e-6)
    assert bank.input_distance == 0
    assert bank.output_cosine < 1
    assert bank.output_distance > 0
    out_a, out_b = comparison.trace_a.output[1], comparison.trace_b.output[1]
    assert bank.output_cosine == pytest.approx(
        float(torch.nn.functional.cosine_similarity(out_a, out_b, dim=0)), abs=1e-6
    )
    assert bank.output_distance == pytest.approx(float(torch.dist(out_a, out_b)), abs=1e-6)
    assert comparison.trace_a.x.shape[0] == len(RIVER)
    assert comparison.trace_b.x.shape[0] == len(FINANCE)


def test_compare_lists_each_shared_token_once_at_its_first_position():
    spec = get_preset("bank-raw").spec
    comparison = compare(spec, ("bank", "mud", "bank", "loan"), ("loan", "stream", "bank"))
    found = {s.token: (s.position_a, s.position_b) for s in comparison.shared}
    assert found == {"bank": (0, 2), "loan": (3, 0)}
    assert [s.token for s in comparison.shared] == ["bank", "loan"]  # in sentence-a order
    assert compare(spec, ("mud",), ("money",)).shared == ()


def test_compare_traces_equal_separate_runs():
    preset = get_preset("bank-hand-set")
    comparison = compare(preset.spec, RIVER, FINANCE)
    torch.testing.assert_close(comparison.trace_a.output, run(preset.spec).output)


def test_cosine():
    a = torch.tensor([1.0, 0.0])
    assert cosine(a, torch.tensor([2.0, 0.0])) == pytest.approx(1.0)
    assert cosine(a, torch.tensor([0.0, 3.0])) == pytest.approx(0.0)
    assert cosine(a, -a) == pytest.approx(-1.0)
    assert cosine(a, torch.zeros(2)) == 0.0


def test_dot_product_variance_tracks_dim_then_one():
    rows = dot_product_variance([5, 20, 100], trials=2000)
    assert [r.dim for r in rows] == [5, 20, 100]
    for row in rows:
        assert abs(row.variance_unscaled - row.dim) <= 0.15 * row.dim
        assert abs(row.variance_scaled - 1) <= 0.15
        assert row.variance_scaled == pytest.approx(row.variance_unscaled / row.dim)
    # Unscaled variance grows with the dimension; the point of the lesson.
    assert rows[0].variance_unscaled < rows[1].variance_unscaled < rows[2].variance_unscaled


def test_dot_product_variance_is_seeded():
    first = dot_product_variance([8], trials=500, seed=3)
    assert dot_product_variance([8], trials=500, seed=3) == first
    assert dot_product_variance([8], trials=500, seed=4) != first


def test_softmax_sharpness_rows():
    from attention_core import softmax_sharpness

    rows = softmax_sharpness([0.1, -0.2, 0.3, -0.2, 0.5], [0.0, 1.0, 8.0])
    assert [r.scale for r in rows] == [0.0, 1.0, 8.0]
    # Scale 0: uniform weights, the largest entropy possible.
    torch.testing.assert_close(torch.tensor(rows[0].weights), torch.full((5,), 0.2))
    assert rows[0].entropy == pytest.approx(math.log(5))
    for row in rows:
        assert sum(row.weights) == pytest.approx(1.0)
        assert row.max_weight == max(row.weights)
    assert rows[0].entropy > rows[1].entropy > rows[2].entropy
