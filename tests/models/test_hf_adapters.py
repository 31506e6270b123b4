"""What the adapters (``hf.adapters``) show as steps of their own: ALiBi (Bloom, MPT,
Falcon with ALiBi) and DeBERTa's content-to-position and position-to-content terms are the
score bias (``biased_scores``), computed by the family's own code (DeBERTa v1 and v2);
GPT-Neo's unscaled scores and local window; ALBERT's one shared
attention module is counted once per call, in layer order.  (The maps, generation and a
head against transformers' eager attention: ``test_hf_families``.)"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from attention_core.models import ModelRegistry
from tests.models.hf_checkpoints import LONG_TEXT
from tests.requires import require

transformers = require("transformers")
SWEEP = Path(__file__).resolve().parents[2] / "bench" / "sweep_families.py"


def _load(path: Path) -> Any:
    registry = ModelRegistry(include_package=False, builtin_dir=None, env_paths=[path])
    (entry,) = registry.entries()
    assert entry.supported, entry.reason
    return registry.load(entry.name)


def _slopes(heads: int) -> torch.Tensor:
    """ALiBi's slopes for a power-of-two number of heads: 2^(-8h/H), h = 1..H."""
    return torch.tensor([2 ** (-8 * (h + 1) / heads) for h in range(heads)])


@pytest.mark.parametrize("name", ["tiny-bloom", "tiny-mpt", "tiny-falcon-alibi"])
def test_alibi_is_the_score_bias_step(name: str, hf_checkpoints: Callable[[str], Path]) -> None:
    model = _load(hf_checkpoints(name))
    tokenized, trace = model.trace(LONG_TEXT, 1)
    steps = trace.steps
    assert steps.biased_scores is not None
    bias = (steps.biased_scores - steps.scaled_scores)[0]  # (H, T, S)
    T = len(tokenized.input_ids)
    heads = bias.shape[0]
    keys = torch.arange(T, dtype=torch.float32)
    # Each head's bias is its slope times the key's position (a softmax-invariant shift of
    # slope * (key - query)), the same in every row.  Falcon scales it by 1/sqrt(head_dim)
    # and adds it twice (in its mask and in its scores), as transformers' code does.
    scale = 2 / math.sqrt(trace.q.shape[-1]) if "falcon" in name else 1.0
    if name == "tiny-mpt":  # MPT: -slope * (S - 1 - key)
        expected = _slopes(heads)[:, None] * (keys - (T - 1))
    else:
        expected = _slopes(heads)[:, None] * keys * scale
    seen = torch.ones(T, T, dtype=torch.bool).tril()  # the keys each query reads
    torch.testing.assert_close(bias[:, seen], expected[:, None, :].expand(heads, T, T)[:, seen])


def _v2_terms(encoder: Any, trace: Any, layer: int, factor: int) -> torch.Tensor:
    """DeBERTa-v2's terms from its module's code, over q and k as (B*H, T, D)."""
    attention = encoder.layer[layer].attention.self
    relative, embeddings = encoder.get_rel_pos(trace.x), encoder.get_rel_embedding()
    flat = (trace.q.flatten(0, 1), trace.k.flatten(0, 1))
    return attention.disentangled_attention_bias(*flat, relative, embeddings, factor)


def _v1_terms(encoder: Any, trace: Any, layer: int, factor: int) -> torch.Tensor:
    """DeBERTa (v1)'s terms from its module's code, over its q (with q_bias) scaled."""
    attention = encoder.layer[layer].attention.self
    relative, embeddings = encoder.get_rel_pos(trace.x), encoder.get_rel_embedding()
    scaled = trace.q / math.sqrt(trace.q.shape[-1] * factor)
    return attention.disentangled_att_bias(scaled, trace.k, relative, embeddings, factor)


@pytest.mark.parametrize(
    ("name", "layer", "terms"),
    [("tiny-deberta-v2", 0, _v2_terms), ("tiny-deberta", 1, _v1_terms)],
    ids=["v2", "v1"],
)
def test_deberta_position_terms_are_a_step_of_their_own(
    name: str,
    layer: int,
    terms: Callable[[Any, Any, int, int], torch.Tensor],
    hf_checkpoints: Callable[[str], Path],
) -> None:
    """Scores q·k / sqrt(d * 3) (content, c2p, p2c); the content-to-position and
    position-to-content terms, as the module's own code computes them, are the score bias."""
    model = _load(hf_checkpoints(name))
    _, trace = model.trace(LONG_TEXT, layer)
    steps = trace.steps
    assert steps.biased_scores is not None
    assert steps.scale == pytest.approx(1 / math.sqrt(trace.q.shape[-1] * 3))
    with torch.inference_mode():
        expected = terms(model.model.model.encoder, trace, layer, 3)
    bias = steps.biased_scores - steps.scaled_scores
    torch.testing.assert_close(bias, expected.view_as(bias), atol=1e-5, rtol=1e-5)
    assert float(bias.abs().mean()) > 0.01  # the position terms move the scores


