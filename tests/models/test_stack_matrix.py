"""The one contract's matrix: every model kind × each of its stacks × each capability, below
and past the full-maps budget, against an oracle.

Models: GPT-2 and Llama (grouped-query attention) of the core, Qwen3 of the transformers
backend, the built-in BERT (MiniLM) and a Marian encoder-decoder (three stacks).
"Past the budget" is a server whose ``model_full_maps_bytes`` is 1 byte, so every
input is ``maps_path`` 'long' while staying cheap; each answer is checked against
transformers' eager attention (``output_attentions=True``), the same maps pooled or
cropped, or a direct computation (value-weighted maps from each layer's traced v and
its heads' slices of the output projection; head scores with ``scores``' definitions).
The 4,096-token cells are in test_long_api.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from attention_core.analysis.scores import (
    attention_entropy,
    duplicate_token_score,
    first_token_share,
    previous_token_score,
)
from attention_core.analysis.value_norm import row_shares, value_weighted
from attention_core.models.families.bert.config import default_model_dir
from tests.models.checkpoints import make_gpt2, make_llama
from tests.models.hf_checkpoints import make_hf
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.requires import require

TEXT = "The cat sat on the mat, and the cat was tired because the mat was hard."
TARGET = "Die Katze sass auf der Matte."
BERT = "sentence-transformers/all-MiniLM-L6-v2"
MODELS = {"gpt2": "decoder", "llama": "decoder", "qwen3": "decoder", BERT: "encoder"}
STACKS = [(name, stack) for name, stack in MODELS.items()] + [
    ("marian", stack) for stack in ("encoder", "decoder", "cross")
]
ANSWER_KEY = {"encoder": "attentions", "decoder": "decoder_attentions", "cross": "cross_attentions"}
ATOL = 1e-5


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("matrix")
    make_gpt2(root / "gpt2", seed=1)
    make_llama(root / "llama", seed=2)  # 4 heads reading 2 kv heads
    make_hf(root / "qwen3", "tiny-qwen3", seed=3)
    make_seq2seq(root / "marian", "marian", seed=4)
    return root


def loaded(client: TestClient, name: str) -> Any:
    """The server's own loaded model ``name`` (the registry is built on first use)."""
    assert client.get("/api/models").status_code == 200
    return client.app.state.models.load(name)  # type: ignore[attr-defined]


def _client(models_dir: Path, **settings: Any) -> TestClient:
    return TestClient(create_app(Settings(models=str(models_dir), hf_cache=False, **settings)))


@pytest.fixture(scope="module", params=["short", "long"])
def served(request: pytest.FixtureRequest, models_dir: Path) -> Iterator[tuple[str, TestClient]]:
    """(length, client): 'long' puts every input past the full-maps budget."""
    extra = {"model_full_maps_bytes": 1} if request.param == "long" else {}
    with _client(models_dir, **extra) as client:
        yield request.param, client


