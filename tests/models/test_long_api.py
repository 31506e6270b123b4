"""A 4,096-token input through the API on a tiny random GPT-2 (its maps, 537 MB, are over
the default ``model_full_maps_bytes``): the long path's overview, one head's region at
full resolution against transformers' eager attention, and no H × T × T tensor made."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from attention_core.models.base.contract import PassOptions
from attention_core.models.base.result_cache import ResultCache
from attention_core.models.maps.map_grid import MapQuery
from attention_core.models.maps.pooling import Region
from tests.models.checkpoints import eager_attentions, make_gpt2
from tests.models.test_long_maps import LargestOutput
from tests.models.test_map_view import max_pool
from tests.requires import require

NAME = "gpt2-4k"
CONTEXT = 4096
HEADS = 4
SENTENCE = "the river bank was muddy and the money was in the bank "


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    directory = tmp_path_factory.mktemp("long-api") / NAME
    return make_gpt2(directory, n_positions=CONTEXT, n_head=HEADS, seed=11)


@pytest.fixture(scope="module")
def text(model_dir: Path) -> str:
    """As many sentences as fit in the context."""
    tokenizers = require("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    per_sentence = len(tokenizer.encode(SENTENCE * 10).ids) / 10
    count = int(CONTEXT / per_sentence) - 2
    assert len(tokenizer.encode(SENTENCE * count).ids) <= CONTEXT
    return SENTENCE * count


@pytest.fixture(scope="module")
def client(model_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(models=str(model_dir), hf_cache=False))) as test_client:
        assert test_client.get("/api/models").status_code == 200  # builds the registry
        yield test_client


def post(client: TestClient, text: str, **body: Any) -> dict[str, Any]:
    response = client.post("/api/model/attention", json={"model": NAME, "text": text, **body})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def eager(model_dir: Path, client: TestClient, text: str) -> tuple[torch.Tensor, ...]:
    """transformers' eager attention of the text, (1, H, T, T) per layer."""
    decoder = client.app.state.models.load(NAME)  # type: ignore[attr-defined]
    return eager_attentions(model_dir, decoder.tokenize(text).input_ids)


def test_a_4096_token_overview_then_one_head_region(
    client: TestClient, text: str, eager: tuple[torch.Tensor, ...]
) -> None:
    T = eager[0].shape[-1]
    assert CONTEXT - 100 <= T <= CONTEXT
    limits = client.get("/api/limits").json()
    assert limits["model_max_tokens"] is None  # per model: its context, as memory allows
    assert client.get("/api/model", params={"model": NAME}).json()["max_tokens"] == CONTEXT
    assert 2 * HEADS * T * T * 4 > limits["model_full_maps_bytes"]  # so: the long path
    overview = post(client, text, pool=128)
    assert overview["maps_path"] == "long" and overview["rollout"] is None
    assert "ATTENTION_VIZ_MODEL_LONG_ROLLOUT_TOKENS" in overview["rollout_note"]
    block = -(-T // 128)
    assert overview["pooled"]["block"] == [block, block]
    for layer in range(2):
        want = max_pool(eager[layer][0].numpy(), (block, block))
        np.testing.assert_allclose(overview["attentions"][layer], want, atol=1e-5, rtol=0)
        average = max_pool(eager[layer][0].mean(0).numpy(), (block, block))
        np.testing.assert_allclose(overview["head_average"][layer], average, atol=1e-5, rtol=0)
    # The last 64 rows of head 3 at full resolution, rebuilt from the kept q and k.
    rows = [T - 64, T]
    zoom = post(client, text, heads=[3], layers=[2], rows=rows, head_average=False)
    assert zoom["head_average"] is None and zoom["pooled"] is None
    want = eager[1][0, [2], T - 64 :].numpy()
    np.testing.assert_allclose(zoom["attentions"][0], want, atol=1e-5, rtol=0)


def test_a_4096_token_pass_makes_no_tensor_of_every_head_s_map(
    client: TestClient, text: str
) -> None:
    decoder = client.app.state.models.load(NAME)  # type: ignore[attr-defined]
    T = len(decoder.tokenize(text))
    spec = MapQuery(None, Region(0, T, 0, T), (64, 64), None)
    decoder.long_cache = ResultCache(0)  # no cached result: the pass runs under the watch
    with LargestOutput() as watched:
        long = decoder.forward_stacks(text, options=PassOptions(view=lambda *_: spec)).stack()
    assert watched.largest < T * T // 2  # blocks of rows: not even one head's whole map
    with LargestOutput() as zoom:
        grid = long.grid(1, MapQuery(None, Region(0, T, 0, T), (1, 1), (0,), average=False))
    assert grid.heads.shape == (1, T, T)
    assert zoom.largest == T * T  # the one head asked for, never all four


def test_a_4096_token_map_without_pool_is_refused_before_any_work(
    client: TestClient, text: str
) -> None:
    response = client.post("/api/model/attention", json={"model": NAME, "text": text})
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "pool"]
    assert detail["ctx"]["setting"] == "ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS"


