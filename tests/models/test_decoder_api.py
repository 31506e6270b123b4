"""Decoders through the API (real HTTP semantics, FastAPI's TestClient): listings, maps
equal to transformers', generation, one head step by step, and every bad input."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Callable, Iterator
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from attention_core.models import Decoder, read_header
from tests.api_calls import error, post, served
from tests.models.conftest import CHECKPOINTS, DECODERS

PROMPT = "The bank approved the loan because"
LONG = " ".join(["the river bank was muddy and the money was in the bank"] * 8)


@pytest.fixture(scope="module")
def models_dir(checkpoints: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's checkpoints plus a broken one and an encoder-decoder, side by side."""
    root = tmp_path_factory.mktemp("served")
    for child in checkpoints.iterdir():
        shutil.copytree(child, root / child.name)
    broken = Path(shutil.copytree(checkpoints / "tiny-gpt2", root / "broken-gpt2"))
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    t5 = root / "tiny-t5"
    t5.mkdir()
    (t5 / "config.json").write_text('{"model_type": "t5", "is_encoder_decoder": true}')
    return root


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    yield from served(models_dir, max_new_tokens=40)


def text_of(decoder: Decoder, length: int) -> str:
    """A prefix of LONG that is exactly ``length`` tokens."""
    for end in range(1, len(LONG) + 1):
        if len(decoder.tokenizer.encode(LONG[:end], limit=10_000)) == length:
            return LONG[:end]
    raise AssertionError(f"no prefix of LONG is {length} tokens")


def stored_bytes(directory: Path) -> int:
    """The bytes of a checkpoint's tensors in its file (what a held model takes)."""
    entries = read_header(directory / "model.safetensors").entries.values()
    return sum(e.end - e.begin for e in entries)


def test_models_lists_every_model_with_its_sizes(
    client: TestClient, models_dir: Path, hf_decoder: Callable[[str], torch.nn.Module]
) -> None:
    body = client.get("/api/models").json()
    assert body["default"] == "sentence-transformers/all-MiniLM-L6-v2"
    models = {m["name"]: m for m in body["models"]}
    assert list(models)[0] == body["default"] and models[body["default"]]["default"]
    assert set(models) >= {*DECODERS, "broken-gpt2", "tiny-t5"}
    tiny = models["tiny-gpt2"]
    assert tiny == {
        "name": "tiny-gpt2",
        "source": "env",
        "default": False,
        "family": "gpt2",
        "causal": True,
        "backend": "core",
        "kind": "decoder",
        "capture": "core",
        "layers": 2,
        "heads": 4,
        "kv_heads": 4,
        "hidden_size": 32,
        "head_dim": 8,
        "max_positions": 48,
        "vocab_size": 320,
        "parameters": tiny["parameters"],
        "loaded": tiny["loaded"],
        "supported": True,
        "reason": None,
        "probe": None,  # not a trained run
        "dtype": "float32",
        "held_bytes": stored_bytes(models_dir / "tiny-gpt2"),  # float32, as stored
        "device": "cpu",
        "placement": None,  # within ATTENTION_VIZ_MAX_MODEL_BYTES
    }
    for name in DECODERS:  # read from the safetensors headers, counted as transformers does
        assert models[name]["parameters"] == hf_decoder(name).num_parameters()
    minilm = models[body["default"]]
    assert (minilm["family"], minilm["causal"], minilm["layers"]) == ("bert", False, 6)
    broken = models["broken-gpt2"]
    assert broken["supported"] is False and broken["family"] == "gpt2"
    assert broken["reason"].startswith("model.safetensors: the file is truncated")
    t5 = models["tiny-t5"]
    assert t5["supported"] is False and "no model.safetensors" in t5["reason"]
    assert t5["kind"] == "encoder-decoder"
    assert t5["layers"] is None
    assert (t5["backend"], t5["kind"]) == ("transformers", "encoder-decoder")


