"""Encoder-decoders (T5, BART, Marian) through the transformers backend, every attention by
``attention_with_steps``: the three stacks' maps, greedy generation and one head of any
stack, each equal to transformers' eager attention on small random checkpoints."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.models.seq2seq_checkpoints import SEQ2SEQ, make_seq2seq
from tests.requires import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SOURCE = "The cat sat on the mat because it was tired."
TARGET = "Die Katze sass auf der Matte."
NAMES = sorted(SEQ2SEQ)
TOL = 1e-5
MAX_NEW = 12


@pytest.fixture(scope="module")
def seq2seq_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("seq2seq")
    for name, model_type in SEQ2SEQ.items():
        make_seq2seq(root / name, model_type)
    return root


@pytest.fixture(scope="module")
def ours(seq2seq_dir: Path) -> Callable[[str], Any]:
    from attention_core.models.hf.seq2seq import EncoderDecoder

    loaded: dict[str, EncoderDecoder] = {}

    def get(name: str) -> EncoderDecoder:
        if name not in loaded:
            loaded[name] = EncoderDecoder.from_dir(seq2seq_dir / name, max_tokens=64)
        return loaded[name]

    return get


@pytest.fixture(scope="module")
def theirs(seq2seq_dir: Path) -> Callable[[str], tuple[Any, Any]]:
    """name -> (transformers' model with eager attention, AutoTokenizer), offline."""
    transformers = require("transformers")
    loaded: dict[str, tuple[Any, Any]] = {}

    def get(name: str) -> tuple[Any, Any]:
        if name not in loaded:
            path = seq2seq_dir / name
            model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
                path, attn_implementation="eager", local_files_only=True
            ).eval()
            tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            loaded[name] = (model, tokenizer)
        return loaded[name]

    return get


def assert_layers_close(
    mine: Sequence[torch.Tensor], reference: Sequence[torch.Tensor], tol: float = TOL
) -> None:
    """Per layer (H, T, S) against transformers' (1, H, T, S)."""
    assert len(mine) == len(reference) > 0
    for layer, (a, b) in enumerate(zip(mine, reference, strict=True)):
        assert a.shape == b[0].shape, (layer, a.shape, b.shape)
        assert torch.allclose(a, b[0], atol=tol, rtol=0), (layer, float((a - b[0]).abs().max()))


@pytest.mark.parametrize("name", NAMES)
def test_three_stacks_equal_transformers_eager(
    name: str, ours: Callable[[str], Any], theirs: Callable[[str], tuple[Any, Any]]
) -> None:
    model, tokenizer = theirs(name)
    batch = tokenizer(SOURCE, text_target=TARGET, return_tensors="pt")
    with torch.inference_mode():
        reference = model(**batch, output_attentions=True)  # labels shifted right inside
    maps = ours(name).encode_pair(SOURCE, TARGET)

    # The source and the target tokenized as the tokenizer's text and text_target.
    assert list(maps.source.input_ids) == batch["input_ids"][0].tolist()
    assert list(maps.target.labels) == batch["labels"][0].tolist()
    start = model.generation_config.decoder_start_token_id
    assert maps.target.input_ids == (start, *batch["labels"][0].tolist()[:-1])
    assert maps.target.tokens[0] == tokenizer.convert_ids_to_tokens(start)
    assert maps.target.special[0] and "Katze" in "".join(maps.target.tokens)

    assert_layers_close(maps.encoder_attentions, reference.encoder_attentions)
    assert_layers_close(maps.decoder_attentions, reference.decoder_attentions)
    assert_layers_close(maps.cross_attentions, reference.cross_attentions)
    S, T = len(maps.source), len(maps.target)
    assert maps.cross_attentions[0].shape[-2:] == (T, S)
    # The decoder is causal: nothing above the diagonal (the mask reached our attention).
    upper = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert all(float(a[:, upper].abs().max()) == 0.0 for a in maps.decoder_attentions)
    # The rollout and head averages are the encoder's (the source's).
    assert maps.rollout.shape == (len(maps.encoder_attentions), S, S)