def test_generation_after_a_4090_token_prompt_answers_its_maps_pooled(
    client: TestClient, text: str, eager: tuple[torch.Tensor, ...]
) -> None:
    """Once refused ("needs every attention map"): the generation keeps no map and its maps
    are one long pass over the prompt and the ids written; the prompt's rows pooled equal
    transformers' eager maps of the prompt pooled (a causal row reads only what precedes)."""
    from attention_core.models.base.contract import PassOptions as Options

    body = {"model": NAME, "prompt": text, "max_new_tokens": 2, "pool": 64, "layers": [2]}
    response = client.post("/api/model/generate", json=body)
    assert response.status_code == 200, response.text[:300]
    answer = response.json()
    T = eager[0].shape[-1]
    assert len(answer["generated_ids"]) == 2 and len(answer["tokens"]) == T + 2
    assert answer["maps_path"] == "long" and answer["pooled"]["shape"] == [64, 64]
    decoder = client.app.state.models.load(NAME)  # type: ignore[attr-defined]
    with torch.inference_mode(), LargestOutput() as watched:
        result = decoder.generate(text, 2, capture_attentions=False)
        decoder.pass_of(result.sequence, Options())
    assert watched.largest < T * T // 2
    rows = client.post(
        "/api/model/generate", json={**body, "pool": None, "rows": [T - 8, T], "cols": [0, T]}
    ).json()
    np.testing.assert_allclose(rows["attentions"][0], eager[1][0, :, T - 8 :].numpy(), atol=1e-5)


def test_head_scores_of_a_4096_token_text_are_summed_block_by_block(
    client: TestClient, text: str
) -> None:
    """Once refused ("needs every attention map"); the four text scores now come from the
    kept q/k a block of rows at a time (equal to the full maps': test_stack_matrix.py)."""
    response = client.post("/api/model/head-scores", json={"model": NAME, "text": text})
    assert response.status_code == 200, response.text
    scores = response.json()
    for name in ("previous_token", "duplicate_token", "first_token", "entropy"):
        grid = np.array(scores[name])
        assert grid.shape == (2, HEADS) and np.isfinite(grid).all(), name
    assert (np.array(scores["entropy"]) > 0).all()


def test_analyses_of_a_4096_token_text_make_no_tensor_of_a_head_s_map(
    client: TestClient, text: str
) -> None:
    """Head scores and value-weighted maps at 4,096 tokens run block by block from the
    pass: no op's output is a whole (T, T) map of even one head."""
    from attention_core.analysis import score_heads
    from attention_core.models.maps.map_grid import MapQuery

    decoder = client.app.state.models.load(NAME)  # type: ignore[attr-defined]
    T = len(decoder.tokenize(text))
    decoder.long_cache = ResultCache(0)  # no cached pass: it runs under the watch
    with torch.inference_mode(), LargestOutput() as scores:
        scored = score_heads(decoder, text, induction_length=2000)  # induction over 4,000 tokens
    assert scores.largest < T * T // 2
    assert len(scored.induction_ids) == 4000 and scored.scores.induction is not None
    query = MapQuery(None, Region(0, T, 0, T), (64, 64), None, measure="value_norm")
    with torch.inference_mode(), LargestOutput() as weighted:
        stack = decoder.forward_stacks(text, options=PassOptions(values=True)).stack()
        for layer in range(2):
            scale = stack.layers[layer].value_lengths(decoder.head_outputs("decoder", layer))
            stack.grid(layer, query, scale)
    assert weighted.largest < T * T // 2