@pytest.fixture(scope="module")
def eager(models_dir: Path) -> dict[tuple[str, str], torch.Tensor]:
    """(model, stack) -> transformers' eager maps (L, H, T, S) of TEXT (and TARGET)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = require("transformers")
    with _client(models_dir) as client:
        model = {name: loaded(client, name) for name in [*MODELS, "marian"]}
    found: dict[tuple[str, str], torch.Tensor] = {}
    with torch.inference_mode():
        for name in ("gpt2", "llama", "qwen3"):
            hf = transformers.AutoModelForCausalLM.from_pretrained(
                models_dir / name, attn_implementation="eager", dtype=torch.float32
            ).eval()
            ids = torch.tensor([model[name].tokenize(TEXT).input_ids])
            found[(name, "decoder")] = torch.cat(hf(ids, output_attentions=True).attentions)
        bert = transformers.BertModel.from_pretrained(
            str(default_model_dir()), attn_implementation="eager"
        ).eval()
        ids = torch.tensor([model[BERT].tokenize(TEXT).input_ids])
        found[(BERT, "encoder")] = torch.cat(bert(ids, output_attentions=True).attentions)
        marian = transformers.AutoModelForSeq2SeqLM.from_pretrained(
            models_dir / "marian", attn_implementation="eager", dtype=torch.float32
        ).eval()
        out = marian(
            input_ids=torch.tensor([model["marian"].tokenize(TEXT).input_ids]),
            decoder_input_ids=torch.tensor([model["marian"].target_text(TARGET).input_ids]),
            output_attentions=True,
        )
        found[("marian", "encoder")] = torch.cat(out.encoder_attentions)
        found[("marian", "decoder")] = torch.cat(out.decoder_attentions)
        found[("marian", "cross")] = torch.cat(out.cross_attentions)
    return found


def post(client: TestClient, name: str, path: str = "/api/model/attention", **body: Any) -> Any:
    request = {"model": name, "text": TEXT, **body}
    if name == "marian" and path != "/api/model/generate":
        request["target"] = TARGET
    response = client.post(path, json=request)
    assert response.status_code == 200, response.text
    return response.json()


def max_pool(maps: torch.Tensor, block: list[int]) -> torch.Tensor:
    flat = maps.reshape(-1, 1, *maps.shape[-2:])
    pooled = torch.nn.functional.max_pool2d(flat, block, block, ceil_mode=True)
    return pooled.reshape(*maps.shape[:-2], *pooled.shape[-2:])


def close(got: Any, want: torch.Tensor) -> None:
    np.testing.assert_allclose(np.array(got, dtype=np.float32), want.numpy(), atol=ATOL, rtol=0)


@pytest.mark.parametrize(("name", "stack"), STACKS)
def test_maps_heads_pool_and_region(
    served: tuple[str, TestClient],
    eager: dict[tuple[str, str], torch.Tensor],
    name: str,
    stack: str,
) -> None:
    length, client = served
    want = eager[(name, stack)]  # (L, H, T, S)
    key = ANSWER_KEY[stack] if name == "marian" else "attentions"
    whole = post(client, name)
    assert whole.get("maps_path", "full") == length.replace("short", "full")
    for layer, maps in enumerate(whole[key]):
        close(maps, want[layer])
    one = post(client, name, heads=[2])
    for layer, maps in enumerate(one[key]):
        close(maps, want[layer, [1]])
    pooled = post(client, name, pool=4)
    for layer, maps in enumerate(pooled[key]):
        T, S = want.shape[-2:]
        block = [-(-T // 4), -(-S // 4)]
        close(maps, max_pool(want[layer], block))
    if stack in ("encoder", "decoder") and name != "marian" or stack == "encoder":
        region = post(client, name, rows=[2, 9], cols=[1, 6])
        for layer, maps in enumerate(region["attentions"]):
            close(maps, want[layer, :, 2:9, 1:6])


@pytest.mark.parametrize("name", [*MODELS, "marian"])
def test_stream_is_the_post(served: tuple[str, TestClient], name: str) -> None:
    _, client = served
    body = {"model": name, "text": TEXT, "pool": 4}
    if name == "marian":
        body["target"] = TARGET
    streamed = client.post("/api/model/attention/stream", json=body).text
    result = [m for m in streamed.strip().split("\n\n") if m.startswith("event: result")]
    assert json.loads(result[0].split("\n")[1].removeprefix("data: ")) == post(client, name, pool=4)


@pytest.mark.parametrize(("name", "stack"), STACKS)
def test_value_norm(served: tuple[str, TestClient], name: str, stack: str) -> None:
    """Each weight times its key's ‖v_j W_O^h‖, rows re-summed to 1, from each layer's full
    trace (its v and weights) and the model's heads' slices of the output projection."""
    _, client = served
    model = loaded(client, name)
    key = ANSWER_KEY[stack] if name == "marian" else "attentions"
    answer = post(client, name, measure="value_norm")
    for layer, maps in enumerate(answer[key]):
        if name == "marian":
            _, trace, _ = model.trace_stack(TEXT, TARGET, stack, layer)
        else:
            _, trace = model.trace(TEXT, layer)
        with torch.inference_mode():
            out = model.head_outputs(stack, layer)
            want = row_shares(value_weighted(trace.steps.attn_weights[0], trace.v[0], out))
        close(maps, want)


@pytest.mark.parametrize(("name", "stack"), STACKS)
def test_head_scores(
    served: tuple[str, TestClient],
    eager: dict[tuple[str, str], torch.Tensor],
    name: str,
    stack: str,
) -> None:
    _, client = served
    body = {"stack": stack} if name == "marian" else {}
    scores = post(client, name, "/api/model/head-scores", **body)
    maps = eager[(name, stack)]
    model = loaded(client, name)
    if stack == "cross":
        assert scores["not_applicable"] == ["previous_token", "duplicate_token", "induction"]
        T, S = maps.shape[-2:]
        diagonal = ((torch.arange(T) + 0.5) * S / T).floor().long().clamp_max(S - 1)
        close(scores["diagonal"], maps[..., torch.arange(T), diagonal].mean(-1))
    else:
        rows = model.target_text(TARGET) if stack == "decoder" and name == "marian" else None
        ids = rows.input_ids if rows is not None else model.tokenize(TEXT).input_ids
        close(scores["previous_token"], previous_token_score(maps))
        close(scores["duplicate_token"], duplicate_token_score(maps, ids))
    close(scores["first_token"], first_token_share(maps))
    close(scores["entropy"], attention_entropy(maps))


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen3", BERT])
def test_the_analyses_that_read_full_maps_answer_below_512_tokens(
    served: tuple[str, TestClient], name: str
) -> None:
    """Ablation, the logit lens (where an LM head exists), the head trace and generation
    (where the model writes): past the budget but below 512 tokens they answer."""
    _, client = served
    post(client, name, "/api/model/ablate", heads=[[1, 1]])
    post(client, name, "/api/model/head", layer=1, head=2)
    if MODELS[name] == "decoder":
        post(client, name, "/api/model/logit-lens")
        response = client.post(
            "/api/model/generate", json={"model": name, "prompt": TEXT, "max_new_tokens": 2}
        )
        assert response.status_code == 200, response.text
