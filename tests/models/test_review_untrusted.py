"""Review of the transformers backend and the new endpoints: bad input is a 422 naming
the field, never a 500; checkpoints load offline, from safetensors only.

- head analysis (head-scores, ablate, logit-lens, measure 'value_norm') on a
  transformers-backed decoder (Qwen3) was a 500 (``TransformersLM`` has no modules): it answers;
- an encoder-decoder's /api/model/attention silently ignored heads, rows, cols, pool and
  measure (heads [0] answered 200 with every head);
- an encoder-decoder was loaded from a pickled ``pytorch_model.bin``;
- with every socket connection refused, Qwen3 and Marian still load and answer.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.models.hf_checkpoints import make_hf
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.requires import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXT = "The cat sat on the mat."


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("review-models")
    make_hf(root / "tiny-qwen3", "tiny-qwen3")
    make_seq2seq(root / "tiny-marian", "marian")
    pickled = make_seq2seq(root / "pickled-marian", "marian", seed=1)
    from safetensors.torch import load_file

    weights = load_file(str(pickled / "model.safetensors"))
    torch.save(weights, pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    return root


def _client(models_dir: Path) -> TestClient:
    settings = Settings(models=str(models_dir), hf_cache=False, max_new_tokens=8)
    return TestClient(create_app(settings), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with _client(models_dir) as test_client:
        yield test_client


def _refused(response: Any, field: str) -> str:
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", field], error
    return str(error["msg"])


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/api/model/head-scores", {}),
        ("/api/model/ablate", {"heads": [[1, 1]]}),
        ("/api/model/ablate", {"each_head": True}),
        ("/api/model/logit-lens", {}),
        ("/api/model/attention", {"measure": "value_norm"}),
    ],
)
def test_head_analysis_on_a_transformers_decoder_answers(
    client: TestClient, path: str, extra: dict[str, Any]
) -> None:
    """Once a 500 (``TransformersLM`` has no modules), then a 422; now served (its numbers
    are checked against transformers in test_head_analysis_hf.py)."""
    body = {"model": "tiny-qwen3", "text": TEXT, **extra}
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(("field", "value"), [("heads", [0]), ("rows", [5, 1])])
def test_bad_map_options_on_an_encoder_decoder_are_a_422(
    client: TestClient, field: str, value: Any
) -> None:
    body = {"model": "tiny-marian", "text": TEXT, "target": "Die Katze", field: value}
    _refused(client.post("/api/model/attention", json=body), field)


@pytest.mark.parametrize(
    ("field", "value"),
    [("heads", [2]), ("rows", [1, 5]), ("cols", [0, 2]), ("pool", 2), ("measure", "value_norm")],
)
def test_map_options_shape_an_encoder_decoder_s_stacks(
    client: TestClient, field: str, value: Any
) -> None:
    """Once refused; now every stack takes heads, pool and measure (rows/cols index the
    source: the encoder's maps)."""
    body = {"model": "tiny-marian", "text": TEXT, "target": "Die Katze", field: value}
    response = client.post("/api/model/attention", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    heads = 1 if field == "heads" else 4
    for key in ("attentions", "decoder_attentions", "cross_attentions"):
        assert len(answer[key][0]) == heads, key
    if field == "pool":  # every stack's maps pooled to at most 2 x 2 cells
        assert answer["pooled"]["shape"] == [2, 2]
        assert all(len(m[0]) <= 2 for m in answer["cross_attentions"])


def test_map_options_shape_an_encoder_decoder_s_generation(client: TestClient) -> None:
    """Once refused; now a generation's three stacks are pooled as a text's are."""
    body = {"model": "tiny-marian", "prompt": TEXT, "max_new_tokens": 2, "pool": 2}
    response = client.post("/api/model/generate", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["pooled"]["shape"] == [2, 2]
    for key in ("attentions", "decoder_attentions", "cross_attentions"):
        assert all(len(m[0]) <= 2 and len(m[0][0]) <= 2 for m in answer[key]), key


def test_an_encoder_decoder_is_never_loaded_from_a_pickle(client: TestClient) -> None:
    response = client.post("/api/model/attention", json={"model": "pickled-marian", "text": TEXT})
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["detail"][0]["loc"][-1] == "model"


def test_loading_never_opens_a_connection(
    models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh app loads Qwen3 and Marian and answers with every connect refused."""
    attempts: list[object] = []

    def refuse(_self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"network forbidden in this test: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    with _client(models_dir) as fresh:
        for body in (
            {"model": "tiny-qwen3", "text": TEXT},
            {"model": "tiny-marian", "text": TEXT, "target": "Die Katze"},
        ):
            response = fresh.post("/api/model/attention", json=body)
            assert response.status_code == 200, response.text
        written = fresh.post(
            "/api/model/generate", json={"model": "tiny-qwen3", "prompt": TEXT, "max_new_tokens": 2}
        )
        assert written.status_code == 200, written.text
    assert attempts == []


def test_hiding_a_target_of_special_tokens_only_answers_empty_maps(client: TestClient) -> None:
    """With no target the decoder reads its start token alone, which hide_special hides:
    the decoder and cross maps are empty (once an IndexError, a 500), pooled or not."""
    for extra in ({}, {"pool": 4}):
        body = {"model": "tiny-marian", "text": TEXT, "hide_special": True, **extra}
        response = client.post("/api/model/attention", json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["target_tokens"] == []
        assert all(len(head) == 0 for m in answer["cross_attentions"] for head in m)
