"""Head analysis (attention_core.analysis) checked against transformers on random checkpoints:
head-type scores, ablation, value-weighted maps and the logit lens; a hand-built
previous-token head; the shipped tiny-bank-gpt's look-back head."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attention_core.analysis import (
    ablate,
    attention_entropy,
    duplicate_token_score,
    each_head_effects,
    first_token_share,
    head_model,
    logit_lens,
    previous_token_score,
    score_heads,
    value_norm_maps,
)
from attention_core.errors import SpecError
from attention_core.models import GPT2, Decoder, Encoder, GPT2Config, Llama

TEXT = "The bank approved the loan, and the river bank was muddy and the bank was closed."
FAMILIES = {"tiny-gpt2": GPT2.from_pretrained, "tiny-llama": Llama.from_pretrained}
SHIPPED = Path(__file__).resolve().parents[2] / "attention_core/models/builtin/tiny-bank-gpt"


@pytest.fixture(scope="module")
def decoders(checkpoints: Path) -> dict[str, Decoder]:
    return {
        name: Decoder.from_dir(checkpoints / name, load, name.split("-")[1])
        for name, load in FAMILIES.items()
    }


# --- reference definitions, written from TransformerLens' head_detector ------------------------


def detection_score(maps: torch.Tensor, pattern: torch.Tensor) -> torch.Tensor:
    """TransformerLens' "mul": (A * D).sum() / A.sum(), one map at a time (L, H, T, T)."""
    L, H = maps.shape[:2]
    out = torch.empty(L, H, dtype=torch.float64)
    for layer in range(L):
        for head in range(H):
            a = maps[layer, head].double()
            out[layer, head] = (a * pattern).sum() / a.sum()
    return out