def test_gpt_neo_local_layer_reads_its_window_unscaled(
    hf_checkpoints: Callable[[str], Path],
) -> None:
    """GPT-Neo: no 1/sqrt(d) scale; its local layer's own window (4 keys) is the mask."""
    model = _load(hf_checkpoints("tiny-gpt-neo"))
    tokenized, trace = model.trace(LONG_TEXT, 1)
    assert trace.steps.scale == 1.0
    T = len(tokenized.input_ids)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    assert trace.steps.allowed is not None
    assert torch.equal(trace.steps.allowed[0, 0], (j <= i) & (i - j < 4))


def test_albert_counts_its_shared_attention_once_per_layer(
    hf_checkpoints: Callable[[str], Path],
) -> None:
    model = _load(hf_checkpoints("tiny-albert"))
    named = model.model.model.named_modules()
    modules = {name for name, m in named if type(m).__name__ == "AlbertAttention"}
    assert len(modules) == 1 and model.model.per_call
    maps = model.encode(LONG_TEXT)
    assert len(maps.layer_attentions) == 2
    assert not torch.allclose(maps.layer_attentions[0], maps.layer_attentions[1])
    for layer in (0, 1):  # each layer's trace is that call's, its input the layer's
        _, trace = model.trace(LONG_TEXT, layer)
        torch.testing.assert_close(trace.steps.attn_weights[0], maps.layer_attentions[layer])
        torch.testing.assert_close(trace.x[0], maps.layer_hidden_states[layer], atol=1e-5, rtol=0)


@pytest.fixture(scope="module", params=["fsmt", "led"])
def fsmt(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, Any]:
    """(ours through the registry, transformers' eager model) of one random FSMT or LED
    checkpoint: the encoder-decoders whose attention is their own code."""
    from tests.models.seq2seq_checkpoints import make_own_code_seq2seq

    name = str(request.param)
    path = make_own_code_seq2seq(tmp_path_factory.mktemp(name) / f"tiny-{name}", name)
    eager = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        path, attn_implementation="eager", dtype=torch.float32, local_files_only=True
    )
    return _load(path), eager.eval()


def _unbanded(maps: tuple[torch.Tensor, ...], keys: int) -> tuple[torch.Tensor, ...]:
    """LED's eager encoder maps (each query's window of keys) as full maps: the sweep's."""
    spec = importlib.util.spec_from_file_location("sweep_families", SWEEP)
    assert spec is not None and spec.loader is not None
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    return tuple(sweep.unbanded(m, keys) for m in maps)


def _fsmt_eager(eager: Any, source: tuple[int, ...], target: tuple[int, ...]) -> Any:
    with torch.inference_mode():  # without use_cache=False FSMT builds no causal mask
        out = eager(
            input_ids=torch.tensor([source]),
            decoder_input_ids=torch.tensor([target]),
            output_attentions=True,
            use_cache=False,
        )
    out.encoder_attentions = _unbanded(out.encoder_attentions, len(source))
    return out


def test_fsmt_three_stacks_equal_eager(fsmt: tuple[Any, Any]) -> None:
    model, eager = fsmt
    maps = model.encode_pair(LONG_TEXT, "Die Bank war schlammig.")
    out = _fsmt_eager(eager, maps.source.input_ids, maps.target.input_ids)
    stacks = (
        (maps.layer_attentions, out.encoder_attentions),
        (maps.decoder_attentions, out.decoder_attentions),
        (maps.cross_attentions, out.cross_attentions),
    )
    for ours, theirs in stacks:
        assert len(ours) == len(theirs) == 2
        for got, want in zip(ours, theirs, strict=True):
            torch.testing.assert_close(got, want[0], atol=1e-5, rtol=0)
    assert bool((maps.decoder_attentions[0].triu(1) == 0).all())  # causal


def test_fsmt_greedy_ids_equal_generate(fsmt: tuple[Any, Any]) -> None:
    model, eager = fsmt
    result = model.generate(LONG_TEXT, 8)
    source = model.tokenize(LONG_TEXT).input_ids
    with torch.inference_mode():
        expected = eager.generate(
            torch.tensor([source]), max_new_tokens=8, do_sample=False, num_beams=1
        )
    assert [model.start_id, *result.new_ids] == expected[0].tolist()


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_fsmt_head_step_by_step_is_its_map(stack: str, fsmt: tuple[Any, Any]) -> None:
    model, eager = fsmt
    target = "Die Bank war schlammig."
    rows, trace, _ = model.trace_stack(LONG_TEXT, target, stack, 1)
    maps = model.encode_pair(LONG_TEXT, target)
    out = _fsmt_eager(eager, maps.source.input_ids, maps.target.input_ids)
    reference = {
        "encoder": out.encoder_attentions,
        "decoder": out.decoder_attentions,
        "cross": out.cross_attentions,
    }[stack]
    torch.testing.assert_close(
        trace.steps.attn_weights[0, 2], reference[1][0, 2], atol=1e-5, rtol=0
    )
    assert trace.x.shape == (1, len(rows.input_ids), 32)  # (B, T, C): FSMT's turned, LED unpadded
    torch.testing.assert_close(trace.steps.attn_scores, trace.q @ trace.k.transpose(-1, -2))
