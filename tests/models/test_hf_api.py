"""The transformers backend through the app (FastAPI's TestClient): ``GET /api/models``'s
``backend`` and ``kind``, the maps, generation and a head of transformers-backed models,
and the checkpoints it refuses, each with its reason."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.api_calls import post
from tests.models.checkpoints import make_gpt2, write_config
from tests.models.hf_checkpoints import LONG_TEXT
from tests.requires import require

transformers = require("transformers")


@pytest.fixture(scope="module")
def models_dir(
    hf_checkpoints: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    root = tmp_path_factory.mktemp("hf-served")
    for name in ("tiny-gemma2", "tiny-roberta"):
        shutil.copytree(hf_checkpoints(name), root / name)
    make_gpt2(root / "core-gpt2")
    custom = Path(shutil.copytree(hf_checkpoints("tiny-qwen3"), root / "custom-code"))
    config = json.loads((custom / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (custom / "config.json").write_text(json.dumps(config))
    write_config(root / "unknown-type", {"model_type": "no-such-architecture"})
    write_config(root / "tiny-bart", {"model_type": "bart", "is_encoder_decoder": True})
    return root


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    settings = Settings(models=str(models_dir), hf_cache=False, max_new_tokens=20)
    with TestClient(create_app(settings)) as test_client:
        assert test_client.get("/api/models").status_code == 200
        yield test_client


def test_models_list_backend_and_kind(client: TestClient, models_dir: Path) -> None:
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    fields = ("supported", "family", "backend", "kind", "causal")
    mine = {p.name for p in models_dir.iterdir()}
    assert {n: tuple(models[n][f] for f in fields) for n in models if n in mine} == {
        "core-gpt2": (True, "gpt2", "core", "decoder", True),
        "tiny-gemma2": (True, "gemma2", "transformers", "decoder", True),
        "tiny-roberta": (True, "roberta", "transformers", "encoder", False),
        "custom-code": (False, None, None, None, None),
        "unknown-type": (False, None, None, None, None),
        "tiny-bart": (False, "bart", "transformers", "encoder-decoder", False),
    }
    gemma = models["tiny-gemma2"]
    assert [gemma[k] for k in ("layers", "heads", "kv_heads", "hidden_size", "head_dim")] == [
        2,
        4,
        2,
        32,
        16,
    ]
    assert models["tiny-roberta"]["max_positions"] == 72 - 2  # positions start after <pad>
    assert "auto_map" in models["custom-code"]["reason"]
    assert "trust_remote_code" in models["custom-code"]["reason"]
    assert "'no-such-architecture' is not known to transformers" in models["unknown-type"]["reason"]
    # Encoder-decoders load (test_seq2seq_api.py); this one has no weights.
    assert "no model.safetensors" in models["tiny-bart"]["reason"]


def test_attention_of_a_transformers_decoder(client: TestClient, models_dir: Path) -> None:
    body = post(client, "/api/model/attention", {"model": "tiny-gemma2", "text": LONG_TEXT})
    assert (body["family"], body["causal"]) == ("gemma2", True)
    eager = transformers.AutoModelForCausalLM.from_pretrained(
        models_dir / "tiny-gemma2", attn_implementation="eager", dtype=torch.float32
    ).eval()
    decoder = client.app.state.models.load("tiny-gemma2")  # type: ignore[attr-defined]
    ids = torch.tensor([decoder.tokenize(LONG_TEXT).input_ids])
    with torch.inference_mode():
        expected = eager(ids, output_attentions=True).attentions
    assert len(body["tokens"]) == ids.shape[1]
    for got, want in zip(body["attentions"], expected, strict=True):
        torch.testing.assert_close(torch.tensor(got), want[0], atol=1e-5, rtol=0)
    info = client.get("/api/model", params={"model": "tiny-gemma2"}).json()
    assert (info["layers"], info["heads"], info["kv_heads"]) == (2, 4, 2)


def test_generate_and_head_of_a_transformers_decoder(client: TestClient) -> None:
    body = post(
        client,
        "/api/model/generate",
        {"model": "tiny-gemma2", "prompt": "The bank", "max_new_tokens": 6},
    )
    decoder = client.app.state.models.load("tiny-gemma2")  # type: ignore[attr-defined]
    assert body["generated_ids"] == list(decoder.generate("The bank", 6).new_ids)
    assert (
        len(body["tokens"])
        == len(body["generated"])
        == body["prompt_tokens"] + len(body["generated_ids"])
    )
    head = post(
        client,
        "/api/model/head",
        {"model": "tiny-gemma2", "text": LONG_TEXT, "layer": 1, "head": 2},
    )
    assert (head["kv_head"], head["causal"], head["family"]) == (1, True, "gemma2")
    steps = head["heads"][0]
    weights = torch.tensor(steps["attn_weights"])
    assert torch.allclose(weights.sum(-1), torch.ones(len(head["tokens"])))
    # Gemma 2's soft-capping is a step of its own, between scaling and the mask.
    assert head["softcap"] == 2.0 and steps["biased_scores"] is None
    capped = torch.tensor(steps["capped_scores"])
    torch.testing.assert_close(capped, torch.tanh(torch.tensor(steps["scaled_scores"]) / 2) * 2)
    masked = steps["masked_scores"]
    kept = [(i, j) for i, row in enumerate(masked) for j, v in enumerate(row) if v is not None]
    assert kept and all(masked[i][j] == steps["capped_scores"][i][j] for i, j in kept)
    plain = post(
        client, "/api/model/head", {"model": "core-gpt2", "text": "a b", "layer": 1, "head": 1}
    )
    assert plain["softcap"] is None and plain["heads"][0]["capped_scores"] is None


def test_encoder_maps_and_refusals(client: TestClient) -> None:
    body = post(client, "/api/model/attention", {"model": "tiny-roberta", "text": LONG_TEXT})
    assert body["causal"] is False and body["family"] == "roberta"
    assert float(torch.tensor(body["attentions"][0]).triu(1).sum()) > 0  # bidirectional
    pair = client.post(
        "/api/model/attention", json={"model": "tiny-roberta", "text": "a", "text_b": "b"}
    )
    assert pair.status_code == 422 and pair.json()["detail"][0]["loc"][-1] == "text_b"
    generate = client.post(
        "/api/model/generate", json={"model": "tiny-roberta", "prompt": "a", "max_new_tokens": 2}
    )
    assert generate.status_code == 422
    vectors = client.post("/api/model/embeddings", json={"model": "tiny-roberta", "words": ["a"]})
    assert vectors.status_code == 422
    assert "'tiny-roberta' is a roberta encoder" in vectors.json()["detail"][0]["msg"]
    for name in ("custom-code", "unknown-type", "tiny-bart"):
        response = client.post("/api/model/attention", json={"model": name, "text": "a"})
        assert response.status_code == 422
        assert f"model {name!r} is not supported" in response.json()["detail"][0]["msg"]
