"""No model answers a 500: what cannot be captured is listed with its reason before any
request (BigBird-Pegasus: an encoder-decoder whose encoder's block-sparse attention is
its own code, no adapter), and a capture
that fails on a request anyway answers 422 with the reason, the model listed unsupported
from then on, for the three kinds (decoder, encoder, encoder-decoder)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.api_calls import error, post
from tests.models.hf_checkpoints import LONG_TEXT
from tests.models.seq2seq_checkpoints import make_own_code_seq2seq, make_seq2seq
from tests.requires import require

transformers = require("transformers")

# name -> (the attention class a fault is put in, module), for the three kinds
FAULTY = {
    "tiny-qwen3": ("Qwen3Attention", "transformers.models.qwen3.modeling_qwen3"),
    "tiny-roberta": ("RobertaSelfAttention", "transformers.models.roberta.modeling_roberta"),
    "tiny-bart": ("BartAttention", "transformers.models.bart.modeling_bart"),
}


@pytest.fixture(scope="module")
def models_dir(
    hf_checkpoints: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    root = tmp_path_factory.mktemp("refusals")
    for name in ("tiny-qwen3", "tiny-roberta", "tiny-bloom"):
        shutil.copytree(hf_checkpoints(name), root / name)
    make_seq2seq(root / "tiny-bart", "bart")
    make_own_code_seq2seq(root / "tiny-led", "led")
    make_own_code_seq2seq(root / "tiny-bigbird-pegasus", "bigbird_pegasus")
    return root


@pytest.fixture()
def client(models_dir: Path) -> Iterator[TestClient]:
    settings = Settings(models=str(models_dir), hf_cache=False, max_new_tokens=20)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _listed(client: TestClient) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in client.get("/api/models").json()["models"]}


def test_an_uncapturable_model_is_listed_with_the_reason_before_any_request(
    client: TestClient,
) -> None:
    name = "tiny-bigbird-pegasus"
    listed = _listed(client)[name]
    assert (listed["supported"], listed["kind"], listed["loaded"]) == (
        False,
        "encoder-decoder",
        False,
    )
    assert "computes encoder attention in 0 of its 2 layers" in listed["reason"]
    calls = {
        "/api/model/attention": {"text": LONG_TEXT, "target": "Die Bank"},
        "/api/model/generate": {"prompt": LONG_TEXT, "max_new_tokens": 3},
        "/api/model/head": {"text": LONG_TEXT, "layer": 1, "head": 1},
    }
    for path, body in calls.items():
        detail = error(client.post(path, json={"model": name, **body}))
        assert detail["type"] == "model_unsupported"
        assert listed["reason"] in detail["msg"]
    assert _listed(client)[name] == listed  # never changed by a request


def test_the_listing_says_how_each_attention_is_captured(client: TestClient) -> None:
    listed = _listed(client)
    mine = (
        "tiny-qwen3",
        "tiny-roberta",
        "tiny-bart",
        "tiny-bloom",
        "tiny-led",
        "tiny-bigbird-pegasus",
    )
    assert {n: (listed[n]["capture"], listed[n]["loaded"]) for n in mine} == {
        "tiny-qwen3": ("interface", False),
        "tiny-roberta": ("interface", False),
        "tiny-bart": ("interface", False),
        "tiny-bloom": ("adapter", False),
        "tiny-led": ("adapter", False),  # Longformer's sliding window as a mask
        "tiny-bigbird-pegasus": (None, False),
    }


@pytest.mark.parametrize("name", sorted(FAULTY))
def test_a_capture_failing_on_a_request_is_a_422_then_listed_unsupported(
    name: str, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"model": name, "text": LONG_TEXT}
    if name == "tiny-bart":
        body["target"] = "Die Bank"
    post(client, "/api/model/attention", body)  # loads, captures
    assert _listed(client)[name]["supported"] is True
    class_name, module = FAULTY[name]

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(f"{module}.{class_name}.forward", broken)
    changed = {**body, "text": LONG_TEXT + " Again."}  # not a cached result
    detail = error(client.post("/api/model/attention", json=changed))
    assert detail["type"] == "model_unsupported"
    assert (
        "its attention could not be captured (IndexError: tuple index out of range)"
        in (detail["msg"])
    )
    listed = _listed(client)[name]
    assert (listed["supported"], listed["loaded"]) == (False, False)
    assert listed["reason"] in detail["msg"]
    monkeypatch.undo()  # refused until its files change, even once the fault is gone
    again = error(client.post("/api/model/attention", json=body))
    assert again["type"] == "model_unsupported" and listed["reason"] in again["msg"]
