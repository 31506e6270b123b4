"""Head analysis on the transformers backend (issue 19's ``TransformersLM`` and
``TransformersEncoder``) checked against transformers' own eager models: Qwen3 (GQA, q/k
norms), Gemma 2 (soft-capped attention and logits, a sliding window), GPT-NeoX (partial
rotary, fused qkv, ``attention.dense``), RoBERTa (an encoder), and the other decoders of
``hf_checkpoints`` (Gemma 3, Phi-3 with its fused qkv, Mistral windowed, OLMo 2)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from attention_core.analysis import (
    ablate,
    each_head_effects,
    head_model,
    logit_lens,
    score_heads,
    value_norm_maps,
)
from attention_core.models.base.protocols import TextModel
from tests.models.hf_checkpoints import HF_DECODERS
from tests.models.test_head_analysis import (
    heads_hooked_out,
    hf_maps,
    reference_scores,
)

TEXT = "The bank approved the loan, and the river bank was muddy and the bank was closed."
DECODERS = HF_DECODERS
ALL = [*DECODERS, "tiny-roberta"]


def _load(directory: Path, name: str) -> TextModel:
    from attention_core.models.hf.text_models import load_transformers

    kind = "encoder" if name == "tiny-roberta" else "decoder"
    return load_transformers(directory, name, 512, 1 << 24, kind=kind, family=name)


@pytest.fixture(scope="module")
def models(hf_checkpoints: Callable[[str], Path]) -> dict[str, TextModel]:
    return {name: _load(hf_checkpoints(name), name) for name in ALL}


@pytest.fixture(scope="module")
def references(hf_checkpoints: Callable[[str], Path]) -> dict[str, Any]:
    """transformers' own models, eager attention, float32 (RoBERTa: the base model)."""
    import transformers

    out: dict[str, Any] = {}
    for name in ALL:
        auto = (
            transformers.AutoModel if name == "tiny-roberta" else transformers.AutoModelForCausalLM
        )
        out[name] = auto.from_pretrained(
            hf_checkpoints(name), attn_implementation="eager", dtype=torch.float32
        ).eval()
    return out


def layers_of(reference: Any) -> Any:
    if hasattr(reference, "gpt_neox"):
        return reference.gpt_neox.layers
    if hasattr(reference, "encoder"):
        return reference.encoder.layer
    return reference.model.layers


def projection(reference: Any, layer: int) -> torch.nn.Module:
    block = layers_of(reference)[layer]
    if hasattr(block, "self_attn"):
        return block.self_attn.o_proj  # type: ignore[no-any-return]
    if hasattr(block.attention, "dense"):
        return block.attention.dense  # type: ignore[no-any-return]  # GPT-NeoX
    return block.attention.output.dense  # type: ignore[no-any-return]  # RoBERTa


def hf_logprobs(
    reference: Any, ids: Sequence[int], heads: Sequence[tuple[int, int]], mode: str, D: int
) -> torch.Tensor:
    with (
        heads_hooked_out(functools.partial(projection, reference), heads, mode, D),
        torch.inference_mode(),
    ):
        logits = reference(input_ids=torch.tensor([list(ids)])).logits[0]  # soft-capped (Gemma)
    logprobs = F.log_softmax(logits.double(), dim=-1)
    return logprobs[:-1].gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


def hf_sentence(
    reference: Any, ids: Sequence[int], heads: Sequence[tuple[int, int]], mode: str, D: int
) -> torch.Tensor:
    with (
        heads_hooked_out(functools.partial(projection, reference), heads, mode, D),
        torch.inference_mode(),
    ):
        return reference(input_ids=torch.tensor([list(ids)])).last_hidden_state[0].mean(0)  # type: ignore[no-any-return]