def test_loaded_flag_follows_use(client: TestClient) -> None:
    post(client, "/api/model/attention", {"model": "tiny-gpt2-untied", "text": "the cat"})
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert models["tiny-gpt2-untied"]["loaded"] is True
    assert models["tiny-t5"]["loaded"] is False


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("length", ["shortest", 17, "context"])
def test_attentions_and_hidden_states_equal_transformers(
    client: TestClient,
    hf_decoder: Callable[[str], torch.nn.Module],
    name: str,
    length: int | str,
) -> None:
    """At 1 token (2 where the tokenizer starts every text with BOS, as Llama's), 17 tokens
    and the model's full context."""
    decoder = client.app.state.models.load(name)  # type: ignore[attr-defined]
    if length == "shortest":
        T = 1 + decoder.tokenize("the").special[0]
    else:
        T = decoder.config.max_positions if length == "context" else int(length)
    text = text_of(decoder, T)
    body = post(
        client, "/api/model/attention", {"model": name, "text": text, "hidden_states": True}
    )
    assert body["model"] == name and body["causal"] is True
    assert body["family"] == CHECKPOINTS[name][0]
    ids = torch.tensor([decoder.tokenize(text).input_ids])
    assert len(body["tokens"]) == T == ids.shape[1]
    with torch.inference_mode():
        want = hf_decoder(name)(ids, output_attentions=True, output_hidden_states=True)
    for got, expected in zip(body["attentions"], want.attentions, strict=True):
        np.testing.assert_allclose(np.array(got), expected[0].numpy(), atol=1e-5, rtol=0)
    for got, expected in zip(body["hidden_states"], want.hidden_states[1:], strict=True):
        np.testing.assert_allclose(np.array(got), expected[0].numpy(), atol=1e-5, rtol=1e-5)
    rollout, average = np.array(body["rollout"]), np.array(body["head_average"])
    np.testing.assert_allclose(average, np.array(body["attentions"]).mean(1), atol=1e-6)
    np.testing.assert_allclose(rollout.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(rollout, 1) == 0)  # rollout of causal maps stays causal


def test_tokens_are_text_and_hiding_drops_the_first_token(client: TestClient) -> None:
    text = "The cat sat 😀 on the mat"
    body = post(client, "/api/model/attention", {"model": "tiny-gpt2", "text": text})
    # The emoji's 4 byte tokens each show it: once per run of repeats, the tokens spell the text.
    assert "".join(token for token, _ in groupby(body["tokens"])) == text
    assert not any("Ġ" in t for t in body["all_tokens"])
    hidden = post(
        client, "/api/model/attention", {"model": "tiny-gpt2", "text": text, "hide_special": True}
    )
    assert hidden["positions"] == list(range(1, len(body["all_tokens"])))
    assert hidden["tokens"] == body["tokens"][1:]
    weights = np.array(hidden["attentions"][0])
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    full = np.array(body["attentions"][0])[:, 1:, 1:]
    np.testing.assert_allclose(weights, full / full.sum(-1, keepdims=True), atol=1e-6)
    assert weights[:, 0, 0] == pytest.approx(1.0)  # the second token now sees only itself


def test_compact_maps_of_a_decoder(client: TestClient) -> None:
    body = post(
        client,
        "/api/model/attention",
        {"model": "tiny-gpt2-bf16", "text": PROMPT, "format": "compact", "layers": [2]},
    )
    layer = body["attentions"][0]
    T = len(body["tokens"])
    assert layer["shape"] == [4, T, T] and layer["dtype"] == "uint8"
    weights = np.frombuffer(base64.b64decode(layer["data"]), np.uint8).reshape(4, T, T) / 255
    assert np.all(np.triu(weights, 1) == 0)


def test_generate_greedy_equals_transformers(
    client: TestClient, hf_decoder: Callable[[str], torch.nn.Module]
) -> None:
    body = post(
        client,
        "/api/model/generate",
        {"model": "tiny-gpt2", "prompt": PROMPT, "max_new_tokens": 20, "layers": [1]},
    )
    P = body["prompt_tokens"]
    decoder = client.app.state.models.load("tiny-gpt2")  # type: ignore[attr-defined]
    ids = torch.tensor([decoder.tokenize(PROMPT).input_ids])
    assert ids.shape[1] == P
    with torch.inference_mode():
        theirs = hf_decoder("tiny-gpt2").generate(ids, max_new_tokens=20, do_sample=False)
    assert body["generated_ids"] == theirs[0, P:].tolist()
    assert body["stop_reason"] == "max_new_tokens" and body["temperature"] == 0.0
    assert body["seed"] is None  # greedy: no seed played a part
    assert body["generated"] == [False] * P + [True] * 20
    assert len(body["all_tokens"]) == P + 20 and body["all_tokens"][P:] == body["generated_tokens"]
    assert body["generated_text"] == decoder.tokenizer.decode(body["generated_ids"])
    weights = np.array(body["attentions"][0])
    assert weights.shape == (4, P + 20, P + 20)
    # The whole sequence's map equals one pass of transformers over prompt + generated.
    with torch.inference_mode():
        want = hf_decoder("tiny-gpt2")(theirs, output_attentions=True).attentions[0][0]
    np.testing.assert_allclose(weights, want.numpy(), atol=1e-5)