def test_ablation_and_the_logit_lens_of_a_4096_token_text_make_no_tensor_of_a_head_s_map(
    client: TestClient, text: str
) -> None:
    """Once refused ("needs every attention map"): the ablated forward and the lens's hold
    no map (each layer's context block by block), the logits a block of positions at a
    time.  Equal to transformers with the head zeroed: test_stack_matrix.py."""
    from attention_core.analysis import ablate, head_model, logit_lens

    for path, body in (("ablate", {"heads": [[2, 3]]}), ("logit-lens", {})):
        response = client.post(f"/api/model/{path}", json={"model": NAME, "text": text, **body})
        assert response.status_code == 200, response.text
    answer = response.json()
    T = len(answer["tokens"])
    assert len(answer["top_ids"]) == 2 and len(answer["top_ids"][0]) == T
    decoder = client.app.state.models.load(NAME)  # type: ignore[attr-defined]
    heads = head_model(decoder)
    ids = heads.tokenize(text).ids
    with torch.inference_mode(), LargestOutput() as ablation:
        result = ablate(heads, ids, [(1, 2)])
    assert result.after is not None and result.before is not None
    assert result.after.loss != result.before.loss
    assert ablation.largest < T * T // 2
    with torch.inference_mode(), LargestOutput() as lens:
        logit_lens(decoder, text)
    assert lens.largest < T * T // 2


