"""The /api/model routes over real HTTP semantics (FastAPI's TestClient)."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from attention_core.models import Encoder

pytestmark = pytest.mark.model

RIVER = "the river bank was muddy"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings())) as test_client:
        yield test_client


def default_model(client: TestClient) -> Encoder:
    """The model requests without ``model`` get (loaded by an earlier request)."""
    model = client.app.state.models.load(None)  # type: ignore[attr-defined]
    assert isinstance(model, Encoder)
    return model


def _error(response, field: str) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"][-1] == field or field in detail["loc"], detail
    return detail["msg"]


def test_info(client: TestClient) -> None:
    info = client.get("/api/model").json()
    assert info["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert (info["layers"], info["heads"], info["hidden"], info["max_tokens"]) == (6, 12, 384, 512)
    assert info["compact_formats"]["uint8"]["max_abs_error"] == pytest.approx(1 / 510)


def test_attention_json(client: TestClient) -> None:
    body = client.post("/api/model/attention", json={"text": RIVER}).json()
    assert body["tokens"] == ["[CLS]", "the", "river", "bank", "was", "muddy", "[SEP]"]
    assert body["layers"] == [1, 2, 3, 4, 5, 6]
    attentions = np.array(body["attentions"])
    assert attentions.shape == (6, 12, 7, 7)
    np.testing.assert_allclose(attentions.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.array(body["head_average"]), attentions.mean(1), atol=1e-6)
    rollout = np.array(body["rollout"])
    assert rollout.shape == (6, 7, 7)
    np.testing.assert_allclose(rollout.sum(-1), 1.0, atol=1e-5)


def test_attention_matches_the_encoder(client: TestClient) -> None:
    encoder = default_model(client)
    body = client.post("/api/model/attention", json={"text": RIVER, "layers": [3]}).json()
    expected = encoder.encode(RIVER).layer_attentions[2].numpy()
    np.testing.assert_allclose(np.array(body["attentions"][0]), expected, atol=1e-7)


def test_attention_pair_hidden_special_compact(client: TestClient) -> None:
    response = client.post(
        "/api/model/attention",
        json={
            "text": "The bank approved the loan.",
            "text_b": "Was it wise?",
            "hide_special": True,
            "layers": [6, 1],
            "format": "compact",
        },
    )
    body = response.json()
    assert body["tokens"] == [
        "the",
        "bank",
        "approved",
        "the",
        "loan",
        ".",
        "was",
        "it",
        "wise",
        "?",
    ]
    assert body["token_type_ids"] == [0] * 6 + [1] * 4
    assert body["positions"] == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
    assert body["layers"] == [6, 1]
    layer = body["attentions"][0]
    assert layer["shape"] == [12, 10, 10] and layer["dtype"] == "uint8"
    raw = base64.b64decode(layer["data"])
    assert len(raw) == 12 * 10 * 10  # one byte per weight
    weights = np.frombuffer(raw, dtype=np.uint8).reshape(12, 10, 10) / 255
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=10 / 510)
    rollout = body["rollout"][0]
    assert rollout["shape"] == [10, 10]


def test_attention_float16(client: TestClient) -> None:
    body = client.post(
        "/api/model/attention",
        json={"text": RIVER, "format": "compact", "dtype": "float16", "layers": [2]},
    ).json()
    layer = body["attentions"][0]
    weights = np.frombuffer(base64.b64decode(layer["data"]), dtype="<f2").reshape(layer["shape"])
    np.testing.assert_allclose(weights.astype(np.float32).sum(-1), 1.0, atol=1e-2)


@pytest.mark.parametrize(
    ("payload", "field", "needle"),
    [
        ({"text": "   "}, "text", "empty"),
        ({"text": " ".join(["word"] * 511)}, "text", "513"),
        ({"text": RIVER, "layers": [0, 7]}, "layers", "1 to 6"),
        ({"text": " ".join(["word"] * 300)}, "format", "compact"),
        ({"text": RIVER, "format": "png"}, "format", ""),
        ({"text": RIVER, "surprise": 1}, "surprise", ""),
    ],
)
def test_attention_errors(client: TestClient, payload: dict, field: str, needle: str) -> None:
    message = _error(client.post("/api/model/attention", json=payload), field)
    assert needle in message


def test_long_text_compact_one_layer(client: TestClient) -> None:
    body = client.post(
        "/api/model/attention",
        json={"text": " ".join(["word"] * 510), "format": "compact", "layers": [1]},
    ).json()
    assert body["attentions"][0]["shape"] == [12, 512, 512]
    assert len(base64.b64decode(body["attentions"][0]["data"])) == 12 * 512 * 512


def test_compare_word(client: TestClient) -> None:
    body = client.post(
        "/api/model/compare-word",
        json={"text_a": RIVER, "text_b": "the bank approved the loan", "word": "bank"},
    ).json()
    assert body["span_a"] == [3, 4] and body["span_b"] == [2, 3]
    assert len(body["cosines"]) == 7
    assert body["cosines"][-1] < body["cosines"][0]


def test_compare_word_absent(client: TestClient) -> None:
    response = client.post(
        "/api/model/compare-word", json={"text_a": RIVER, "text_b": "a loan", "word": "bank"}
    )
    assert "'bank'" in _error(response, "text_b")


def test_embeddings(client: TestClient) -> None:
    body = client.post("/api/model/embeddings", json={"words": ["bank", "tokenization"]}).json()
    assert body["dim"] == 384
    assert body["pieces"] == [["bank"], ["token", "##ization"]]
    vectors = np.array(body["vectors"])
    assert vectors.shape == (2, 384)
    encoder = default_model(client)
    np.testing.assert_allclose(vectors, encoder.word_vectors(["bank", "tokenization"]).numpy())


def test_embeddings_errors(client: TestClient) -> None:
    assert "at least 1" in _error(client.post("/api/model/embeddings", json={"words": []}), "words")
    message = _error(client.post("/api/model/embeddings", json={"words": ["ok", " "]}), "words")
    assert "words[1]" in message
    message = _error(client.post("/api/model/embeddings", json={"words": ["w"] * 257}), "words")
    assert "257" in message and "256" in message


def test_encoder_loads_once_and_is_shared(client: TestClient) -> None:
    client.get("/api/model")
    encoder = default_model(client)
    client.post("/api/model/attention", json={"text": RIVER, "layers": [1]})
    assert default_model(client) is encoder