def test_generate_samples_by_seed_in_compact_form(client: TestClient) -> None:
    request = {
        "model": "tiny-gpt2-untied",
        "prompt": PROMPT,
        "max_new_tokens": 12,
        "temperature": 1.3,
        "top_k": 20,
        "seed": 7,
        "format": "compact",
        "hide_special": True,
    }
    first = post(client, "/api/model/generate", request)
    again = post(client, "/api/model/generate", request)
    assert first["generated_ids"] == again["generated_ids"] and first["seed"] == 7
    other = post(client, "/api/model/generate", {**request, "seed": 8})
    assert other["generated_ids"] != first["generated_ids"]
    T = first["prompt_tokens"] + 12 - 1  # the first token is hidden
    assert first["attentions"][0]["shape"] == [4, T, T]
    assert first["rollout"][1]["shape"] == [T, T] and len(first["generated"]) == T
    drawn = post(client, "/api/model/generate", {**request, "seed": None})
    assert isinstance(drawn["seed"], int)


def test_greedy_generation_returns_no_seed_even_when_given_one(client: TestClient) -> None:
    request = {"model": "tiny-gpt2", "prompt": PROMPT, "max_new_tokens": 4, "layers": [1]}
    greedy = post(client, "/api/model/generate", request)
    seeded = post(client, "/api/model/generate", {**request, "seed": 123})
    assert greedy["seed"] is None and seeded["seed"] is None
    assert greedy["generated_ids"] == seeded["generated_ids"]
    schema = client.get("/openapi.json").json()["components"]["schemas"]["GenerateResponse"]
    assert {"type": "null"} in schema["properties"]["seed"]["anyOf"]


def test_head_trace_is_the_map_and_recomputes(client: TestClient) -> None:
    text = "The cat sat on the mat"
    body = post(
        client, "/api/model/head", {"model": "tiny-gpt2", "text": text, "layer": 2, "head": 3}
    )
    maps = post(client, "/api/model/attention", {"model": "tiny-gpt2", "text": text, "layers": [2]})
    (head,) = body["heads"]
    np.testing.assert_array_equal(
        np.array(head["attn_weights"]), np.array(maps["attentions"][0][2])
    )
    assert (body["layer"], body["head"], body["kv_head"], body["rope"]) == (2, 3, 3, False)
    assert body["tokens"] == body["source_tokens"] == maps["tokens"]
    assert (body["mode"], body["num_heads"], body["causal"], body["cross"]) == (
        "attention",
        1,
        True,
        False,
    )
    T = len(body["tokens"])
    assert body["shapes"]["x"] == [T, 32] and body["shapes"]["q"] == [T, 8]
    assert head["masked_scores"][0][1] is None  # masked: null
    q, k = torch.tensor(head["q"]), torch.tensor(head["k"])
    torch.testing.assert_close(torch.tensor(head["attn_scores"]), q @ k.T)
    torch.testing.assert_close(
        torch.tensor(head["scaled_scores"]), q @ k.T * body["scale"], rtol=1e-5, atol=1e-5
    )
    assert body["scale"] == pytest.approx(8**-0.5)
    assert head["q_unrotated"] is None and body["output"] is None


def test_head_trace_of_the_default_encoder(client: TestClient) -> None:
    body = post(client, "/api/model/head", {"text": "the river bank", "layer": 1, "head": 12})
    maps = post(client, "/api/model/attention", {"text": "the river bank", "layers": [1]})
    assert body["model"] == "sentence-transformers/all-MiniLM-L6-v2" and body["causal"] is False
    np.testing.assert_array_equal(
        np.array(body["heads"][0]["attn_weights"]), np.array(maps["attentions"][0][11])
    )
    assert body["special"] == [True, False, False, False, True]


def test_default_model_requests_keep_working(client: TestClient) -> None:
    info = client.get("/api/model").json()
    assert (info["name"], info["family"], info["causal"]) == (
        "sentence-transformers/all-MiniLM-L6-v2",
        "bert",
        False,
    )
    tiny = client.get("/api/model", params={"model": "tiny-gpt2"}).json()
    assert (tiny["family"], tiny["max_tokens"], tiny["max_positions"]) == ("gpt2", 48, 48)