def test_a_4096_token_head_trace_answers_a_region_or_pooled_from_the_kept_layer(
    client: TestClient, text: str, eager: tuple[torch.Tensor, ...]
) -> None:
    """Once refused: one head's steps for the last 64 rows, and pooled to 64 × 64, equal to
    transformers' eager map (cropped, max-pooled); the whole map is over the JSON limit and
    refused on ``pool``; the region's answer makes no tensor of a head's whole map."""
    from app.head_answer import head_answer
    from app.schemas.model import ModelHeadRequest

    T = eager[0].shape[-1]
    body = {"model": NAME, "text": text, "layer": 2, "head": 3}
    whole = client.post("/api/model/head", json=body)
    assert whole.status_code == 422 and whole.json()["detail"][0]["loc"] == ["body", "pool"]
    region = client.post("/api/model/head", json={**body, "rows": [T - 64, T]})
    assert region.status_code == 200, region.text[:300]
    steps = region.json()["heads"][0]
    want = eager[1][0, 2, T - 64 :].numpy()
    np.testing.assert_allclose(steps["attn_weights"], want, atol=1e-5, rtol=0)
    assert len(steps["q"]) == 64 and len(steps["k"]) == T
    pooled = client.post("/api/model/head", json={**body, "pool": 64}).json()
    block = -(-T // 64)
    assert pooled["pooled"]["block"] == [block, block]
    np.testing.assert_allclose(
        pooled["heads"][0]["attn_weights"],
        max_pool(eager[1][0, 2].numpy(), (block, block)),
        atol=1e-5,
        rtol=0,
    )
    decoder = client.app.state.models.load(NAME)  # type: ignore[attr-defined]
    decoder.long_cache = ResultCache(0)  # no cached pass: it runs under the watch
    request = ModelHeadRequest.model_validate({**body, "rows": [T - 64, T]})
    with LargestOutput() as watched:
        head_answer(decoder, NAME, request, None, Settings(models="unused", hf_cache=False))
    assert watched.largest < T * T // 2


def test_why_and_attribution_of_a_4096_token_text_make_no_tensor_of_a_head_s_map(
    client: TestClient, text: str
) -> None:
    """Once refused ("needs every attention map"): one cell's decomposition and every
    head's attribution patching run forwards that hold no map (each layer's context block
    by block; the gradient pass keeps blocks of rows).  Equal to transformers at ≈300
    tokens: test_stack_matrix.py."""
    from attention_core.analysis import head_model
    from attention_core.analysis.attribution import attribute
    from attention_core.analysis.qk_decomposition import why

    decoder = client.app.state.models.load(NAME)  # type: ignore[attr-defined]
    heads = head_model(decoder)
    ids = heads.tokenize(text).ids
    T = len(ids)
    cell = {"layer": 2, "head": 3, "row": T - 1, "col": T - 5}
    answer = client.post("/api/model/why", json={"model": NAME, "text": text, **cell})
    assert answer.status_code == 200, answer.text[:300]
    assert 0 < answer.json()["weight"] < 1
    attributed = client.post("/api/model/attribute", json={"model": NAME, "text": text})
    assert attributed.status_code == 200, attributed.text[:300]
    estimate = np.array(attributed.json()["estimate"])
    assert estimate.shape == (2, HEADS) and np.isfinite(estimate).all()
    with LargestOutput() as watched:
        result = why(heads, ids, 1, 2, T - 1, T - 5)
        attribute(heads, ids)
    assert result.weight == pytest.approx(answer.json()["weight"], abs=1e-6)
    assert watched.largest < T * T // 2


MARIAN = "marian-4k"


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A Marian encoder-decoder with 4,096 positions, served."""
    from tests.models.seq2seq_checkpoints import make_seq2seq

    require("transformers")
    root = tmp_path_factory.mktemp("long-seq2seq")
    make_seq2seq(root / MARIAN, "marian", seed=5, max_position_embeddings=CONTEXT)
    with TestClient(create_app(Settings(models=str(root), hf_cache=False))) as test_client:
        assert test_client.get("/api/models").status_code == 200
        yield test_client


def test_an_encoder_decoder_writes_after_a_4000_token_source_and_scores_induction_over_4000(
    marian: TestClient,
) -> None:
    """Once refused ("needs every attention map"): the generation keeps no map (the
    source's pass block by block, each step reading the cache) and its three stacks come
    pooled from one long pass; the encoder's induction score over 3,980 tokens is summed
    block by block.  No op makes a tensor of a head's whole map.  Equal to transformers at
    short lengths: test_stack_matrix.py; at 600 tokens: test_work_limits_api.py."""
    from attention_core.analysis.model_scores import score_model

    model = marian.app.state.models.load(MARIAN)  # type: ignore[attr-defined]
    per_sentence = len(model.tokenize(SENTENCE * 10).input_ids) / 10
    source = SENTENCE * int(4000 / per_sentence)
    S = len(model.tokenize(source).input_ids)
    assert 3900 <= S <= CONTEXT
    body = {"model": MARIAN, "prompt": source, "max_new_tokens": 3, "pool": 64}
    response = marian.post("/api/model/generate", json=body)
    assert response.status_code == 200, response.text[:300]
    answer = response.json()
    assert answer["maps_path"] == "long" and answer["prompt_tokens"] == S
    assert np.array(answer["attentions"][0]).shape == (4, 64, 64)
    rows = len(answer["generated_ids"]) + 1  # the start token and every written one
    assert np.array(answer["cross_attentions"][0]).shape == (4, rows, 64)
    scores = marian.post(
        "/api/model/head-scores", json={"model": MARIAN, "text": "a", "induction_length": 1990}
    )
    assert scores.status_code == 200, scores.text[:300]
    assert np.isfinite(np.array(scores.json()["induction"])).all()
    model.long_cache = ResultCache(0)  # no cached pass: it runs under the watch
    with torch.inference_mode(), LargestOutput() as watched:
        written = model.generate(source, 3, capture_attentions=False)
        model.forward_stacks(source, target=written.new_ids)
        score_model(model, "a", induction_length=1990)
    assert written.new_ids == tuple(answer["generated_ids"])
    assert watched.largest < S * S // 2


def test_an_encoder_decoders_ablation_and_lens_after_a_4000_token_source_hold_no_map(
    marian: TestClient,
) -> None:
    """One encoder head ablated and the decoder's lens, past a 3,900-token source: the
    forwards compute each layer's context block by block (equal to transformers at short
    lengths: test_stack_matrix.py)."""
    from attention_core.analysis import seq2seq_heads

    model = marian.app.state.models.load(MARIAN)  # type: ignore[attr-defined]
    per_sentence = len(model.tokenize(SENTENCE * 10).input_ids) / 10
    source = SENTENCE * int(4000 / per_sentence)
    S = len(model.tokenize(source).input_ids)
    body = {"model": MARIAN, "text": source, "target": "the bank"}
    ablated = marian.post("/api/model/ablate", json={**body, "heads": [[1, 2]]})
    assert ablated.status_code == 200, ablated.text[:300]
    assert ablated.json()["loss_after"] != ablated.json()["loss_before"]
    lens = marian.post("/api/model/logit-lens", json=body)
    assert lens.status_code == 200, lens.text[:300]
    text = seq2seq_heads.read(model, source, "the bank")
    with torch.inference_mode(), LargestOutput() as watched:
        seq2seq_heads.ablate_stack(model, text, "encoder", [(0, 1)])
        seq2seq_heads.seq2seq_lens(model, text)
    assert watched.largest < S * S // 2


def test_an_encoder_decoders_why_on_each_stack_after_4000_tokens_holds_no_map(
    marian: TestClient,
) -> None:
    """One cell's decomposition on each of Marian's stacks, a ≈4,000-token source and a
    ≈2,000-token target: the forward computes each layer's context block by block, the
    cell's softmax reads one row; no op makes a tensor of S²/2 elements (the decoder's one
    (1, 1, T, T) boolean causal mask, transformers', is T² = a quarter of S²).  Equal to
    transformers at short lengths: test_stack_matrix.py."""
    from attention_core.analysis import seq2seq_heads
    from attention_core.analysis.seq2seq_why import seq2seq_why

    model = marian.app.state.models.load(MARIAN)  # type: ignore[attr-defined]
    per_sentence = len(model.tokenize(SENTENCE * 10).input_ids) / 10
    source = SENTENCE * int(3990 / per_sentence)
    target = SENTENCE * int(1990 / per_sentence)
    text = seq2seq_heads.read(model, source, target)
    S, T = len(text.source), len(text.target)
    assert S > 3900 and T > 1900
    cells = {"encoder": (S - 1, 5), "decoder": (T - 1, T - 5), "cross": (T - 1, S - 5)}
    for stack, (row, col) in cells.items():
        body = {"model": MARIAN, "text": source, "target": target, "stack": stack}
        cell = {"layer": 2, "head": 3, "row": row, "col": col}
        answer = marian.post("/api/model/why", json={**body, **cell})
        assert answer.status_code == 200, answer.text[:300]
        assert 0 < answer.json()["weight"] < 1
    with torch.inference_mode(), LargestOutput() as watched:
        for stack, (row, col) in cells.items():
            seq2seq_why(model, text, stack, 1, 2, row, col)  # type: ignore[arg-type]
    assert watched.largest < S * S // 2


def test_an_encoder_decoders_attribution_after_4000_tokens_holds_no_map(
    marian: TestClient,
) -> None:
    """Attribution patching of every head of Marian's three stacks, a ≈4,000-token source
    and a ≈2,000-token target: the forward computes each attention's context in blocks of
    rows, which the backward reads back; no op makes a tensor of S²/2 elements (equal to
    transformers' autograd at ≈300 tokens: test_stack_matrix.py)."""
    from attention_core.analysis import seq2seq_heads
    from attention_core.analysis.seq2seq_attribution import seq2seq_attribute

    model = marian.app.state.models.load(MARIAN)  # type: ignore[attr-defined]
    per_sentence = len(model.tokenize(SENTENCE * 10).input_ids) / 10
    source = SENTENCE * int(3990 / per_sentence)
    target = SENTENCE * int(1990 / per_sentence)
    body = {"model": MARIAN, "text": source, "target": target, "stack": "cross"}
    answer = marian.post("/api/model/attribute", json=body)
    assert answer.status_code == 200, answer.text[:300]
    stacks = answer.json()["stacks"]
    assert sorted(stacks) == ["cross", "decoder", "encoder"]
    assert all(np.isfinite(np.array(grid)).all() for grid in stacks.values())
    text = seq2seq_heads.read(model, source, target)
    S = len(text.source)
    with LargestOutput() as watched:
        result = seq2seq_attribute(model, text, "cross")
    np.testing.assert_allclose(result.estimate.numpy(), stacks["cross"], atol=1e-5, rtol=0)
    assert watched.largest < S * S // 2