def reference_patterns(ids: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Previous-token and duplicate-token detection patterns, built entry by entry."""
    T = len(ids)
    previous = torch.zeros(T, T, dtype=torch.float64)
    duplicate = torch.zeros(T, T, dtype=torch.float64)
    for i in range(T):
        if i > 0:
            previous[i, i - 1] = 1
        for j in range(i):
            duplicate[i, j] = float(ids[i] == ids[j])
    return previous, duplicate


def reference_scores(maps: torch.Tensor, ids: Sequence[int]) -> dict[str, torch.Tensor]:
    """The four scores read off the maps of ``ids`` (L, H, T, T), by their definitions
    (induction needs its own repeated block)."""
    previous, duplicate = reference_patterns(ids)
    return {
        "previous_token": detection_score(maps, previous),
        "duplicate_token": detection_score(maps, duplicate),
        "first_token": maps[..., :, 0].sum(-1) / len(ids),
        "entropy": -(maps * maps.clamp_min(1e-300).log()).sum(-1).mean(-1),
    }


def hf_maps(model: torch.nn.Module, ids: Sequence[int]) -> torch.Tensor:
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([list(ids)]), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions])  # (L, H, T, T)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_score_is_the_definition_on_transformers_maps(
    name: str, decoders: dict[str, Decoder], hf_decoder: Callable[[str], torch.nn.Module]
) -> None:
    decoder, reference = decoders[name], hf_decoder(name)
    result = score_heads(decoder, TEXT, seed=7)
    ids = decoder.tokenize(TEXT).input_ids
    assert len(set(ids)) < len(ids)  # the text repeats tokens: duplicate-token is not trivial
    maps = hf_maps(reference, ids).double()
    expected = reference_scores(maps, ids)
    # Induction: the maps of the ids it reports; the block is there twice after the framing.
    seq, start, R = result.induction_ids, result.induction_start, result.induction_length
    bos = list(decoder.tokenize("a").input_ids[:1]) if name == "tiny-llama" else []
    assert list(seq[:start]) == bos and start == len(bos)
    block = seq[start : start + R]
    assert seq[start + R : start + 2 * R] == block and len(seq) == start + 2 * R
    assert len(set(block)) == R and not set(block) & decoder.tokenizer.special_ids
    repeated = hf_maps(reference, seq).double()
    expected["induction"] = torch.tensor(
        [
            [
                sum(float(repeated[n, h, i, i - R + 1]) for i in range(start + R, start + 2 * R))
                / R
                for h in range(repeated.shape[1])
            ]
            for n in range(repeated.shape[0])
        ],
        dtype=torch.float64,
    )
    for score, value in result.scores.as_dict().items():
        torch.testing.assert_close(value.double(), expected[score], atol=2e-6, rtol=1e-5)
    # Seeded: the same seed, the same block; another seed, another block.
    assert score_heads(decoder, TEXT, seed=7).induction_ids == seq
    assert score_heads(decoder, TEXT, seed=8).induction_ids != seq


def previous_token_gpt2(length: int) -> GPT2:
    """One layer, one head, attending exactly to the previous position (see the test)."""
    config = GPT2Config(
        vocab_size=8, n_positions=length, n_embd=length, n_layer=1, n_head=1,
        scale_attn_weights=False,
    )  # fmt: skip
    model = GPT2(config)
    C, big = length, 1e4
    shift = torch.zeros(C, C)
    shift[torch.arange(C - 1), torch.arange(1, C)] = 1  # e_j -> e_{j+1}: key j answers query j+1
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        body = model.transformer
        body.wpe.weight.copy_(torch.eye(length))  # position p is one-hot e_p
        body.h[0].ln_1.weight.fill_(1.0)
        body.ln_f.weight.fill_(1.0)
        W = body.h[0].attn.c_attn.weight  # (C, 3C) as x @ W: [W_q | W_k | W_v]
        W[:, :C] = big * torch.eye(C)
        W[:, C : 2 * C] = shift
        W[:, 2 * C :] = torch.eye(C)
    return model.eval()


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_scores_summed_during_the_pass_equal_those_read_from_a_cached_pass(
    name: str, decoders: dict[str, Decoder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """score_heads' own pass sums the scores as it makes each block (the maps computed
    once); a pass already in the cache (a page drew the maps) is read from its kept q/k."""
    from attention_core.analysis import scoring
    from attention_core.models.base.result_cache import ResultCache

    decoder = decoders[name]
    monkeypatch.setattr(decoder, "long_cache", ResultCache())
    reread: list[int] = []
    stack_scores = scoring.stack_scores
    monkeypatch.setattr(scoring, "stack_scores", lambda *a: reread.append(1) or stack_scores(*a))
    during = score_heads(decoder, TEXT + " once")
    assert reread == []
    cached = score_heads(decoder, TEXT + " once")
    assert reread == [1]
    for field in ("previous_token", "duplicate_token", "first_token", "entropy"):
        want = getattr(cached.scores, field)
        torch.testing.assert_close(getattr(during.scores, field), want, atol=1e-6, rtol=0)


def test_a_hand_built_previous_token_head_scores_its_maximum_there_and_0_on_duplicates() -> None:
    """After LayerNorm, q_i · k_j = big/s² · (δ_{i, j+1} − 1/C): every row but the first puts
    all its weight (exactly, in float32) on the previous token.  Row 0 has no previous
    token, so by the definition (Σ A ⊙ D / Σ A) a perfect head scores (T − 1)/T."""
    T = 12
    model = previous_token_gpt2(T)
    ids = [1, 2, 3] * 4  # repeats, but never next to each other
    with torch.inference_mode():
        maps = torch.stack(model(torch.tensor([ids]), output_attentions=True).attentions)[:, 0]
    expected = torch.zeros(T, T)
    expected[0, 0] = 1
    expected[torch.arange(1, T), torch.arange(T - 1)] = 1
    assert torch.equal(maps[0, 0], expected)
    assert float(previous_token_score(maps)[0, 0]) == pytest.approx((T - 1) / T, abs=1e-7)
    assert float(duplicate_token_score(maps, ids)[0, 0]) == 0.0
    assert float(first_token_share(maps)[0, 0]) == pytest.approx(2 / T)  # rows 0 and 1
    assert float(attention_entropy(maps)[0, 0]) == 0.0


# --- ablation ------------------------------------------------------------------------------------


def hf_projection(model: torch.nn.Module, layer: int) -> torch.nn.Module:
    if hasattr(model, "transformer"):
        return model.transformer.h[layer].attn.c_proj
    return model.model.layers[layer].self_attn.o_proj


@contextmanager
def heads_hooked_out(
    projection_of: Callable[[int], torch.nn.Module],
    heads: Sequence[tuple[int, int]],
    mode: str,
    head_dim: int,
) -> Iterator[None]:
    """Those heads' slice of the output projection's input (``projection_of(layer)``)
    zeroed, or set to its mean over positions, by forward pre-hooks on transformers'
    own modules, within the block."""
    hooks = []
    for layer in {layer for layer, _ in heads}:
        chosen = [h for n, h in heads if n == layer]

        def hook(_m: torch.nn.Module, args: tuple[torch.Tensor, ...], chosen=chosen):  # type: ignore[no-untyped-def]
            x = args[0].clone()
            for h in chosen:
                part = x[..., h * head_dim : (h + 1) * head_dim]
                part[...] = 0 if mode == "zero" else part.mean(dim=-2, keepdim=True)
            return (x,)

        hooks.append(projection_of(layer).register_forward_pre_hook(hook))
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def hf_ablated_logprobs(
    model: torch.nn.Module,
    ids: Sequence[int],
    heads: Sequence[tuple[int, int]],
    mode: str,
    head_dim: int,
) -> torch.Tensor:
    """transformers' forward with those heads hooked out (``heads_hooked_out``):
    log p(next token), (T - 1,)."""
    projection_of = functools.partial(hf_projection, model)
    with heads_hooked_out(projection_of, heads, mode, head_dim), torch.inference_mode():
        logits = model(input_ids=torch.tensor([list(ids)])).logits[0]
    logprobs = F.log_softmax(logits.double(), dim=-1)
    return logprobs[:-1].gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablation_equals_transformers_with_the_head_hooked_out(
    name: str, mode: str, decoders: dict[str, Decoder], hf_decoder: Callable[[str], torch.nn.Module]
) -> None:
    decoder, reference = decoders[name], hf_decoder(name)
    heads = head_model(decoder)
    ids = decoder.tokenize(TEXT).input_ids
    D = decoder.config.head_dim
    chosen = [(0, 1), (1, 3), (1, 0)]
    with torch.inference_mode():
        result = ablate(heads, ids, chosen, mode)
    assert result.before is not None and result.after is not None
    before = hf_ablated_logprobs(reference, ids, [], mode, D)
    after = hf_ablated_logprobs(reference, ids, chosen, mode, D)
    torch.testing.assert_close(result.before.next_logprobs.double(), before, atol=1e-5, rtol=0)
    torch.testing.assert_close(result.after.next_logprobs.double(), after, atol=1e-5, rtol=0)
    assert result.before.loss == pytest.approx(float(-before.mean()), abs=1e-5)
    assert result.after.loss == pytest.approx(float(-after.mean()), abs=1e-5)
    assert abs(result.after.loss - result.before.loss) > 1e-3  # the heads did something
    # Every head alone, batched: the same as ablating it by itself in transformers.
    with torch.inference_mode():
        grid = each_head_effects(heads, ids, mode)
    L, H = decoder.config.num_layers, decoder.config.num_heads
    assert grid.shape == (L, H)
    base = float(-before.mean())
    for layer in range(L):
        for head in range(H):
            alone = hf_ablated_logprobs(reference, ids, [(layer, head)], mode, D)
            assert float(grid[layer, head]) == pytest.approx(float(-alone.mean()) - base, abs=1e-5)


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize(("layer", "mode"), [(0, "zero"), (1, "zero"), (1, "mean")])
def test_an_ablation_runs_the_layers_below_and_its_layers_attention_once_as_transformers(
    name: str,
    layer: int,
    mode: str,
    decoders: dict[str, Decoder],
    hf_decoder: Callable[[str], torch.nn.Module],
) -> None:
    """The text and the text ablated at ``layer`` share the layers below it and its
    attention: the batch grows at its output projection, so every block up to it gets one
    row and every block above it two."""
    decoder, reference = decoders[name], hf_decoder(name)
    heads = head_model(decoder)
    ids = decoder.tokenize(TEXT).input_ids
    batches: list[int] = []
    hooks = [
        block.register_forward_pre_hook(lambda _m, args: batches.append(args[0].shape[0]))
        for block in heads.blocks
    ]
    try:
        with torch.inference_mode():
            result = ablate(heads, ids, [(layer, 2)], mode)
    finally:
        for hook in hooks:
            hook.remove()
    L = decoder.config.num_layers
    assert batches == [1] * (layer + 1) + [2] * (L - layer - 1)
    assert result.before is not None and result.after is not None
    D = decoder.config.head_dim
    before = hf_ablated_logprobs(reference, ids, [], mode, D)
    after = hf_ablated_logprobs(reference, ids, [(layer, 2)], mode, D)
    torch.testing.assert_close(result.before.next_logprobs.double(), before, atol=1e-5, rtol=0)
    torch.testing.assert_close(result.after.next_logprobs.double(), after, atol=1e-5, rtol=0)
    assert abs(result.after.loss - result.before.loss) > 1e-4  # the head did something


def test_an_encoder_ablation_changes_the_sentence_embedding_as_transformers_does(
    encoder: Encoder, hf_model: torch.nn.Module
) -> None:
    heads = head_model(encoder)
    ids = heads.tokenize("The bank approved the loan.").ids
    D = encoder.config.head_dim

    def hf_sentence(chosen: Sequence[tuple[int, int]]) -> torch.Tensor:
        hooks = []
        for layer, head in chosen:

            def hook(_m: torch.nn.Module, args: tuple[torch.Tensor, ...], head=head):  # type: ignore[no-untyped-def]
                x = args[0].clone()
                x[..., head * D : (head + 1) * D] = 0
                return (x,)

            dense = hf_model.encoder.layer[layer].attention.output.dense
            hooks.append(dense.register_forward_pre_hook(hook))
        try:
            with torch.inference_mode():
                return hf_model(input_ids=torch.tensor([ids])).last_hidden_state[0].mean(0)
        finally:
            for h in hooks:
                h.remove()

    clean = hf_sentence([])
    chosen = [(0, 2), (5, 7)]
    with torch.inference_mode():
        result = ablate(heads, ids, chosen, "zero")
        grid = each_head_effects(heads, ids, "zero")
    expected = float(F.cosine_similarity(hf_sentence(chosen), clean, dim=0))
    assert result.embedding_cosine == pytest.approx(expected, abs=1e-5)
    assert result.embedding_cosine < 0.9999
    for layer, head in [(0, 0), (3, 5), (5, 11)]:
        alone = float(F.cosine_similarity(hf_sentence([(layer, head)]), clean, dim=0))
        assert float(grid[layer, head]) == pytest.approx(alone, abs=1e-5)


def test_ablation_refuses_heads_that_do_not_exist(decoders: dict[str, Decoder]) -> None:
    heads = head_model(decoders["tiny-gpt2"])
    ids = decoders["tiny-gpt2"].tokenize(TEXT).input_ids
    with pytest.raises(SpecError, match=r"heads\[1\] is \[3, 1\]; this model has layers 1 to 2"):
        ablate(heads, ids, [(0, 0), (2, 0)])
    with pytest.raises(SpecError, match="heads is empty"):
        ablate(heads, ids, [])
    with pytest.raises(SpecError, match="mode 'half'"):
        ablate(heads, ids, [(0, 0)], "half")


# --- value-weighted maps -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_value_weighted_maps_equal_a_computation_from_transformers_weights(
    name: str, decoders: dict[str, Decoder], hf_decoder: Callable[[str], torch.nn.Module]
) -> None:
    decoder, reference = decoders[name], hf_decoder(name)
    ids = decoder.tokenize(TEXT).input_ids
    c = decoder.config
    H, H_kv, D = c.num_heads, c.num_kv_heads, c.head_dim
    values: dict[int, torch.Tensor] = {}
    hooks = []
    for layer in range(c.num_layers):
        if name == "tiny-gpt2":
            module = reference.transformer.h[layer].attn.c_attn

            def keep(_m, _a, out, layer=layer):  # type: ignore[no-untyped-def]
                values[layer] = out[0, :, 2 * H * D :]  # c_attn gives [q | k | v]
        else:
            module = reference.model.layers[layer].self_attn.v_proj

            def keep(_m, _a, out, layer=layer):  # type: ignore[no-untyped-def]
                values[layer] = out[0]

        hooks.append(module.register_forward_hook(keep))
    try:
        maps = hf_maps(reference, ids)
    finally:
        for h in hooks:
            h.remove()
    ours = value_norm_maps(decoder, TEXT, range(c.num_layers))
    with torch.inference_mode():
        for layer in range(c.num_layers):
            if name == "tiny-gpt2":
                W_O = reference.transformer.h[layer].attn.c_proj.weight  # (H*D, C): x @ W
            else:
                W_O = reference.model.layers[layer].self_attn.o_proj.weight.T  # (H*D, C)
            v = values[layer].reshape(len(ids), H_kv, D)
            expected = torch.empty(H, len(ids), len(ids))
            for h in range(H):
                g = h // (H // H_kv)
                f = v[:, g] @ W_O[h * D : (h + 1) * D]  # (T, C): f(x_j) = v_j W_O^h
                for i in range(len(ids)):
                    expected[h, i] = (maps[layer, h, i, :, None] * f).norm(dim=-1)
            torch.testing.assert_close(ours[layer], expected, atol=1e-5, rtol=1e-4)


# --- logit lens ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_logit_lens_is_transformers_hidden_states_through_the_final_norm_and_head(
    name: str, decoders: dict[str, Decoder], hf_decoder: Callable[[str], torch.nn.Module]
) -> None:
    decoder, reference = decoders[name], hf_decoder(name)
    ids = decoder.tokenize(TEXT).input_ids
    with torch.inference_mode():
        out = reference(input_ids=torch.tensor([ids]), output_hidden_states=True)
        norm = reference.transformer.ln_f if name == "tiny-gpt2" else reference.model.norm
        L = len(out.hidden_states) - 1
        probs = []
        for layer in range(1, L + 1):
            h = out.hidden_states[layer][0]
            h = h if layer == L else norm(h)  # transformers' last hidden state is normed
            probs.append(torch.softmax(reference.lm_head(h), dim=-1))
    lens = logit_lens(decoder, TEXT)
    assert lens.top_ids.shape == (L, len(ids), 5)
    torch.testing.assert_close(probs[-1], torch.softmax(out.logits[0], dim=-1))
    for layer in range(L):
        expected = probs[layer].topk(5, dim=-1)
        torch.testing.assert_close(lens.top_probs[layer], expected.values, atol=1e-5, rtol=1e-4)
        assert torch.equal(lens.top_ids[layer], expected.indices)


def test_the_logit_lens_is_for_decoders(encoder: Encoder) -> None:
    with pytest.raises(SpecError, match="the logit lens is for decoders"):
        logit_lens(encoder, "a bank")


# --- the shipped model's look-back head ----------------------------------------------------------

MONEY = set(
    "aftw"
)  # the letters that start the money senses in the corpus (see test_shipped_model)
MONEY_CASES = [
    ("Kim counted the cash, then went to the bank ", "cash"),
    ("Ann needed a loan, then ran to the bank ", "loan"),
]


def money_mass(ids: torch.Tensor, probs: torch.Tensor, decoder: Decoder) -> float:
    """The probability the last position's top tokens give to the money letters."""
    return sum(
        float(p)
        for i, p in zip(ids[-1], probs[-1], strict=True)
        if decoder.tokenizer.decode([int(i)]) in MONEY
    )


