"""An encoder-decoder's maps and analyses never make the target's logits over the whole
vocabulary: its stacks run without the LM head (``seq2seq_stacks``), the analyses unembed
one batch row's states a bounded block at a time (``unembedding``).

Once T5's (its LM class is its own base model) made them on every pass, and an ablation's
batch made them for every row at once: (rows, T, V) floats, 1 GB at 1,024 target tokens
of a 250,027-word vocabulary for each row."""

from __future__ import annotations

import pytest
import torch

from attention_core.analysis.seq2seq_heads import each_head_effects, read, seq2seq_lens
from attention_core.analysis.seq2seq_scores import score_stack
from attention_core.models.hf.seq2seq import EncoderDecoder
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.models.test_long_maps import LargestOutput
from tests.requires import require

SOURCE = "The cat sat on the mat, and the dog ran in the park."
TARGET = "Die Katze sass auf der Matte."
VOCAB = 8192  # the config's (the tokenizer's ids are the first 200): T × V dwarfs every map


@pytest.fixture(scope="module", params=["t5", "bart"])
def model(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> EncoderDecoder:
    require("transformers")
    directory = tmp_path_factory.mktemp("logits") / request.param
    make_seq2seq(directory, request.param, vocab_size=VOCAB)
    return EncoderDecoder.from_dir(directory, max_tokens=64)


def test_no_pass_makes_the_targets_logits(model: EncoderDecoder) -> None:
    """The maps, the contract's pass, a head trace and the head scores (induction's pass
    too): no tensor of T × V (one row of logits per target position)."""
    T = len(read(model, SOURCE, TARGET).target)
    with torch.inference_mode(), LargestOutput() as watched:
        model.encode_pair(SOURCE, TARGET)
        model.forward_stacks(SOURCE, target=TARGET)
        model.trace_stack(SOURCE, TARGET, "cross", 1)
        score_stack(model, SOURCE, TARGET, "decoder", induction_length=8)
    assert watched.largest < T * VOCAB


def test_the_ablation_and_the_lens_unembed_one_row_at_a_time(model: EncoderDecoder) -> None:
    """Each head ablated (a batch of 1 + L × H rows) and the lens: the logits of one row's
    target at most."""
    text = read(model, SOURCE, TARGET)
    with torch.inference_mode(), LargestOutput() as watched:
        effects = each_head_effects(model, text, "encoder")
        seq2seq_lens(model, text)
    assert effects.shape == (2, 4) and bool(torch.isfinite(effects).all())
    assert watched.largest <= len(text.target) * VOCAB
