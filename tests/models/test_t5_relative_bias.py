"""T5's relative position bias as a rule (``hf.relative_bias``): its blocks are
transformers' own ``compute_bias``'s, and a long pass never makes it whole (once
(1, H, S, S) floats, every head's whole map's worth, held through each stack; the
cross-attention's (1, H, T, S) zeros too).
Equal to transformers' eager maps at every length: test_stack_matrix.py."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from attention_core.blocked_attention import DEFAULT_BLOCK_CELLS
from attention_core.models.base.result_cache import ResultCache
from attention_core.models.hf.relative_bias import RelativePositionBias
from attention_core.models.hf.seq2seq import EncoderDecoder
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.models.test_long_maps import LargestOutput
from tests.requires import require

SENTENCE = "The cat sat on the mat, and the dog ran in the park. "


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> EncoderDecoder:
    require("transformers")
    directory = make_seq2seq(tmp_path_factory.mktemp("t5-bias") / "t5", "t5", seed=3)
    return EncoderDecoder.from_dir(directory, max_tokens=2048)


def _tables(model: EncoderDecoder) -> list[Any]:
    return [m for m in model.model.modules() if getattr(m, "has_relative_attention_bias", False)]


@pytest.mark.parametrize("past", [0, 5])
def test_each_block_is_transformers_bias_there(model: EncoderDecoder, past: int) -> None:
    """Rows and columns of the encoder's and the decoder's tables (the decoder's queries
    ``past`` positions on, as a cached step's), and two heads of them, in that order."""
    encoder, decoder = _tables(model)
    assert not encoder.is_decoder and decoder.is_decoder
    T, S = 30, 40
    for module in (encoder, decoder):
        with torch.inference_mode():
            whole = type(module).compute_bias(module, T, S, past_seen_tokens=past)[0]
            rule = module.compute_bias(T, S, past_seen_tokens=past)
            assert isinstance(rule, RelativePositionBias) and rule.shape == (4, T, S)
            torch.testing.assert_close(rule.full(), whole, atol=0, rtol=0)
            torch.testing.assert_close(rule.block((7, 19), (3, 31)), whole[:, 7:19, 3:31])
            two = rule.heads(torch.tensor([3, 1]))
            torch.testing.assert_close(two.block((2, 9), (0, S)), whole[[3, 1], 2:9])
            torch.testing.assert_close(two.heads(torch.tensor([1])).full(), whole[[1]])


def test_a_long_source_and_target_never_make_a_bias_whole(model: EncoderDecoder) -> None:
    """A 1,840-token source and a 920-token target (every map gathered block by block),
    and a generation after the source: no tensor over one block's budget of scores, so
    none of the encoder's (H, S, S) bias, the decoder's (H, T, T) or the cross-attention's
    (H, T, S) zeros."""
    source, target = SENTENCE * 80, SENTENCE * 40
    S, T = len(model.tokenize(source).input_ids), len(model.tokenize(target).input_ids)
    H = model.info().heads
    assert S > 1500 and T > 800 and H * T * S > DEFAULT_BLOCK_CELLS
    model.long_cache = ResultCache(0)  # the pass runs under the watch
    with torch.inference_mode(), LargestOutput() as watched:
        model.forward_stacks(source, target=target)
        model.generate(source, 2, capture_attentions=False)
    assert watched.largest <= DEFAULT_BLOCK_CELLS
