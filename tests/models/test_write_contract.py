"""The contract's generation, ``TextModel.write``: every model that writes answers the same
``Written`` (what ``generate`` wrote, which rows it wrote, and the pass over what it read and
wrote, equal to transformers' eager maps of those ids); a model that only reads refuses."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from attention_core.errors import SpecError
from attention_core.models import ModelRegistry
from attention_core.models.base.contract import NO_OPTIONS, KeptStack
from attention_core.models.families.bert import Encoder
from attention_core.models.maps.map_grid import MapQuery
from attention_core.models.maps.pooling import Region
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.requires import require

PROMPT = "The cat sat on the mat because"
TOL = 1e-5


@pytest.fixture(scope="module")
def registry(checkpoints: Path, tmp_path_factory: pytest.TempPathFactory) -> ModelRegistry:
    root = tmp_path_factory.mktemp("write-seq2seq")
    make_seq2seq(root / "tiny-marian", "marian")
    return ModelRegistry(
        include_package=False, builtin_dir=None, env_paths=[checkpoints, root], max_loaded=4
    )


def whole_maps(stack: KeptStack, layer: int) -> torch.Tensor:
    """Every head's full map of one layer, rebuilt from what the pass kept: (H, T, S)."""
    T, S = len(stack.tokens), len(stack.key_tokens.tokens)
    return stack.grid(layer, MapQuery(None, Region(0, T, 0, S), (1, 1), None)).heads


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama"])
def test_a_decoder_writes_what_generate_writes_and_rereads_prompt_and_written_ids(
    name: str, registry: ModelRegistry, hf_decoder: Callable[[str], torch.nn.Module]
) -> None:
    model = registry.load(name)
    assert model.capabilities.writes
    written = model.write(PROMPT, 6, temperature=0.8, seed=3)
    generated = model.generate(PROMPT, 6, temperature=0.8, seed=3)
    assert written.new_ids == generated.new_ids and len(written.new_ids) == 6
    assert written.new_tokens == generated.new_tokens
    assert (written.text, written.stop_reason, written.seed) == (
        generated.text,
        generated.stop_reason,
        3,
    )
    read = len(generated.prompt)
    assert written.read == read
    assert written.rows_written == (False,) * read + (True,) * 6
    stack = written.reread(NO_OPTIONS).stack()
    assert stack.tokens == generated.prompt.tokens + generated.new_tokens
    ids = torch.tensor([generated.prompt.input_ids + generated.new_ids])
    with torch.inference_mode():
        want = hf_decoder(name)(ids, output_attentions=True).attentions
    for layer, expected in enumerate(want):
        torch.testing.assert_close(whole_maps(stack, layer), expected[0], atol=TOL, rtol=0)


def test_an_encoder_decoder_writes_a_target_and_rereads_its_three_stacks(
    registry: ModelRegistry,
) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = require("transformers")
    model = registry.load("tiny-marian")
    assert model.capabilities.writes
    written = model.write(PROMPT, 5)
    generated = model.generate(PROMPT, 5, capture_attentions=False)
    assert written.new_ids == generated.new_ids and written.text == generated.text
    assert written.seed is None  # greedy
    read = len(generated.source)
    assert written.read == read and written.rows_written == (False,) * read
    passed = written.reread(NO_OPTIONS)
    source = passed.stack("encoder")
    decoder, cross = passed.stack("decoder"), passed.stack("cross")
    assert len(decoder.tokens) == 1 + len(written.new_ids)  # the start token, then each one
    path = registry.entry("tiny-marian").path
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        path, attn_implementation="eager", local_files_only=True
    ).eval()
    source_ids = torch.tensor([source.tokenized.input_ids])
    target_ids = torch.tensor([decoder.tokenized.input_ids])
    assert target_ids[0, 1:].tolist() == list(written.new_ids)
    with torch.inference_mode():
        out = hf(input_ids=source_ids, decoder_input_ids=target_ids, output_attentions=True)
    for stack, want in (
        (source, out.encoder_attentions),
        (decoder, out.decoder_attentions),
        (cross, out.cross_attentions),
    ):
        for layer, expected in enumerate(want):
            torch.testing.assert_close(whole_maps(stack, layer), expected[0], atol=TOL, rtol=0)


def test_an_encoder_refuses_to_write(encoder: Encoder) -> None:
    assert not encoder.capabilities.writes
    with pytest.raises(SpecError) as refused:
        encoder.write(PROMPT, 3)
    assert refused.value.field == "model"
    assert "cannot write one" in refused.value.message