@pytest.mark.parametrize("name", NAMES)
def test_without_a_target_the_decoder_reads_its_start_token(
    name: str, ours: Callable[[str], Any], theirs: Callable[[str], tuple[Any, Any]]
) -> None:
    model, tokenizer = theirs(name)
    ids = tokenizer(SOURCE, return_tensors="pt").input_ids
    start = model.generation_config.decoder_start_token_id
    with torch.inference_mode():
        reference = model(
            input_ids=ids, decoder_input_ids=torch.tensor([[start]]), output_attentions=True
        )
    maps = ours(name).encode(SOURCE)
    assert maps.target.input_ids == (start,)
    assert_layers_close(maps.cross_attentions, reference.cross_attentions)
    assert_layers_close(maps.decoder_attentions, reference.decoder_attentions)


@pytest.mark.parametrize("name", NAMES)
def test_greedy_generation_gives_transformers_ids_and_maps(
    name: str, ours: Callable[[str], Any], theirs: Callable[[str], tuple[Any, Any]]
) -> None:
    model, tokenizer = theirs(name)
    ids = tokenizer(SOURCE, return_tensors="pt").input_ids
    with torch.inference_mode():
        reference = model.generate(
            ids,
            do_sample=False,
            num_beams=1,
            max_new_tokens=MAX_NEW,
            output_attentions=True,
            return_dict_in_generate=True,
        )
    written = ours(name).generate(SOURCE, MAX_NEW)
    expected = reference.sequences[0].tolist()
    assert [*written.target.input_ids] == expected
    assert list(written.new_ids) == expected[1:]
    eos = model.generation_config.eos_token_id
    assert written.stop_reason == ("eos" if expected[-1] == eos else "max_new_tokens")
    assert written.text == tokenizer.decode(expected[1:])

    # Every step's row equals the row transformers' generate() computed at that step
    # (the same KV cache), the last written token's own row comes from one more step.
    steps = len(reference.decoder_attentions)
    for step in range(steps):
        for layer in range(len(written.cross_attentions)):
            dec = reference.decoder_attentions[step][layer][0, :, -1]  # (H, step + 1)
            cross = reference.cross_attentions[step][layer][0, :, -1]  # (H, S)
            mine_dec = written.decoder_attentions[layer][:, step, : step + 1]
            assert torch.allclose(mine_dec, dec, atol=TOL, rtol=0), (step, layer)
            assert torch.allclose(written.cross_attentions[layer][:, step], cross, atol=TOL)
    # The whole target in one forward pass: the same maps (a cache adds rounding only).
    with torch.inference_mode():
        whole = model(
            input_ids=ids,
            decoder_input_ids=reference.sequences,
            output_attentions=True,
        )
    assert_layers_close(written.encoder_attentions, whole.encoder_attentions)
    assert_layers_close(written.decoder_attentions, whole.decoder_attentions, tol=1e-4)
    assert_layers_close(written.cross_attentions, whole.cross_attentions, tol=1e-4)


def test_generation_follows_the_checkpoints_rules(
    ours: Callable[[str], Any], theirs: Callable[[str], tuple[Any, Any]]
) -> None:
    """BART is forced to start with <s> and Marian never writes <pad>, as in generate()."""
    bart = ours("tiny-bart").generate(SOURCE, MAX_NEW)
    assert bart.new_ids[0] == theirs("tiny-bart")[0].generation_config.forced_bos_token_id
    marian_model = theirs("tiny-marian")[0]
    for text in (SOURCE, TARGET, "A dog ran in the park"):
        marian = ours("tiny-marian").generate(text, MAX_NEW)
        assert marian_model.generation_config.pad_token_id not in marian.new_ids
    # At the length limit the end token is forced (forced_eos_token_id).
    short = ours("tiny-marian").generate(SOURCE, 2)
    assert short.new_ids[-1] == marian_model.generation_config.forced_eos_token_id