@pytest.mark.parametrize(
    ("path", "body", "status", "loc", "needle"),
    [
        (
            "/api/model/attention",
            {"model": "gpt-5", "text": "hi"},
            404,
            ["body", "model"],
            "unknown model 'gpt-5'; the models are: sentence-transformers/all-MiniLM-L6-v2, ",
        ),
        ("/api/model/generate", {"model": "nope", "prompt": "hi"}, 404, ["body", "model"], "nope"),
        (
            "/api/model/attention",
            {"model": "broken-gpt2", "text": "hi"},
            422,
            ["body", "model"],
            "'broken-gpt2' is not supported: model.safetensors: the file is truncated",
        ),
        (
            "/api/model/head",
            {"model": "tiny-t5", "text": "hi", "layer": 1, "head": 1},
            422,
            ["body", "model"],
            "'tiny-t5' is not supported: tiny-t5: no model.safetensors",
        ),
        (
            "/api/model/generate",
            {"prompt": "hi"},
            422,
            ["body", "model"],
            "is a bert encoder: it reads a whole text at once and cannot write one",
        ),
        (
            "/api/model/attention",
            {"model": "tiny-gpt2", "text": LONG},
            422,
            ["body", "text"],
            "text is 1",  # "text is 1xx tokens; the limit is 48 (the model's context)"
        ),
        (
            "/api/model/generate",
            {"model": "tiny-gpt2", "prompt": LONG},
            422,
            ["body", "prompt"],
            "; the limit is 48 (the model's context)",
        ),
        (
            "/api/model/generate",
            {"model": "tiny-gpt2", "prompt": PROMPT, "max_new_tokens": 41},
            422,
            ["body", "max_new_tokens"],
            "max_new_tokens is 41; the limit is 40 (ATTENTION_VIZ_MAX_NEW_TOKENS)",
        ),
        (
            "/api/model/generate",
            {"model": "tiny-gpt2", "prompt": " ".join(["bank"] * 12), "max_new_tokens": 40},
            422,
            ["body", "max_new_tokens"],
            "this model reads at most 48",
        ),
        (
            "/api/model/generate",
            {"model": "tiny-gpt2", "prompt": PROMPT, "temperature": -1},
            422,
            ["body", "temperature"],
            "greater than or equal to 0",
        ),
        (
            "/api/model/generate",
            {"model": "tiny-gpt2", "prompt": PROMPT, "top_k": 0},
            422,
            ["body", "top_k"],
            "greater than or equal to 1",
        ),
        (
            "/api/model/attention",
            {"model": "tiny-gpt2", "text": "a", "text_b": "b"},
            422,
            ["body", "text_b"],
            "text_b (a sentence pair) is for encoders",
        ),
        (
            "/api/model/attention",
            {"model": "tiny-gpt2", "text": "a", "hide_special": True},
            422,
            ["body", "hide_special"],
            "every token is a special or the first token",
        ),
        (
            "/api/model/head",
            {"model": "tiny-gpt2", "text": "a b", "layer": 3, "head": 1},
            422,
            ["body", "layer"],
            "layer 3 does not exist; this model has layers 1 to 2",
        ),
        (
            "/api/model/head",
            {"model": "tiny-gpt2", "text": "a b", "layer": 1, "head": 9},
            422,
            ["body", "head"],
            "head 9 does not exist; this layer has heads 1 to 4",
        ),
        (
            "/api/model/compare-word",
            {"model": "tiny-gpt2", "text_a": "a bank", "text_b": "the bank", "word": "bank"},
            422,
            ["body", "model"],
            "compare-word works with encoders",
        ),
        (
            "/api/model/embeddings",
            {"model": "tiny-gpt2", "words": ["bank"]},
            422,
            ["body", "model"],
            "embeddings works with encoders",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(
    client: TestClient, path: str, body: dict[str, Any], status: int, loc: list[str], needle: str
) -> None:
    detail = error(client.post(path, json=body), status)
    assert detail["loc"] == loc
    assert needle in detail["msg"], detail["msg"]


def test_unknown_model_in_the_query_is_a_404(client: TestClient) -> None:
    detail = error(client.get("/api/model", params={"model": "x"}), 404)
    assert detail["loc"] == ["query", "model"] and "unknown model 'x'" in detail["msg"]
    detail = error(client.get("/api/model", params={"model": "tiny-t5"}), 422)
    assert detail["type"] == "model_unsupported"


def test_the_server_stays_up_after_a_broken_model(client: TestClient) -> None:
    for _ in range(2):
        error(client.post("/api/model/attention", json={"model": "broken-gpt2", "text": "x"}))
    assert client.get("/healthz").status_code == 200
    post(client, "/api/model/attention", {"model": "tiny-gpt2", "text": "still fine"})