@pytest.mark.parametrize(("text", "cue"), MONEY_CASES)
def test_ablation_finds_the_head_of_tiny_bank_gpt_that_reads_the_deciding_word(
    text: str, cue: str
) -> None:
    """Ablating each head alone (mean mode): one head's loss turns the model's next letter
    from the money sense to the river sense, and it is the head whose last row reads the cue.
    (The head-type scores do not single it out: looking back at a cue is none of their
    patterns; neither does the whole text's Δloss, which layer 1's heads dominate.)"""
    decoder = Decoder.from_dir(SHIPPED, GPT2.from_pretrained, "gpt2")
    heads = head_model(decoder)
    ids = heads.tokenize(text).ids
    L, H = decoder.config.num_layers, decoder.config.num_heads
    with torch.inference_mode():
        results = {(n, h): ablate(heads, ids, [(n, h)], "mean") for n in range(L) for h in range(H)}
        maps = torch.stack(decoder.encode(text).layer_attentions)  # (L, H, T, T)
    first = results[0, 0].before
    assert first is not None
    before = money_mass(first.top_ids, first.top_probs, decoder)
    after = {
        pair: money_mass(r.after.top_ids, r.after.top_probs, decoder)  # type: ignore[union-attr]
        for pair, r in results.items()
    }
    decisive = min(after, key=after.__getitem__)
    start = text.index(cue)
    on_cue = maps[:, :, -1, start : start + len(cue)].sum(-1)  # (L, H)
    reader = divmod(int(on_cue.argmax()), H)
    assert decisive == reader == (1, 0)  # layer 2, head 1 (1-based)
    assert before > 0.9 and after[decisive] < 0.4, (before, after[decisive])
    assert float(on_cue[reader]) > 0.85