def test_greedy_generation_reports_no_seed(ours: Callable[[str], Any]) -> None:
    """Temperature 0 draws nothing: a seed given or not plays no part, and none is reported."""
    model = ours(NAMES[0])
    unseeded, seeded = model.generate(SOURCE, 4), model.generate(SOURCE, 4, seed=7)
    assert unseeded.seed is None and seeded.seed is None
    assert unseeded.new_ids == seeded.new_ids


def test_sampling_is_reproducible_with_a_seed(ours: Callable[[str], Any]) -> None:
    model = ours("tiny-t5")
    first = model.generate(SOURCE, 8, temperature=1.5, seed=7)
    again = model.generate(SOURCE, 8, temperature=1.5, seed=7)
    assert first.new_ids == again.new_ids and first.seed == 7
    assert model.generate(SOURCE, 8, temperature=1.5, seed=8).new_ids != first.new_ids


def _projection(module: torch.nn.Module, name: str) -> torch.nn.Module:
    """BART/Marian's ``q_proj`` or T5's ``q``."""
    found = getattr(module, f"{name}_proj", None) or getattr(module, name)
    assert isinstance(found, torch.nn.Module)
    return found


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_one_head_of_any_stack_step_by_step(
    name: str, stack: str, ours: Callable[[str], Any], theirs: Callable[[str], tuple[Any, Any]]
) -> None:
    from attention_core.models import head_trace

    model, tokenizer = theirs(name)
    batch = tokenizer(SOURCE, text_target=TARGET, return_tensors="pt")
    with torch.inference_mode():
        reference = model(**batch, output_attentions=True)
    expected = getattr(reference, f"{stack}_attentions")
    mine = ours(name)
    layer, head = 1, 2
    rows, trace, source = mine.trace_stack(SOURCE, TARGET, stack, layer)
    one = head_trace(trace, head, causal=stack == "decoder")
    assert torch.allclose(one.attn_weights, expected[layer][0, head], atol=TOL, rtol=0)
    S, T = batch["input_ids"].shape[1], batch["labels"].shape[1]
    queries, keys = (S, S) if stack == "encoder" else (T, T) if stack == "decoder" else (T, S)
    assert one.attn_weights.shape == (queries, keys) and len(rows.tokens) == queries
    # x is the attention's input: q is its projection; a cross head's keys are the
    # projection of the encoder's output (source), a self-attention head's of x.
    _, module = mine.layer_modules[(stack, layer)]
    width = one.q.shape[-1]
    cut = slice(head * width, (head + 1) * width)
    with torch.inference_mode():
        q = _projection(module, "q")(one.x)[:, cut]
        k = _projection(module, "k")(one.x if source is None else source[0])[:, cut]
    assert torch.allclose(one.q, q, atol=1e-6) and torch.allclose(one.k, k, atol=1e-6)
    assert (source is None) == (stack != "cross")
    if source is not None:
        assert torch.allclose(source, reference.encoder_last_hidden_state, atol=1e-6)
    # T5 adds its relative positions to unscaled scores; BART and Marian scale by 1/sqrt(d).
    if name == "tiny-t5":
        assert one.scale == 1.0
    else:
        assert one.scale == pytest.approx(width**-0.5)


def test_bad_inputs_name_their_field(ours: Callable[[str], Any]) -> None:
    from attention_core import SpecError

    model = ours("tiny-marian")
    with pytest.raises(SpecError) as info:
        model.encode(SOURCE, text_b=TARGET)
    assert info.value.field == "text_b"
    with pytest.raises(SpecError) as info:
        model.trace_stack(SOURCE, TARGET, "cross", 5)
    assert info.value.field == "layer" and "layers 1 to 2" in info.value.message
    with pytest.raises(SpecError) as info:
        model.encode_pair(SOURCE, " ".join(["word"] * 80))
    assert info.value.field == "target" and "limit is 64" in info.value.message
    with pytest.raises(SpecError) as info:
        model.generate(SOURCE, 64)
    assert info.value.field == "max_new_tokens"
