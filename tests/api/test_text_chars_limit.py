"""A model text's length follows the model's token limit (16 characters a token, checked
before tokenizing), not a fixed number of characters: a text past 40,000 characters
reaches the tokenizer when the token limit allows it, and one past the bound is a 422
naming its field, the limit, the length and what sets the token limit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.models.checkpoints import make_llama
from tests.requires import require

require("transformers")

CONTEXT = 4096
CHARS_PER_TOKEN = 16


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("chars-models")
    make_llama(root / "long-llama", max_position_embeddings=CONTEXT)
    return root


def client_of(models_dir: Path, **settings: Any) -> TestClient:
    return TestClient(create_app(Settings(models=str(models_dir), hf_cache=False, **settings)))


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with client_of(models_dir) as test_client:
        yield test_client


def refusal(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/model/attention", json=body)
    assert response.status_code == 422, response.text
    detail: list[dict[str, Any]] = response.json()["detail"]
    assert len(detail) == 1
    return detail[0]


def test_a_text_past_40000_characters_is_tokenized_and_counted_in_tokens(
    client: TestClient,
) -> None:
    text = "bank " * 10_000  # 50,000 characters, more tokens than the context
    error = refusal(client, {"model": "long-llama", "text": text})
    assert error["loc"] == ["body", "text"]
    assert error["type"] == "limit_exceeded"
    assert error["ctx"]["limit"] == CONTEXT
    assert error["ctx"]["setting"] == "model_context"
    assert CONTEXT < error["ctx"]["found"] < len(text)  # tokens, not characters


def test_past_16_characters_a_token_of_the_context_the_text_is_refused_unread(
    client: TestClient,
) -> None:
    limit = CHARS_PER_TOKEN * CONTEXT
    error = refusal(client, {"model": "long-llama", "text": "b" * (limit + 1)})
    assert error["loc"] == ["body", "text"]
    assert error["type"] == "limit_exceeded"
    assert error["ctx"] == {
        "limit": limit,
        "found": limit + 1,
        "setting": "model_context",
        "unit": "characters",
        "chars_per_token": CHARS_PER_TOKEN,
    }
    # At the bound itself the text is read: refused by its tokens, not its characters.
    at_bound = refusal(client, {"model": "long-llama", "text": "bank " * (limit // 5)})
    assert at_bound["ctx"]["limit"] == CONTEXT


def test_the_bound_follows_the_servers_token_limit(models_dir: Path) -> None:
    with client_of(models_dir, model_max_tokens=100) as small:
        error = refusal(small, {"model": "long-llama", "text": "b" * 1601})
        assert error["loc"] == ["body", "text"]
        assert (error["ctx"]["limit"], error["ctx"]["found"]) == (1600, 1601)
        assert error["ctx"]["setting"] == "ATTENTION_VIZ_MODEL_MAX_TOKENS"
        assert "the limit is 1600" in error["msg"]


def test_an_encoders_second_text_is_refused_under_its_own_name(client: TestClient) -> None:
    limit = CHARS_PER_TOKEN * 512  # MiniLM's 512 positions
    error = refusal(client, {"text": "the bank", "text_b": "b" * (limit + 1)})
    assert error["loc"] == ["body", "text_b"]
    assert (error["ctx"]["limit"], error["ctx"]["found"]) == (limit, limit + 1)
