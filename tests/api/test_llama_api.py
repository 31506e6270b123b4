"""A Llama-family checkpoint served through the app (ATTENTION_VIZ_MODELS), end to end:
listed with its sizes, its maps, greedy generation and one head with RoPE, each against
transformers' own model (eager attention); a Mistral with a short sliding window is listed
under the transformers backend."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.api_calls import post
from tests.models.checkpoints import make_llama, write_config
from tests.requires import require

transformers = require("transformers")
torch.set_num_threads(1)

PROMPT = "The bank approved the loan because"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("llama-models")
    make_llama(root / "api-llama", seed=7)  # 4 query heads on 2 kv heads, 64 positions
    write_config(
        root / "windowed-mistral",
        {"model_type": "mistral", "sliding_window": 16, "max_position_embeddings": 64},
    )
    return root


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_VIZ_MODELS", str(models_dir))
        patch.setenv("ATTENTION_VIZ_HF_CACHE", "false")
        with TestClient(create_app(Settings())) as test_client:
            # The registry (app.state.models) is built in the lifespan.
            assert test_client.get("/api/models").status_code == 200
            yield test_client


@pytest.fixture(scope="module")
def reference(models_dir: Path) -> torch.nn.Module:
    os.environ["HF_HUB_OFFLINE"] = "1"
    model = transformers.LlamaForCausalLM.from_pretrained(
        models_dir / "api-llama", attn_implementation="eager", dtype=torch.float32
    )
    return model.eval()


def test_listed_with_its_sizes_and_the_windowed_mistral_with_its_reason(
    client: TestClient, reference: torch.nn.Module
) -> None:
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    llama = models["api-llama"]
    assert {k: llama[k] for k in ("family", "causal", "source", "supported", "reason")} == {
        "family": "llama",
        "causal": True,
        "source": "env",
        "supported": True,
        "reason": None,
    }
    sizes = ("layers", "heads", "kv_heads", "hidden_size", "head_dim", "max_positions")
    assert [llama[k] for k in sizes] == [2, 4, 2, 32, 8, 64]
    assert llama["parameters"] == reference.num_parameters()
    # A sliding window shorter than the context: the transformers backend's (a real one
    # opens there: tests/models/test_hf_families.py); this one is a config.json alone.
    mistral = models["windowed-mistral"]
    assert (mistral["supported"], mistral["family"]) == (False, "mistral")
    assert (mistral["backend"], mistral["kind"], llama["backend"]) == (
        "transformers",
        "decoder",
        "core",
    )
    assert mistral["reason"] == (
        "windowed-mistral: no model.safetensors or model.safetensors.index.json "
        "(only safetensors weights are read)"
    )
    response = client.post("/api/model/attention", json={"model": "windowed-mistral", "text": "a"})
    assert response.status_code == 422
    assert "no model.safetensors" in response.json()["detail"][0]["msg"]


def test_maps_equal_transformers(client: TestClient, reference: torch.nn.Module) -> None:
    body = post(
        client,
        "/api/model/attention",
        {"model": "api-llama", "text": PROMPT, "hidden_states": True},
    )
    assert (body["family"], body["causal"], body["tokens"][0]) == ("llama", True, "<s>")
    decoder = client.app.state.models.load("api-llama")  # type: ignore[attr-defined]
    ids = torch.tensor([decoder.tokenize(PROMPT).input_ids])
    with torch.inference_mode():
        want = reference(ids, output_attentions=True, output_hidden_states=True)
    assert len(body["attentions"]) == 2
    for got, expected in zip(body["attentions"], want.attentions, strict=True):
        assert np.array(got).shape == (4, ids.shape[1], ids.shape[1])  # per query head
        np.testing.assert_allclose(np.array(got), expected[0].numpy(), atol=1e-5, rtol=0)
    for got, expected in zip(body["hidden_states"], want.hidden_states[1:], strict=True):
        np.testing.assert_allclose(np.array(got), expected[0].numpy(), atol=1e-5, rtol=1e-5)


def test_greedy_generation_equals_transformers(
    client: TestClient, reference: torch.nn.Module
) -> None:
    body = post(
        client,
        "/api/model/generate",
        {"model": "api-llama", "prompt": PROMPT, "max_new_tokens": 20, "layers": [2]},
    )
    P = body["prompt_tokens"]
    decoder = client.app.state.models.load("api-llama")  # type: ignore[attr-defined]
    ids = torch.tensor([decoder.tokenize(PROMPT).input_ids])
    with torch.inference_mode():
        theirs = reference.generate(ids, max_new_tokens=20, do_sample=False)
        maps = reference(theirs, output_attentions=True).attentions[1][0]  # layer 2
    assert body["generated_ids"] == theirs[0, P:].tolist()
    assert body["stop_reason"] == "max_new_tokens" and len(set(body["generated_ids"])) > 5
    np.testing.assert_allclose(np.array(body["attentions"][0]), maps.numpy(), atol=1e-5)


def test_a_head_has_its_rotated_q_and_k(client: TestClient, reference: torch.nn.Module) -> None:
    """Layer 2, head 3 reads kv head 2 (4 query heads on 2); q and k are transformers'
    projections of x, rotated by transformers' own RoPE."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    body = post(
        client, "/api/model/head", {"model": "api-llama", "text": PROMPT, "layer": 2, "head": 3}
    )
    maps = post(client, "/api/model/attention", {"model": "api-llama", "text": PROMPT})
    assert (body["family"], body["layer"], body["head"], body["kv_head"]) == ("llama", 2, 3, 2)
    assert body["rope"] is True and body["scale"] == pytest.approx(8**-0.5)
    (head,) = body["heads"]
    np.testing.assert_array_equal(
        np.array(head["attn_weights"]), np.array(maps["attentions"][1][2])
    )
    x = torch.tensor(body["x"])  # (T, C): input_layernorm of layer 2's input
    T = x.shape[0]
    attn = reference.model.layers[1].self_attn
    with torch.inference_mode():
        q = attn.q_proj(x).view(T, 4, 8)[:, 2]  # (T, D): query head 3
        k = attn.k_proj(x).view(T, 2, 8)[:, 1]  # (T, D): kv head 2
        cos, sin = reference.model.rotary_emb(x[None], torch.arange(T)[None])  # (1, T, D)
        q_rot, k_rot = apply_rotary_pos_emb(q[None, None], k[None, None], cos, sin)
    torch.testing.assert_close(torch.tensor(head["q_unrotated"]), q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.tensor(head["k_unrotated"]), k, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.tensor(head["q"]), q_rot[0, 0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.tensor(head["k"]), k_rot[0, 0], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(torch.tensor(head["q"]), q, atol=1e-3)  # the rotation did act
    scores = torch.tensor(head["q"]) @ torch.tensor(head["k"]).T  # (T, T)
    torch.testing.assert_close(torch.tensor(head["attn_scores"]), scores, atol=1e-5, rtol=1e-5)
    assert head["masked_scores"][0][1] is None  # causal: masked, null
