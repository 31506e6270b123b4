"""Encoder-decoders through the API (FastAPI's TestClient): ``target`` on /api/model/attention,
the three stacks, generation, ``stack`` on /api/model/head, equal to transformers' eager
attention; and the bad inputs (``target``/``stack`` for one-stack models) as 422s."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from tests.api_calls import error, post, served
from tests.models.checkpoints import make_gpt2
from tests.models.seq2seq_checkpoints import SEQ2SEQ, make_seq2seq
from tests.requires import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SOURCE = "The cat sat on the mat because it was tired."
TARGET = "Die Katze sass auf der Matte."
NAMES = sorted(SEQ2SEQ)
TOL = 1e-5


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("served-seq2seq")
    for name, model_type in SEQ2SEQ.items():
        make_seq2seq(root / name, model_type)
    make_seq2seq(root / "bart-2-1", "bart", decoder_layers=1, seed=3)  # stacks of two depths
    make_gpt2(root / "tiny-gpt2")
    return root


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    yield from served(models_dir, max_new_tokens=40)


@pytest.fixture(scope="module")
def reference(models_dir: Path) -> Any:
    """name -> transformers' eager outputs for SOURCE and TARGET (labels), and the model."""
    transformers = require("transformers")
    done: dict[str, tuple[Any, Any, Any]] = {}

    def get(name: str) -> tuple[Any, Any, Any]:
        if name not in done:
            path = models_dir / name
            model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
                path, attn_implementation="eager", local_files_only=True
            ).eval()
            tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            batch = tokenizer(SOURCE, text_target=TARGET, return_tensors="pt")
            with torch.inference_mode():
                out = model(**batch, output_attentions=True)
            done[name] = (out, model, tokenizer)
        return done[name]

    return get


def compact(tensor: dict[str, Any]) -> np.ndarray:
    raw = np.frombuffer(base64.b64decode(tensor["data"]), dtype=np.uint8)
    return (raw.astype(np.float32) / 255).reshape(tensor["shape"])


def test_listing_says_encoder_decoder(client: TestClient) -> None:
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    for name in NAMES:
        assert models[name]["supported"], models[name]["reason"]
        assert models[name]["kind"] == "encoder-decoder"
        assert models[name]["backend"] == "transformers"
    info = client.get("/api/model", params={"model": "tiny-marian"}).json()
    assert info["layers"] == 2 and info["heads"] == 4 and info["family"] == "marian"


@pytest.mark.parametrize("name", NAMES)
def test_attention_with_a_target_gives_the_three_stacks(
    name: str, client: TestClient, reference: Any
) -> None:
    out, model, tokenizer = reference(name)
    body = post(client, "/api/model/attention", {"model": name, "text": SOURCE, "target": TARGET})
    batch = tokenizer(SOURCE, text_target=TARGET)
    start = model.generation_config.decoder_start_token_id
    assert body["source_tokens"] == body["tokens"] and len(body["tokens"]) == len(
        batch["input_ids"]
    )
    assert len(body["target_tokens"]) == len(batch["labels"])
    assert body["target_tokens"][0] == tokenizer.convert_ids_to_tokens(start)
    assert body["target_special"][0] is True and body["layers"] == [1, 2]
    for field in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
        expected = getattr(out, field)
        for layer, weights in enumerate(body[field]):
            got = torch.tensor(weights)
            assert torch.allclose(got, expected[layer][0], atol=TOL, rtol=0), (field, layer)
    assert body["attentions"] == body["encoder_attentions"]
    # The cross map: target rows, source columns, every row sums to 1.
    cross = np.array(body["cross_attentions"][0])
    assert cross.shape == (4, len(body["target_tokens"]), len(body["tokens"]))
    assert np.allclose(cross.sum(-1), 1.0, atol=1e-5)


