"""The model routes' limits as fields: a text over the model's context or the server's
token limit, a prompt and max_new_tokens past the context, WordPiece over 512. A page
words each from ``type`` and ``ctx``; ``msg`` is for people reading raw JSON."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

LONG = " ".join(["the river bank was muddy and the money was in the bank"] * 8)


def only_error(response: Any, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text
    (item,) = response.json()["detail"]
    return item


@pytest.fixture(scope="module")
def client(checkpoints: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(models=str(checkpoints), hf_cache=False))) as c:
        yield c


def test_a_text_past_the_models_context(client: TestClient) -> None:
    item = only_error(
        client.post("/api/model/attention", json={"model": "tiny-gpt2", "text": LONG})
    )
    assert item["type"] == "limit_exceeded" and item["loc"] == ["body", "text"]
    assert item["ctx"]["setting"] == "model_context"
    assert item["ctx"]["limit"] == 48  # tiny-gpt2's n_positions
    assert item["ctx"]["found"] > 48


def test_a_text_past_the_servers_token_limit(checkpoints: Path) -> None:
    settings = Settings(models=str(checkpoints), hf_cache=False, model_max_tokens=8)
    with TestClient(create_app(settings)) as c:
        text = LONG[:120]  # within 16 characters a token of the limit: refused by its tokens
        item = only_error(c.post("/api/model/attention", json={"model": "tiny-gpt2", "text": text}))
    assert item["ctx"]["setting"] == "ATTENTION_VIZ_MODEL_MAX_TOKENS"
    assert item["ctx"]["limit"] == 8 and item["ctx"]["found"] > 8


def test_prompt_and_new_tokens_past_the_context(client: TestClient) -> None:
    body = {"model": "tiny-gpt2", "prompt": " ".join(["bank"] * 12), "max_new_tokens": 40}
    item = only_error(client.post("/api/model/generate", json=body))
    ctx = item["ctx"]
    assert item["type"] == "limit_exceeded" and item["loc"] == ["body", "max_new_tokens"]
    assert (ctx["limit"], ctx["setting"], ctx["max_new_tokens"]) == (48, "model_context", 40)
    assert ctx["found"] == ctx["prompt_tokens"] + 40 > 48


def test_wordpiece_over_the_encoders_context(client: TestClient) -> None:
    text = " ".join(["word"] * 600)
    item = only_error(client.post("/api/model/attention", json={"text": text}))
    assert item["type"] == "limit_exceeded"
    assert item["ctx"] == {
        "limit": 512,
        "found": 602,
        "setting": "model_context",
        "unit": "WordPiece tokens (with [CLS] and [SEP])",
    }


def test_a_pair_on_a_decoder_has_its_type(client: TestClient) -> None:
    body = {"model": "tiny-gpt2", "text": "the bank", "text_b": "a loan"}
    item = only_error(client.post("/api/model/attention", json=body))
    assert (item["loc"], item["type"]) == (["body", "text_b"], "pair_needs_encoder")
