"""Our GPT-2 against transformers' own, on small random checkpoints made here.

transformers is the oracle (eager attention, ``output_attentions=True``); no
weights are downloaded: each checkpoint is a random config saved with
``save_pretrained``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from attention_core import attention_with_steps
from attention_core.errors import SpecError
from attention_core.models import GPT2, GPT2Config, read_header
from attention_core.models.base import decoder_lm as decoder_lm_module
from tests.requires import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = require("transformers")
torch.set_num_threads(1)

TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}

VARIANTS = {
    "tied": {},
    "untied": {"tie_word_embeddings": False},
    "relu-inverse-layer-scale": {
        "activation_function": "relu",
        "scale_attn_by_inverse_layer_idx": True,
        "n_inner": 40,
    },
    "bf16": {"dtype": "bfloat16"},
}


def make_checkpoint(directory: Path, seed: int = 0, **overrides: object) -> Path:
    """A random transformers GPT-2 saved to ``directory`` (n_positions 32)."""
    dtype = overrides.pop("dtype", None)
    config = transformers.GPT2Config(
        vocab_size=61,
        n_positions=32,
        n_embd=24,
        n_layer=3,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
        **overrides,
    )
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(config)
    # Random LayerNorm gains and biases, so the norms are tested too.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "ln_" in name or name.endswith("bias"):
                param.normal_(mean=1.0 if name.endswith("weight") else 0.0, std=0.2)
    if dtype == "bfloat16":
        model = model.to(torch.bfloat16)
    model.save_pretrained(directory)
    return directory


def load_reference(directory: Path) -> torch.nn.Module:
    model = transformers.GPT2LMHeadModel.from_pretrained(
        directory, attn_implementation="eager", dtype=torch.float32
    )
    return model.eval()


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp(request.param)
    make_checkpoint(directory, **dict(VARIANTS[request.param]))
    return GPT2.from_pretrained(directory), load_reference(directory)


@pytest.mark.parametrize("length", [1, 17, 32])
def test_logits_attentions_hidden_states_match_transformers(pair, length: int) -> None:
    ours, reference = pair
    ids = torch.randint(0, 61, (2, length), generator=torch.Generator().manual_seed(length))
    with torch.inference_mode():
        got = ours(ids, output_attentions=True, output_hidden_states=True)
        want = reference(ids, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(got.logits, want.logits, **TOLERANCE)
    assert len(got.attentions) == len(want.attentions) == 3
    for a, b in zip(got.attentions, want.attentions, strict=True):
        assert a.shape == (2, 4, length, length)
        torch.testing.assert_close(a, b, **TOLERANCE)
    assert len(got.hidden_states) == len(want.hidden_states) == 4
    for a, b in zip(got.hidden_states, want.hidden_states, strict=True):
        torch.testing.assert_close(a, b, **TOLERANCE)


def test_causal_rows_sum_to_one_and_upper_triangle_is_zero(pair) -> None:
    ours, _ = pair
    with torch.inference_mode():
        out = ours(torch.arange(10)[None], output_attentions=True)
    for weights in out.attentions:
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, 4, 10))
        upper = ~torch.ones(10, 10, dtype=torch.bool).tril()
        assert bool((weights[..., upper] == 0).all())


def test_cached_decoding_equals_one_full_pass(pair) -> None:
    """Prefill 5 positions, then feed 1, 1 and 3 more: every row as in one pass."""
    ours, _ = pair
    ids = torch.randint(0, 61, (1, 10), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        full = ours(ids, output_attentions=True)
        cache = ours.new_cache()
        parts = [
            ours(chunk, cache=cache, output_attentions=True) for chunk in ids.split([5, 1, 1, 3], 1)
        ]
    assert cache.length == 10
    torch.testing.assert_close(torch.cat([p.logits for p in parts], 1), full.logits, **TOLERANCE)
    start = 0
    for part in parts:
        stop = start + part.logits.shape[1]
        for layer, weights in enumerate(part.attentions):
            assert weights.shape[-1] == stop  # the new rows see every cached key
            torch.testing.assert_close(
                weights, full.attentions[layer][:, :, start:stop, :stop], **TOLERANCE
            )
        start = stop


def test_trace_of_a_layer_is_the_attention_it_used(pair) -> None:
    ours, _ = pair
    ids = torch.arange(7)[None]
    with torch.inference_mode():
        out = ours(ids, output_attentions=True, trace_layer=1)
    trace = out.trace
    assert trace is not None and trace.layer == 1
    assert trace.x.shape == (1, 7, 24) and trace.q.shape == trace.k.shape == (1, 4, 7, 6)
    torch.testing.assert_close(trace.steps.attn_weights, out.attentions[1])
    block = ours.transformer.h[1]
    again = attention_with_steps(trace.q, trace.k, trace.v, is_causal=True, scale=block.attn.scale)
    torch.testing.assert_close(again.context_vec, trace.steps.context_vec)
    assert trace.steps.masked_scores[0, 0, 0, 1] == float("-inf")


def test_every_layer_goes_through_attention_with_steps(pair, monkeypatch) -> None:
    ours, _ = pair
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs.get("is_causal"))
        return attention_with_steps(*args, **kwargs)

    monkeypatch.setattr(decoder_lm_module, "attention_with_steps", spy)
    with torch.inference_mode():
        ours(torch.arange(4)[None])
    assert calls == [True, True, True]


def test_saved_checkpoint_loads_in_transformers_with_the_same_logits(tmp_path: Path) -> None:
    for tie in (True, False):
        torch.manual_seed(7)
        model = GPT2(
            GPT2Config(
                vocab_size=40,
                n_positions=16,
                n_embd=16,
                n_layer=2,
                n_head=2,
                tie_word_embeddings=tie,
            )
        )
        model.init_weights()
        model.eval()
        directory = tmp_path / f"tie-{tie}"
        model.save_pretrained(directory)
        reference = load_reference(directory)
        ids = torch.randint(0, 40, (1, 16), generator=torch.Generator().manual_seed(1))
        with torch.inference_mode():
            torch.testing.assert_close(model(ids).logits, reference(ids).logits, **TOLERANCE)
        keys = set(read_header(directory / "model.safetensors").entries)
        assert ("lm_head.weight" in keys) is (not tie)
        assert json.loads((directory / "config.json").read_text())["model_type"] == "gpt2"
        # And back: our loader reads what we wrote.
        again = GPT2.from_pretrained(directory)
        with torch.inference_mode():
            torch.testing.assert_close(again(ids).logits, model(ids).logits, rtol=0, atol=0)


def test_float32_weights_stay_memory_mapped(tmp_path: Path) -> None:
    make_checkpoint(tmp_path)
    model = GPT2.from_pretrained(tmp_path)
    weight = model.transformer.h[0].attn.c_attn.weight
    assert not weight.requires_grad
    # Views of one map of the file: tensors lie as far apart in memory as in the file.
    entries = read_header(tmp_path / "model.safetensors").entries
    bias = model.transformer.h[0].attn.c_attn.bias
    in_file = entries["transformer.h.0.attn.c_attn.weight"].begin
    in_file -= entries["transformer.h.0.attn.c_attn.bias"].begin
    assert weight.data_ptr() - bias.data_ptr() == in_file
    assert model.lm_head.weight is model.transformer.wte.weight


def test_too_long_a_sequence_names_the_limit(pair) -> None:
    ours, _ = pair
    with pytest.raises(SpecError, match="33 tokens; this model reads at most 32"):
        ours(torch.zeros(1, 33, dtype=torch.long))


def test_a_truncated_weights_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    make_checkpoint(tmp_path)
    path = tmp_path / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(SpecError, match="model.safetensors: the file is truncated"):
        GPT2.from_pretrained(tmp_path)


def test_weights_that_do_not_match_the_config_are_an_error(tmp_path: Path) -> None:
    make_checkpoint(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["n_layer"] = 4
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecError, match="missing: transformer.h.3"):
        GPT2.from_pretrained(tmp_path)


def test_cross_attention_gpt2_is_refused() -> None:
    with pytest.raises(SpecError, match="cross-attention"):
        GPT2Config.from_dict({"model_type": "gpt2", "add_cross_attention": True})


def test_config_common_names_read_the_gpt2_fields() -> None:
    """``DecoderConfig``'s names (``Alias`` in GPT2Config) give GPT-2's own fields."""
    config = GPT2Config(vocab_size=37, n_positions=19, n_embd=12, n_layer=5, n_head=3)
    common = (
        config.num_layers,
        config.num_heads,
        config.num_kv_heads,
        config.hidden_size,
        config.head_dim,
        config.max_positions,
        config.vocabulary_size,
    )
    assert common == (5, 3, 3, 12, 4, 19, 37)
    assert "num_layers" not in config.to_dict()  # names, not fields: config.json is GPT-2's
