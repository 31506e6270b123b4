"""The transformers backend's capture: our attention and mask functions registered in
transformers reproduce its eager attention, layer by layer, and keep every step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.requires import require

transformers = require("transformers")

from attention_core.models.hf import (  # noqa: E402
    ATTENTION_NAME,
    AttentionRun,
    attention_sites,
    capturing,
    handing,
    register,
    site_of,
)

TEXT_IDS = [[1, 5, 17, 42, 9, 88, 23, 4, 61, 7, 30]]


def _load(path: Path, implementation: str) -> torch.nn.Module:
    return transformers.AutoModelForCausalLM.from_pretrained(
        path, attn_implementation=implementation, dtype=torch.float32, local_files_only=True
    ).eval()


@pytest.fixture(scope="module")
def qwen3(hf_checkpoints: Callable[[str], Path]) -> Path:
    return hf_checkpoints("tiny-qwen3")


def test_qwen3_maps_equal_eager(qwen3: Path) -> None:
    ours = _load(qwen3, register())
    eager = _load(qwen3, "eager")
    ids = torch.tensor(TEXT_IDS)
    with (
        torch.inference_mode(),
        capturing(attention_sites(ours, "decoder")) as capture,
        handing(AttentionRun(capture)) as keywords,
    ):
        out = ours(ids, **keywords)
    with torch.inference_mode():
        expected = eager(ids, output_attentions=True)
    weights = capture.weights("decoder")
    assert len(weights) == len(expected.attentions) == 2
    for got, want in zip(weights, expected.attentions, strict=True):
        assert got.shape == want.shape == (1, 4, 11, 11)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        assert bool((got.triu(1) == 0).all())  # causal: the future gets exactly 0
    torch.testing.assert_close(out.logits, expected.logits, atol=1e-5, rtol=1e-5)


def test_captured_keys_are_what_the_cache_holds(qwen3: Path) -> None:
    """k and v as the attention received them: after k_norm and RoPE, one per kv head."""
    model = _load(qwen3, register())
    ids = torch.tensor(TEXT_IDS)
    with (
        torch.inference_mode(),
        capturing(attention_sites(model, "decoder")) as capture,
        handing(AttentionRun(capture)) as keywords,
    ):
        out = model(ids, use_cache=True, **keywords)
    for layer in range(2):
        call = capture.call("decoder", layer)
        assert call.site.module == f"model.layers.{layer}.self_attn"
        assert call.query.shape == (1, 4, 11, 16) and call.key.shape == (1, 2, 11, 16)
        torch.testing.assert_close(call.key, out.past_key_values.layers[layer].keys)
        torch.testing.assert_close(call.value, out.past_key_values.layers[layer].values)
        steps = call.steps
        # Query head 3 reads kv head 1 (4 query heads on 2 kv heads).
        torch.testing.assert_close(steps.attn_scores[0, 3], call.query[0, 3] @ call.key[0, 1].T)
        assert steps.scale == pytest.approx(16**-0.5)
        torch.testing.assert_close(
            steps.context_vec[0, 3], steps.attn_weights[0, 3] @ call.value[0, 1]
        )


def test_without_the_mask_function_a_decoder_turns_bidirectional(qwen3: Path) -> None:
    """transformers hands an attention without a registered mask function no mask:
    the decoder would read the future.  Ours keeps it causal."""
    unmasked = _load(qwen3, register("attention_viz_no_mask", with_mask=False))
    ids = torch.tensor(TEXT_IDS)
    with (
        torch.inference_mode(),
        capturing(attention_sites(unmasked, "decoder")) as capture,
        handing(AttentionRun(capture)) as keywords,
    ):
        unmasked(ids, **keywords)
    leaked = capture.weights("decoder")[0]
    assert capture.calls[0].steps.allowed is None
    assert float(leaked[0].triu(1).sum(dim=-1)[:, :-1].min()) > 0.01  # rows read later tokens

    masked = _load(qwen3, ATTENTION_NAME)
    with (
        torch.inference_mode(),
        capturing(attention_sites(masked, "decoder")) as capture,
        handing(AttentionRun(capture)) as keywords,
    ):
        masked(ids, **keywords)
    allowed = capture.calls[0].steps.allowed
    assert allowed is not None and allowed.dtype == torch.bool
    assert torch.equal(allowed[0, 0], torch.ones(11, 11, dtype=torch.bool).tril())


def test_keep_drops_the_steps_of_other_layers(qwen3: Path) -> None:
    model = _load(qwen3, register())
    with (
        torch.inference_mode(),
        capturing(attention_sites(model, "decoder"), keep=lambda site: site.layer == 1) as capture,
        handing(AttentionRun(capture)) as keywords,
    ):
        model(torch.tensor(TEXT_IDS), **keywords)
    assert capture.call("decoder", 0).steps.attn_scores.numel() == 0
    assert capture.call("decoder", 0).weights.shape == (1, 4, 11, 11)
    assert capture.call("decoder", 1).steps.attn_scores.shape == (1, 4, 11, 11)


@pytest.mark.parametrize(
    ("path", "kind", "expected"),
    [
        ("model.layers.3.self_attn", "decoder", ("decoder", 3)),
        ("roberta.encoder.layer.1.attention.self", "encoder", ("encoder", 1)),
        ("model.encoder.layers.2.self_attn", "encoder-decoder", ("encoder", 2)),
        ("model.decoder.layers.2.self_attn", "encoder-decoder", ("decoder", 2)),
        ("model.decoder.layers.5.encoder_attn", "encoder-decoder", ("cross", 5)),
        ("encoder.block.4.layer.0.SelfAttention", "encoder-decoder", ("encoder", 4)),
        ("decoder.block.4.layer.1.EncDecAttention", "encoder-decoder", ("cross", 4)),
    ],
)
def test_sites_name_stack_and_layer(path: str, kind: str, expected: tuple[str, int]) -> None:
    site = site_of(path, kind)  # type: ignore[arg-type]
    assert (site.stack, site.layer) == expected


def test_an_encoder_decoder_is_captured_per_stack() -> None:
    """Self-attention of both stacks and cross-attention, each tagged with its stack and
    layer, equal eager's three kinds of maps (a tiny random BART, built in memory)."""
    config = transformers.BartConfig(
        vocab_size=64,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = transformers.BartModel(config).eval()
    source, target = torch.tensor([[0, 5, 9, 12, 7, 2]]), torch.tensor([[2, 0, 8, 11]])
    with torch.inference_mode():
        model.set_attn_implementation("eager")
        expected = model(input_ids=source, decoder_input_ids=target, output_attentions=True)
        model.set_attn_implementation(register())
        with (
            capturing(attention_sites(model, "encoder-decoder")) as capture,
            handing(AttentionRun(capture)) as keywords,
        ):
            model(input_ids=source, decoder_input_ids=target, **keywords)
    pairs = {
        "encoder": expected.encoder_attentions,
        "decoder": expected.decoder_attentions,
        "cross": expected.cross_attentions,
    }
    for stack, maps in pairs.items():
        got = capture.weights(stack)  # type: ignore[arg-type]
        assert [c.site.layer for c in capture.stack(stack)] == [0, 1]  # type: ignore[arg-type]
        for a, b in zip(got, maps, strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    assert capture.weights("cross")[0].shape == (1, 4, 4, 6)  # target rows, source columns
    assert bool((capture.weights("decoder")[0].triu(1) == 0).all())


def test_threads_capture_their_own_calls(qwen3: Path) -> None:
    """Two threads tracing one model at once each get their own text's tensors."""
    from concurrent.futures import ThreadPoolExecutor

    model = _load(qwen3, register())
    sites = attention_sites(model, "decoder")
    path = "model.layers.1.self_attn"
    module = dict(model.named_modules())[path]
    texts = [torch.tensor([[1, 5, 17, 42, 9]]), torch.tensor([[3, 8, 2, 77, 11, 19, 40]])]

    def trace(ids: torch.Tensor) -> tuple[torch.Size, torch.Size]:
        shapes = set()
        for _ in range(20):
            with (
                torch.inference_mode(),
                capturing(sites, hook_inputs={path: module}) as capture,
                handing(AttentionRun(capture)) as keywords,
            ):
                model(ids, **keywords)
            call = capture.call("decoder", 1)
            assert call.x is not None
            shapes.add((call.x.shape, call.query.shape))
        assert len(shapes) == 1
        return shapes.pop()

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(trace, texts)
    assert first == (torch.Size([1, 5, 32]), torch.Size([1, 4, 5, 16]))
    assert second == (torch.Size([1, 7, 32]), torch.Size([1, 4, 7, 16]))
