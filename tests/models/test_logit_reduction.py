"""The LM head's logits reduced without writing their log-softmax (``unembedding``): the
top logits from a strided pre-selection equal a full ``topk``, and the log-probabilities
(the next token's, the top tokens') equal ``log_softmax``'s to float32 rounding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attention_core.analysis import unembedding
from attention_core.analysis.ablation import TOP_K, block_predictions
from attention_core.analysis.unembedding import log_probs_of, top_logits


def logits(rows: int, vocabulary: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, vocabulary, generator=torch.Generator().manual_seed(seed)) * 4


@pytest.mark.parametrize(("vocabulary", "strides"), [(1003, 8), (50257, 64), (64, 8), (40, 8)])
def test_top_logits_equal_a_full_topk(vocabulary: int, strides: int) -> None:
    x = logits(7, vocabulary)
    values, ids = top_logits(x, 5, strides)
    full = x.topk(5, dim=-1)
    assert torch.equal(values, full.values)
    assert torch.equal(ids, full.indices)


def test_top_logits_found_in_one_strided_set_in_the_tail_and_beside_minus_infinity() -> None:
    vocabulary, strides = 1003, 8
    width = vocabulary // strides  # 125: the sets are {c, c + 125, ...}; 1000..1002 the tail
    x = logits(3, vocabulary, seed=1)
    x[0, [7, 7 + width, 7 + 2 * width, 7 + 5 * width, 7 + 7 * width]] = 50.0 + torch.arange(5.0)
    x[1, [1000, 1001, 1002]] = 60.0  # equal: compared as a set below
    x[1, 3] = 59.0
    x[2, : vocabulary // 2] = float("-inf")
    values, ids = top_logits(x, 5, strides)
    full = x.topk(5, dim=-1)
    assert torch.equal(values, full.values)
    assert torch.equal(ids[[0, 2]], full.indices[[0, 2]])
    assert set(ids[1, :3].tolist()) == {1000, 1001, 1002}
    assert ids[1, 3] == 3


def test_equal_logits_give_distinct_ids_of_that_value() -> None:
    x = torch.zeros(2, 1003)
    values, ids = top_logits(x, 5, 8)
    assert torch.equal(values, torch.zeros(2, 5))
    assert all(len(set(row)) == 5 for row in ids.tolist())


def test_log_probabilities_equal_log_softmax() -> None:
    x = logits(9, 1003, seed=2)
    picked = torch.randint(0, 1003, (6, 1), generator=torch.Generator().manual_seed(3))
    chosen, ids, top = log_probs_of(x, picked, 5)
    reference = F.log_softmax(x, dim=-1)
    torch.testing.assert_close(chosen, reference[:6].gather(-1, picked), atol=1e-6, rtol=1e-6)
    full = reference.topk(5, dim=-1)
    assert torch.equal(ids, full.indices)
    torch.testing.assert_close(top, full.values, atol=1e-6, rtol=1e-6)


def test_block_predictions_equal_the_log_softmax_of_whole_logits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocks of 4 positions (the last one short; positions past ``following`` scored on
    none) give what one log-softmax over all of them gives."""
    monkeypatch.setattr(unembedding, "NORMALIZER_ROWS", 3)
    x = logits(10, 997, seed=4)
    following = torch.randint(0, 997, (9,), generator=torch.Generator().manual_seed(5))
    got = block_predictions(((r, x[r : r + 4]) for r in range(0, 10, 4)), following)
    reference = F.log_softmax(x, dim=-1)
    top = reference.topk(TOP_K, dim=-1)
    expected_next = reference[:9].gather(-1, following[:, None])[:, 0]
    torch.testing.assert_close(got.next_logprobs, expected_next, atol=1e-6, rtol=1e-6)
    assert torch.equal(got.top_ids, top.indices)
    torch.testing.assert_close(got.top_probs, top.values.exp(), atol=1e-6, rtol=1e-6)
