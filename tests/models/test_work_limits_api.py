"""Issue 32 items 5, 6 and 8: the inputs that walked around the memory limits are refused
with a 422 naming their own field before any work (no forward pass runs), and the full
maps path has the long path's cap on an answer's size.

An encoder-decoder's ``target`` (head scores of the decoder stack, a decoder head's
trace) and the answer's map cells (``ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.models.checkpoints import make_gpt2
from tests.models.seq2seq_checkpoints import eager_induction, make_seq2seq
from tests.requires import require

GPT2 = "limits-gpt2"
T5 = "limits-t5"
LONG_TARGET = "the bank " * 400  # well past 512 tokens


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("work-limits")
    make_gpt2(root / GPT2, n_positions=1536, n_layer=2, n_head=4)
    make_seq2seq(root / T5, "t5")
    return root


@pytest.fixture(scope="module")
def client(models: Path) -> Iterator[TestClient]:
    # Every full map of more than 512 tokens is over a limit of 1 MiB.
    settings = Settings(models=str(models), hf_cache=False, model_full_maps_bytes=2**20)
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_an_encoder_decoders_induction_block_past_512_tokens_is_summed_block_by_block(
    client: TestClient, models: Path, stack: str
) -> None:
    """Once refused by its full maps (ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES): T5's induction
    score over a block of 300 tokens twice (over 600 tokens: its maps over the 1 MiB budget)
    is summed block by block from a pass that holds no map, equal to the same score of
    transformers' eager maps of the repeated block (the encoder's source, or the decoder's
    input behind its start token)."""
    transformers = require("transformers")
    long = {"model": GPT2, "text": "the cat", "induction_length": 700}
    answered = client.post("/api/model/head-scores", json=long)
    assert answered.status_code == 200 and answered.json()["induction_length"] == 700
    body = {"model": T5, "text": "the cat", "induction_length": 300, "stack": stack}
    if stack == "decoder":
        body["target"] = "the mat"
    response = client.post("/api/model/head-scores", json=body)
    assert response.status_code == 200, response.text[:300]
    answer = response.json()
    assert len(answer["induction_ids"]) > 600 and answer["induction_length"] == 300
    model: Any = client.app.state.models.load(T5)  # type: ignore[attr-defined]
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        models / T5, attn_implementation="eager"
    ).eval()
    want = eager_induction(hf, model, stack, "the cat", answer)
    np.testing.assert_allclose(answer["induction"], want.numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("stack", ["decoder", "cross"])
def test_head_scores_over_a_long_target_answer_block_by_block(
    client: TestClient, stack: str
) -> None:
    """Once refused by the target's full maps (ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES): the
    decoder's and cross-attention's scores are summed block by block from the pass."""
    body = {"model": T5, "text": "the bank", "target": LONG_TARGET, "stack": stack}
    response = client.post("/api/model/head-scores", json=body)
    assert response.status_code == 200, response.text[:300]
    assert np.isfinite(np.array(response.json()["entropy"])).all()


@pytest.mark.parametrize("stack", ["decoder", "cross"])
def test_a_head_trace_over_a_long_target_answers_its_region(
    client: TestClient, models: Path, stack: str
) -> None:
    """Once refused by the target's full maps: the whole trace is over the JSON numbers'
    limit (a 422 on pool), a region of it is recomputed from the layer the pass kept (T5's
    relative-position bias included), equal to transformers' eager maps."""
    transformers = require("transformers")
    body = {"model": T5, "text": "the bank", "target": LONG_TARGET, "stack": stack}
    whole = client.post("/api/model/head", json={**body, "layer": 1, "head": 2})
    if stack == "decoder":  # 4 maps of 802 × 802; the cross ones are 802 × 3
        assert whole.status_code == 422 and whole.json()["detail"][0]["loc"] == ["body", "pool"]
    else:
        assert whole.status_code == 200
    zoom = client.post("/api/model/head", json={**body, "layer": 1, "head": 2, "rows": [500, 510]})
    assert zoom.status_code == 200, zoom.text[:300]
    answer = zoom.json()
    assert answer["region"]["rows"] == [500, 510] and len(answer["tokens"]) > 512
    model: Any = client.app.state.models.load(T5)  # type: ignore[attr-defined]
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        models / T5, attn_implementation="eager"
    ).eval()
    with torch.inference_mode():
        out = hf(
            input_ids=torch.tensor([model.tokenize("the bank").input_ids]),
            decoder_input_ids=torch.tensor([model.target_text(LONG_TARGET).input_ids]),
            output_attentions=True,
        )
    maps = (out.decoder_attentions if stack == "decoder" else out.cross_attentions)[0][0, 1]
    got = np.array(answer["heads"][0]["attn_weights"], dtype=np.float32)
    np.testing.assert_allclose(got, maps[500:510].numpy(), atol=1e-5, rtol=0)


def test_the_full_path_caps_an_answers_cells(models: Path) -> None:
    text = "the bank approved the loan and the river bank was muddy"
    body = {"model": GPT2, "text": text, "format": "compact"}
    with TestClient(create_app(Settings(models=str(models), hf_cache=False))) as free:
        answer = free.post("/api/model/attention", json=body).json()
    assert answer.get("maps_path", "full") == "full" and len(answer["attentions"]) == 2
    T = len(answer["tokens"])
    cells = 2 * (4 + 2) * T * T  # layers × (heads + average + rollout) × T²
    settings = Settings(models=str(models), hf_cache=False, model_max_answer_cells=cells - 1)
    with TestClient(create_app(settings)) as capped:
        over = capped.post("/api/model/attention", json=body)
        assert over.status_code == 422
        (error,) = over.json()["detail"]
        assert error["loc"] == ["body", "pool"] and error["type"] == "limit_exceeded"
        assert error["ctx"] == {
            "limit": cells - 1,
            "found": cells,
            "setting": "ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS",
        }
        pooled = capped.post("/api/model/attention", json={**body, "pool": 4})
        assert pooled.status_code == 200
        assert capped.post("/api/model/attention", json={**body, "layers": [1]}).is_success
        prompt = {"model": GPT2, "prompt": text, "max_new_tokens": 4}
        assert capped.post("/api/model/generate", json=prompt).status_code == 422