def test_every_transformers_family_gets_its_own_head_model(models: dict[str, TextModel]) -> None:
    kinds = {name: type(head_model(model)).__name__ for name, model in models.items()}
    assert kinds == {
        **{name: "TransformersDecoderHeadModel" for name in HF_DECODERS},
        "tiny-roberta": "TransformersEncoderHeadModel",
    }
    assert head_model(models["tiny-gemma2"]).final_softcap == 30.0  # type: ignore[attr-defined]
    assert head_model(models["tiny-qwen3"]).final_softcap is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ALL)
def test_every_score_is_the_definition_on_transformers_eager_maps(
    name: str, models: dict[str, TextModel], references: dict[str, Any]
) -> None:
    model, reference = models[name], references[name]
    heads = head_model(model)
    result = score_heads(model, TEXT, seed=5)
    ids = heads.tokenize(TEXT).ids
    assert len(set(ids)) < len(ids)
    maps = hf_maps(reference, ids).double()
    expected = reference_scores(maps, ids)
    seq, start, R = result.induction_ids, result.induction_start, result.induction_length
    assert seq[start : start + R] == seq[start + R : start + 2 * R]
    repeated = hf_maps(reference, seq).double()
    rows = torch.arange(start + R, start + 2 * R)
    expected["induction"] = repeated[..., rows, rows - R + 1].mean(-1)
    for score, value in result.scores.as_dict().items():
        torch.testing.assert_close(value.double(), expected[score], atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_decoder_ablation_equals_transformers_with_the_head_hooked_out(
    name: str, mode: str, models: dict[str, TextModel], references: dict[str, Any]
) -> None:
    model, reference = models[name], references[name]
    heads = head_model(model)
    ids = heads.tokenize(TEXT).ids
    D = heads.head_dim  # type: ignore[attr-defined]
    chosen = [(0, 1), (1, 3), (1, 0)]
    with torch.inference_mode():
        result = ablate(heads, ids, chosen, mode)
        grid = each_head_effects(heads, ids, mode)
    assert result.before is not None and result.after is not None
    before = hf_logprobs(reference, ids, [], mode, D)
    after = hf_logprobs(reference, ids, chosen, mode, D)
    torch.testing.assert_close(result.before.next_logprobs.double(), before, atol=1e-5, rtol=0)
    torch.testing.assert_close(result.after.next_logprobs.double(), after, atol=1e-5, rtol=0)
    assert abs(result.after.loss - result.before.loss) > 1e-3
    base = float(-before.mean())
    for layer in range(heads.num_layers):
        for head in range(heads.num_heads):
            alone = hf_logprobs(reference, ids, [(layer, head)], mode, D)
            assert float(grid[layer, head]) == pytest.approx(float(-alone.mean()) - base, abs=1e-5)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_encoder_ablation_changes_the_sentence_embedding_as_transformers_does(
    mode: str, models: dict[str, TextModel], references: dict[str, Any]
) -> None:
    heads, reference = head_model(models["tiny-roberta"]), references["tiny-roberta"]
    ids = heads.tokenize(TEXT).ids
    D = heads.head_dim  # type: ignore[attr-defined]
    clean = hf_sentence(reference, ids, [], mode, D)
    chosen = [(0, 2), (1, 1)]
    with torch.inference_mode():
        result = ablate(heads, ids, chosen, mode)
        grid = each_head_effects(heads, ids, mode)
    expected = float(
        F.cosine_similarity(hf_sentence(reference, ids, chosen, mode, D), clean, dim=0)
    )
    assert result.before is None and result.embedding_cosine is not None
    assert result.embedding_cosine == pytest.approx(expected, abs=1e-5)
    assert result.embedding_cosine < 0.9999
    for layer in range(heads.num_layers):
        for head in range(heads.num_heads):
            alone = hf_sentence(reference, ids, [(layer, head)], mode, D)
            cosine = float(F.cosine_similarity(alone, clean, dim=0))
            assert float(grid[layer, head]) == pytest.approx(cosine, abs=1e-5)


def value_vectors(
    reference: Any, layer: int, out: torch.Tensor, kv_heads: int, D: int
) -> torch.Tensor:
    """(H_kv, T, D) from the output of the module that makes v (fused for GPT-NeoX)."""
    T = out.shape[1]
    if hasattr(reference, "gpt_neox"):
        return out[0].view(T, kv_heads, 3 * D)[..., 2 * D :].transpose(0, 1)  # [q|k|v] per head
    if out.shape[-1] > kv_heads * D:  # Phi-3's qkv_proj: [q (H*D) | k (H_kv*D) | v (H_kv*D)]
        out = out[..., -kv_heads * D :]
    return out[0].view(T, kv_heads, D).transpose(0, 1)


def value_module(reference: Any, layer: int) -> torch.nn.Module:
    block = layers_of(reference)[layer]
    if hasattr(block, "self_attn"):
        attention = block.self_attn
        return getattr(attention, "v_proj", None) or attention.qkv_proj  # type: ignore[no-any-return]
    if hasattr(block.attention, "query_key_value"):
        return block.attention.query_key_value  # type: ignore[no-any-return]
    return block.attention.self.value  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", ALL)
def test_value_weighted_maps_equal_a_computation_from_transformers_weights(
    name: str, models: dict[str, TextModel], references: dict[str, Any]
) -> None:
    model, reference = models[name], references[name]
    heads = head_model(model)
    ids = heads.tokenize(TEXT).ids
    sizes = model.config  # type: ignore[attr-defined]
    H, H_kv, D, L = sizes.num_heads, sizes.num_kv_heads, sizes.head_dim, sizes.num_layers
    outputs: dict[int, torch.Tensor] = {}
    hooks = []
    for layer in range(L):

        def keep(_m, _a, out, layer=layer):  # type: ignore[no-untyped-def]
            outputs[layer] = out

        hooks.append(value_module(reference, layer).register_forward_hook(keep))
    try:
        maps = hf_maps(reference, ids)
    finally:
        for h in hooks:
            h.remove()
    ours = value_norm_maps(model, TEXT, range(L))
    with torch.inference_mode():
        for layer in range(L):
            W_O = projection(reference, layer).weight.T  # (H*D, C) as x @ W
            v = value_vectors(reference, layer, outputs[layer], H_kv, D)  # (H_kv, T, D)
            expected = torch.empty(H, len(ids), len(ids))
            for h in range(H):
                f = v[h // (H // H_kv)] @ W_O[h * D : (h + 1) * D]  # (T, C): v_j W_O^h
                for i in range(len(ids)):
                    expected[h, i] = (maps[layer, h, i, :, None] * f).norm(dim=-1)
            torch.testing.assert_close(ours[layer], expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", DECODERS)
def test_the_logit_lens_is_transformers_hidden_states_through_the_final_norm_and_head(
    name: str, models: dict[str, TextModel], references: dict[str, Any]
) -> None:
    model, reference = models[name], references[name]
    ids = head_model(model).tokenize(TEXT).ids
    norm = reference.gpt_neox.final_layer_norm if name == "tiny-gpt-neox" else reference.model.norm
    cap = getattr(reference.config, "final_logit_softcapping", None)
    with torch.inference_mode():
        out = reference(input_ids=torch.tensor([ids]), output_hidden_states=True)
        L = len(out.hidden_states) - 1
        probs = []
        for layer in range(1, L + 1):
            h = out.hidden_states[layer][0]
            logits = reference.get_output_embeddings()(h if layer == L else norm(h))
            if cap is not None:
                logits = cap * torch.tanh(logits / cap)  # Gemma 2's final soft-cap
            probs.append(torch.softmax(logits, dim=-1))
    assert (cap is not None) == (name == "tiny-gemma2")
    torch.testing.assert_close(probs[-1], torch.softmax(out.logits[0], dim=-1))
    lens = logit_lens(model, TEXT)
    assert lens.top_ids.shape == (L, len(ids), 5)
    for layer in range(L):
        expected = probs[layer].topk(5, dim=-1)
        torch.testing.assert_close(lens.top_probs[layer], expected.values, atol=1e-5, rtol=1e-4)
        assert torch.equal(lens.top_ids[layer], expected.indices)
