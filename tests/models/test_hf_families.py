"""Families only transformers implements, through the transformers backend: every map
equals transformers' eager attention, greedy generation writes transformers' ids, and a
real head step by step is transformers' map for that head.  The families that compute
attention in their own code (Bloom, MPT, Falcon, DeBERTa-v2: ``hf.adapters``) and ALBERT
(one attention module shared by every layer) included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from attention_core.models import Decoder, ModelRegistry, head_trace
from attention_core.models.hf.text_models import TransformersEncoder
from tests.models.hf_checkpoints import ALL_SPECS, LONG_TEXT
from tests.models.registries import registry_of
from tests.requires import require

transformers = require("transformers")

GetCheckpoint = Callable[[str], Path]
DECODERS = sorted(n for n, s in ALL_SPECS.items() if s.decoder)


def _registry(path: Path) -> ModelRegistry:
    return registry_of(path)


@pytest.fixture(scope="module")
def loaded(hf_checkpoints: GetCheckpoint) -> Callable[[str], tuple[Any, torch.nn.Module]]:
    """name -> (our model through the registry, transformers' eager model)."""
    cache: dict[str, tuple[Any, torch.nn.Module]] = {}

    def get(name: str) -> tuple[Any, torch.nn.Module]:
        if name not in cache:
            path = hf_checkpoints(name)
            registry = _registry(path)
            (entry,) = registry.entries()
            assert entry.supported, entry.reason  # listed supported before any load
            assert not registry.is_loaded(entry)
            assert (entry.backend, entry.family) == ("transformers", ALL_SPECS[name].model_type)
            auto = (
                transformers.AutoModelForCausalLM
                if ALL_SPECS[name].decoder
                else transformers.AutoModel
            )
            eager = auto.from_pretrained(
                path, attn_implementation="eager", dtype=torch.float32, local_files_only=True
            ).eval()
            cache[name] = (registry.load(entry.name), eager)
        return cache[name]

    return get


def _eager(eager: torch.nn.Module, ids: tuple[int, ...]) -> Any:
    with torch.inference_mode():
        return eager(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)


@pytest.mark.parametrize("name", sorted(ALL_SPECS))
def test_maps_equal_eager(name: str, loaded: Callable[[str], tuple[Any, torch.nn.Module]]) -> None:
    model, eager = loaded(name)
    spec = ALL_SPECS[name]
    assert isinstance(model, Decoder if spec.decoder else TransformersEncoder)
    assert model.causal is spec.decoder
    maps = model.encode(LONG_TEXT)
    ids = model.tokenizer.encode(LONG_TEXT).input_ids
    expected = _eager(eager, ids)
    assert len(ids) > 8  # longer than the sliding windows (4)
    assert len(maps.layer_attentions) == len(expected.attentions) == 2
    for got, want in zip(maps.layer_attentions, expected.attentions, strict=True):
        torch.testing.assert_close(got, want[0], atol=1e-5, rtol=0)
    for got, want in zip(maps.layer_hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(got, want[0], atol=1e-4, rtol=1e-4)
    if spec.decoder:  # nothing above the diagonal; a sliding window masks old keys too
        assert all(bool((a.triu(1) == 0).all()) for a in maps.layer_attentions)
    if spec.settings.get("sliding_window") == 4:
        windowed = maps.layer_attentions[0]
        assert bool((windowed.tril(-4) == 0).all()) and float(windowed.tril(-3).min()) >= 0
        assert float(maps.layer_attentions[-1].tril(-4).sum()) > 0 or "mistral" in name


@pytest.mark.parametrize("name", DECODERS)
def test_greedy_generation_equals_transformers(
    name: str, loaded: Callable[[str], tuple[Any, torch.nn.Module]]
) -> None:
    model, eager = loaded(name)
    prompt = "The bank approved"
    result = model.generate(prompt, 12)
    ids = model.tokenize(prompt).input_ids
    with torch.inference_mode():
        expected = eager.generate(
            torch.tensor([ids]), max_new_tokens=12, do_sample=False, pad_token_id=0
        )
    assert list(result.new_ids) == expected[0, len(ids) :].tolist()
    # The maps of the whole sequence equal a forward pass over it.
    full = _eager(eager, tuple(ids) + result.new_ids)
    for got, want in zip(result.layer_attentions, full.attentions, strict=True):
        torch.testing.assert_close(got, want[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", sorted(ALL_SPECS))
def test_one_head_step_by_step_is_transformers_map(
    name: str, loaded: Callable[[str], tuple[Any, torch.nn.Module]]
) -> None:
    model, eager = loaded(name)
    tokenized, layer_trace = model.trace(LONG_TEXT, 1)
    trace = head_trace(layer_trace, 3, causal=model.causal)
    expected = _eager(eager, tokenized.input_ids)
    torch.testing.assert_close(trace.attn_weights, expected.attentions[1][0, 3], atol=1e-5, rtol=0)
    # The steps chain as the lessons show them, from q and k as the attention got them.
    torch.testing.assert_close(trace.attn_scores, trace.q @ trace.k.T)
    torch.testing.assert_close(trace.context_vec, trace.attn_weights @ trace.v)
    assert trace.x.shape == (len(tokenized.input_ids), 32)
    heads, kv_heads = layer_trace.q.shape[1], layer_trace.k.shape[1]
    assert trace.kv_head == 3 // (heads // kv_heads)


def test_gemma2_caps_its_scores_as_a_step(
    loaded: Callable[[str], tuple[Any, torch.nn.Module]],
) -> None:
    model, _ = loaded("tiny-gemma2")
    _, layer_trace = model.trace(LONG_TEXT, 0)
    steps = layer_trace.steps
    assert steps.softcap == 2.0 and steps.capped_scores is not None
    torch.testing.assert_close(steps.capped_scores, torch.tanh(steps.scaled_scores / 2.0) * 2.0)
    assert float(steps.capped_scores.abs().max()) <= 2.0 < float(steps.scaled_scores.abs().max())


def test_x_is_the_attention_input_after_the_norm(
    loaded: Callable[[str], tuple[Any, torch.nn.Module]],
) -> None:
    model, eager = loaded("tiny-qwen3")
    tokenized, layer_trace = model.trace(LONG_TEXT, 1)
    expected = _eager(eager, tokenized.input_ids)
    with torch.inference_mode():
        normed = eager.model.layers[1].input_layernorm(expected.hidden_states[1])
    torch.testing.assert_close(layer_trace.x, normed, atol=1e-5, rtol=1e-5)


def test_16_bit_weights_run_in_float32(tmp_path: Path) -> None:
    """Held as stored (bfloat16), run in float32: the maps are float32 eager's."""
    from tests.models.hf_checkpoints import make_hf

    path = make_hf(tmp_path / "qwen3-bf16", "tiny-qwen3", seed=4, dtype=torch.bfloat16)
    registry = _registry(path)
    model = registry.load("qwen3-bf16")
    assert isinstance(model, Decoder)
    assert {p.dtype for p in model.model.model.parameters()} == {torch.bfloat16}  # type: ignore[attr-defined]
    maps = model.encode(LONG_TEXT)
    eager = transformers.AutoModelForCausalLM.from_pretrained(
        path, attn_implementation="eager", dtype=torch.float32, local_files_only=True
    ).eval()
    expected = _eager(eager, model.tokenize(LONG_TEXT).input_ids)
    assert maps.layer_attentions[0].dtype == torch.float32
    torch.testing.assert_close(
        maps.layer_attentions[1], expected.attentions[1][0], atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("name", DECODERS)
def test_sliding_windows_named_are_the_masks_applied(
    name: str, loaded: Callable[[str], tuple[Any, torch.nn.Module]]
) -> None:
    """What GET /api/model says each layer's window is, the mask the attention received."""
    model, _ = loaded(name)
    windows = model.model.sliding_windows
    expected_windows = {
        "tiny-gemma2": (4, None),
        "tiny-gemma3": (4, None),
        "tiny-mistral-window": (4, 4),
        "tiny-gpt-neo": (None, 4),  # GPT-Neo's attention_layers: global, then local
    }.get(name, (None, None))
    assert windows == expected_windows
    for layer, window in enumerate(windows):
        tokenized, layer_trace = model.trace(LONG_TEXT, layer)
        T = len(tokenized.input_ids)
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        allowed = (j <= i) & ((i - j < window) if window else torch.ones(T, T, dtype=torch.bool))
        assert layer_trace.steps.allowed is not None
        assert torch.equal(layer_trace.steps.allowed[0, 0], allowed)