def test_compact_and_hidden_specials(client: TestClient, reference: Any) -> None:
    out, _, _ = reference("tiny-bart")
    body = post(
        client,
        "/api/model/attention",
        {
            "model": "tiny-bart",
            "text": SOURCE,
            "target": TARGET,
            "format": "compact",
            "layers": [2],
            "hide_special": True,
        },
    )
    # BART's source is <s> … </s>; its decoder reads </s> <s> …: every special one hidden.
    assert body["positions"] == list(range(1, len(body["all_tokens"]) - 1))
    assert body["target_positions"] == list(range(2, len(body["all_target_tokens"])))
    assert "<s>" not in body["tokens"] and "</s>" not in body["target_tokens"]
    cross = compact(body["cross_attentions"][0])  # layer 2, (H, T_kept, S_kept)
    rows, cols = body["target_positions"], body["positions"]
    expected = out.cross_attentions[1][0][:, rows][:, :, cols].numpy()
    expected /= expected.sum(-1, keepdims=True)
    assert np.abs(cross - expected).max() <= 1 / 510 + 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_generate_writes_transformers_ids_with_the_three_stacks(
    name: str, client: TestClient, reference: Any
) -> None:
    _, model, tokenizer = reference(name)
    ids = tokenizer(SOURCE, return_tensors="pt").input_ids
    with torch.inference_mode():
        expected = model.generate(ids, do_sample=False, num_beams=1, max_new_tokens=10)[0]
    body = post(
        client, "/api/model/generate", {"model": name, "prompt": SOURCE, "max_new_tokens": 10}
    )
    assert body["generated_ids"] == expected.tolist()[1:]
    assert body["generated_text"] == tokenizer.decode(expected[1:])
    T, S = len(expected), len(body["tokens"])
    assert len(body["target_tokens"]) == T and body["prompt_tokens"] == S
    assert len(body["generated_tokens"]) == T - 1
    assert np.array(body["cross_attentions"][1]).shape == (4, T, S)
    assert np.array(body["decoder_attentions"][0]).shape == (4, T, T)
    with torch.inference_mode():
        whole = model(input_ids=ids, decoder_input_ids=expected[None], output_attentions=True)
    got = torch.tensor(body["cross_attentions"][1])
    assert torch.allclose(got, whole.cross_attentions[1][0], atol=1e-4, rtol=0)


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_one_head_of_any_stack(stack: str, client: TestClient, reference: Any) -> None:
    out, _, _ = reference("tiny-t5")
    body = post(
        client,
        "/api/model/head",
        {
            "model": "tiny-t5",
            "text": SOURCE,
            "target": TARGET,
            "stack": stack,
            "layer": 2,
            "head": 3,
        },
    )
    expected = getattr(out, f"{stack}_attentions")[1][0, 2]
    (steps,) = body["heads"]
    assert torch.allclose(torch.tensor(steps["attn_weights"]), expected, atol=TOL, rtol=0)
    assert body["stack"] == stack and body["cross"] is (stack == "cross")
    assert body["scale"] == 1.0  # T5 does not scale; its relative positions are added
    # ... as a step of their own: biased = scaled + the bias (zero for cross-attention).
    bias = np.array(steps["biased_scores"]) - np.array(steps["scaled_scores"])
    if stack == "cross":
        assert np.abs(bias).max() == 0.0
    else:  # T5's relative positions: one bias per distance (encoder: bidirectional)
        assert np.abs(bias).max() > 0.0
        assert np.allclose(bias[1, 0], bias[2, 1], atol=1e-5)
    S = len(body["source_tokens"])
    if stack == "cross":
        assert np.array(body["source"]).shape == (S, 32) and body["shapes"]["k"] == [S, 8]
        assert len(body["tokens"]) == expected.shape[0] != S
    else:
        assert body["source"] is None
    assert body["causal"] is (stack == "decoder")


def test_one_stack_models_refuse_target_and_stack(client: TestClient) -> None:
    for model, kind in (("tiny-gpt2", "decoder"), (None, "encoder")):
        named = {"model": model} if model else {}
        detail = error(
            client.post("/api/model/attention", json={**named, "text": SOURCE, "target": "x"})
        )
        assert detail["loc"] == ["body", "target"] and kind in detail["msg"]
        detail = error(
            client.post(
                "/api/model/head",
                json={**named, "text": SOURCE, "stack": "cross", "layer": 1, "head": 1},
            )
        )
        assert detail["loc"] == ["body", "stack"] and "encoder-decoder" in detail["msg"]
        detail = error(
            client.post(
                "/api/model/head",
                json={**named, "text": SOURCE, "target": "x", "layer": 1, "head": 1},
            )
        )
        assert detail["loc"] == ["body", "target"]
    # A model's own stack is accepted.
    post(
        client,
        "/api/model/head",
        {"model": "tiny-gpt2", "text": SOURCE, "stack": "decoder", "layer": 1, "head": 1},
    )


def test_encoder_decoder_bad_inputs(client: TestClient) -> None:
    bad = [
        ({"text": SOURCE, "text_b": TARGET}, "/api/model/attention", ["body", "text_b"]),
        ({"text": SOURCE, "target": ""}, "/api/model/attention", ["body", "target"]),
        (
            {"text": SOURCE, "stack": "cross", "layer": 3, "head": 1},
            "/api/model/head",
            ["body", "layer"],
        ),
        (
            {"text": SOURCE, "stack": "sideways", "layer": 1, "head": 1},
            "/api/model/head",
            ["body", "stack"],
        ),
        (
            {"text": SOURCE, "stack": "decoder", "layer": 1, "head": 9},
            "/api/model/head",
            ["body", "head"],
        ),
        (
            {"prompt": SOURCE, "max_new_tokens": 41},
            "/api/model/generate",
            ["body", "max_new_tokens"],
        ),
    ]
    for body, path, loc in bad:
        detail = error(client.post(path, json={"model": "tiny-marian", **body}))
        assert detail["loc"] == loc, (body, detail)
    # Word comparisons and vocabulary vectors are an encoder's.
    detail = error(
        client.post(
            "/api/model/compare-word",
            json={"model": "tiny-marian", "text_a": "a cat", "text_b": "the cat", "word": "cat"},
        )
    )
    assert detail["loc"] == ["body", "model"] and "marian encoder-decoder" in detail["msg"]


def test_stacks_of_different_depths(client: TestClient, models_dir: Path) -> None:
    transformers = require("transformers")
    path = models_dir / "bart-2-1"
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        path, attn_implementation="eager", local_files_only=True
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    with torch.inference_mode():
        out = model(
            **tokenizer(SOURCE, text_target=TARGET, return_tensors="pt"), output_attentions=True
        )
    body = post(
        client, "/api/model/attention", {"model": "bart-2-1", "text": SOURCE, "target": TARGET}
    )
    assert body["layers"] == [1, 2]
    assert len(body["encoder_attentions"]) == 2 and len(body["rollout"]) == 2
    assert len(body["decoder_attentions"]) == len(body["cross_attentions"]) == 1
    got = torch.tensor(body["cross_attentions"][0])
    assert torch.allclose(got, out.cross_attentions[0][0], atol=TOL, rtol=0)
    only_second = post(
        client,
        "/api/model/attention",
        {"model": "bart-2-1", "text": SOURCE, "target": TARGET, "layers": [2]},
    )
    assert len(only_second["encoder_attentions"]) == 1 and only_second["cross_attentions"] == []
