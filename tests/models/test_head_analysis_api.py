"""The head-analysis API over real HTTP semantics (FastAPI's TestClient): head scores,
ablation, the logit lens and value-weighted maps, equal to the core's functions; and every
bad input as a 422 naming the field and the limit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from attention_core.analysis import (
    ablate,
    each_head_effects,
    head_model,
    logit_lens,
    row_shares,
    score_heads,
    value_norm_maps,
    value_norm_shares,
)
from attention_core.models import GPT2, Decoder, Llama
from tests.api_calls import post, served

TEXT = "The bank approved the loan, and the river bank was muddy."
LIMIT = 1000  # each_head's cost, layers x heads x T^2: MiniLM on 3 tokens is 648


@pytest.fixture(scope="module")
def client(checkpoints: Path) -> Iterator[TestClient]:
    yield from served(checkpoints, max_ablation_cells=LIMIT)


@pytest.fixture(scope="module")
def gpt2(checkpoints: Path) -> Decoder:
    return Decoder.from_dir(checkpoints / "tiny-gpt2", GPT2.from_pretrained, "gpt2")


def close(got: Any, expected: torch.Tensor) -> None:
    torch.testing.assert_close(torch.tensor(got, dtype=torch.float32), expected.float())


def test_head_scores_are_the_cores_as_layer_by_head_grids(
    client: TestClient, checkpoints: Path
) -> None:
    llama = Decoder.from_dir(checkpoints / "tiny-llama", Llama.from_pretrained, "llama")
    got = post(client, "/api/model/head-scores", {"model": "tiny-llama", "text": TEXT, "seed": 4})
    expected = score_heads(llama, TEXT, seed=4)
    assert (got["layers"], got["heads"]) == (2, 4)
    assert got["tokens"] == list(expected.tokens)
    assert set(got["labels"]) == set(expected.scores.as_dict())
    for name, value in expected.scores.as_dict().items():
        close(got[name], value)
    assert got["induction_ids"] == list(expected.induction_ids)
    assert got["induction_tokens"][0] == "<s>" and got["induction_start"] == 1
    assert got["induction_length"] == 31  # (64 positions - BOS) // 2
    short = post(
        client,
        "/api/model/head-scores",
        {"model": "tiny-llama", "text": TEXT, "seed": 4, "induction_length": 5},
    )
    assert len(short["induction_ids"]) == 11 and short["induction"] != got["induction"]


def test_ablation_is_the_cores_with_heads_from_1(client: TestClient, gpt2: Decoder) -> None:
    got = post(
        client,
        "/api/model/ablate",
        {"model": "tiny-gpt2", "text": TEXT, "heads": [[1, 2], [2, 4]], "mode": "mean"},
    )
    heads = head_model(gpt2)
    ids = heads.tokenize(TEXT).ids
    with torch.inference_mode():
        expected = ablate(heads, ids, [(0, 1), (1, 3)], "mean")
    assert expected.before is not None and expected.after is not None
    assert got["heads"] == [[1, 2], [2, 4]] and got["mode"] == "mean"
    assert got["loss_before"] == pytest.approx(expected.before.loss, abs=1e-6)
    assert got["loss_after"] == pytest.approx(expected.after.loss, abs=1e-6)
    assert got["loss_after"] != pytest.approx(got["loss_before"], abs=1e-3)
    close(got["logprobs_after"], expected.after.next_logprobs)
    assert len(got["logprobs_before"]) == len(ids) - 1
    assert len(got["predictions_before"]) == len(ids)
    first = got["predictions_after"][-1]
    assert first["top_ids"] == expected.after.top_ids[-1].tolist()
    assert first["top_tokens"] == [gpt2.tokenizer.decode([i]) for i in first["top_ids"]]
    assert got["each_head"] is None and got["embedding_cosine"] is None


def test_another_head_of_the_same_text_runs_the_ablated_forward_alone(
    client: TestClient,
) -> None:
    """The first ablation of a text runs the clean and the ablated rows (a batch of 2 at
    the final norm); the next one of the same text (another head) reuses the clean
    predictions and runs the ablated text alone (a batch of 1), with the same answer as
    a first ablation of that head would give."""
    model = client.app.state.models.load("tiny-gpt2")  # type: ignore[attr-defined]
    heads = head_model(model)
    text = TEXT + " Once more."  # a text no other test ablated
    rows: list[int] = []
    hook = heads.final_norm.register_forward_pre_hook(
        lambda _m, args: rows.append(int(args[0].shape[0]))
    )
    try:
        body = {"model": "tiny-gpt2", "text": text}
        first = post(client, "/api/model/ablate", {**body, "heads": [[1, 2]]})
        second = post(client, "/api/model/ablate", {**body, "heads": [[2, 3]]})
    finally:
        hook.remove()
    assert rows == [2, 1]
    assert second["logprobs_before"] == first["logprobs_before"]
    ids = heads.tokenize(text).ids
    with torch.inference_mode():
        expected = ablate(heads, ids, [(1, 2)])
    assert expected.after is not None
    close(second["logprobs_after"], expected.after.next_logprobs)
    assert second["loss_after"] == pytest.approx(expected.after.loss, abs=1e-6)


def test_each_head_is_a_grid_of_delta_losses(client: TestClient, gpt2: Decoder) -> None:
    text = "The cat sat on the mat"  # 6 tokens: 2 x 4 x 36 cells, under the limit
    got = post(client, "/api/model/ablate", {"model": "tiny-gpt2", "text": text, "each_head": True})
    heads = head_model(gpt2)
    with torch.inference_mode():
        expected = each_head_effects(heads, heads.tokenize(text).ids)
    assert got["each_head_measure"] == "delta_loss" and got["heads"] == []
    close(got["each_head"], expected)
    assert got["loss_before"] is None


def test_an_encoder_ablation_gives_the_embedding_cosine(client: TestClient) -> None:
    got = post(
        client,
        "/api/model/ablate",
        {"text": "bank", "heads": [[1, 1]], "each_head": True},
    )
    assert got["family"] == "bert" and got["causal"] is False
    assert got["tokens"] == ["[CLS]", "bank", "[SEP]"]
    assert 0.9 < got["embedding_cosine"] < 1.0
    assert len(got["each_head"]) == 6 and len(got["each_head"][0]) == 12
    assert got["each_head"][0][0] == pytest.approx(got["embedding_cosine"], abs=1e-6)
    assert got["each_head_measure"] == "embedding_cosine" and got["loss_before"] is None


def test_the_logit_lens_is_the_cores(client: TestClient, gpt2: Decoder) -> None:
    got = post(client, "/api/model/logit-lens", {"model": "tiny-gpt2", "text": TEXT})
    expected = logit_lens(gpt2, TEXT)
    assert got["layers"] == 2 and got["tokens"] == list(expected.tokens)
    assert got["top_ids"] == expected.top_ids.tolist()
    close(got["top_probs"], expected.top_probs)
    assert got["top_tokens"][1][0] == [gpt2.tokenizer.decode([i]) for i in got["top_ids"][1][0]]


@pytest.mark.parametrize("fmt", ["json", "compact"])
def test_value_norm_maps_on_the_attention_api(client: TestClient, gpt2: Decoder, fmt: str) -> None:
    body = {"model": "tiny-gpt2", "text": TEXT, "measure": "value_norm", "format": fmt}
    got = post(client, "/api/model/attention", {**body, "dtype": "float16"})
    plain = post(client, "/api/model/attention", {**body, "measure": "weights"})
    expected = value_norm_maps(gpt2, TEXT, [0, 1])
    # Kept for the next request (a page asks one layer at a time): the same object again.
    model = client.app.state.models.load("tiny-gpt2")  # type: ignore[attr-defined]
    assert value_norm_shares(model, TEXT) is value_norm_shares(model, TEXT)
    for layer in (0, 1):
        maps = got["attentions"][layer]
        if fmt == "compact":
            import base64

            import numpy as np

            raw = np.frombuffer(base64.b64decode(maps["data"]), dtype="<f2").astype(np.float32)
            values = torch.from_numpy(raw.reshape(maps["shape"]))
            torch.testing.assert_close(values, row_shares(expected[layer]), atol=1e-3, rtol=1e-3)
        else:
            close(maps, row_shares(expected[layer]))
            assert maps != plain["attentions"][layer]


BAD = [
    ({"heads": [[3, 1]]}, ["body", "heads"], "heads[0] is [3, 1]; this model has layers 1 to 2"),
    ({"heads": [[1, 5]]}, ["body", "heads"], "heads 1 to 4"),
    ({"heads": [[0, 1]]}, ["body", "heads"], "heads[0] is [0, 1]"),
    ({"heads": []}, ["body", "heads"], "heads is empty"),
    ({}, ["body", "heads"], "heads is empty"),
    ({"heads": [[1, 1]], "mode": "half"}, ["body", "mode"], "'zero' or 'mean'"),
    (
        {"each_head": True},
        ["body", "each_head"],
        "each_head costs layers × heads × T² = 2 × 4 × {T}² = {cost}; the limit is "
        f"{LIMIT} (ATTENTION_VIZ_MAX_ABLATION_CELLS)",
    ),
]


@pytest.mark.parametrize(("extra", "loc", "needle"), BAD)
def test_bad_ablations_get_a_422_naming_the_field_and_limit(
    client: TestClient, gpt2: Decoder, extra: dict[str, Any], loc: list[str], needle: str
) -> None:
    T = len(gpt2.tokenize(TEXT))  # the tokenizer is trained per session: its count may vary
    needle = needle.replace("{T}", str(T)).replace("{cost}", str(8 * T * T))
    response = client.post("/api/model/ablate", json={"model": "tiny-gpt2", "text": TEXT, **extra})
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"][: len(loc)] == loc
    assert needle in detail["msg"], detail["msg"]


@pytest.mark.parametrize(
    ("path", "body", "loc", "needle"),
    [
        ("/api/model/logit-lens", {"text": "a bank"}, ["body", "model"], "for decoders"),
        (
            "/api/model/head-scores",
            {"model": "tiny-gpt2", "text": TEXT, "induction_length": 40},
            ["body", "induction_length"],
            "may be 2 to 24",
        ),
        ("/api/model/head-scores", {"model": "tiny-gpt2", "text": ""}, ["body", "text"], ""),
        (
            "/api/model/attention",
            {"model": "tiny-gpt2", "text": TEXT, "measure": "norm"},
            ["body", "measure"],
            "",
        ),
    ],
)
def test_other_bad_input(
    client: TestClient, path: str, body: dict[str, Any], loc: list[str], needle: str
) -> None:
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"] == loc and needle in detail["msg"], detail


def test_each_head_over_its_limit_carries_the_contract_ctx(
    client: TestClient, gpt2: Decoder
) -> None:
    T = len(gpt2.tokenize(TEXT))
    body = {"model": "tiny-gpt2", "text": TEXT, "each_head": True}
    (detail,) = client.post("/api/model/ablate", json=body).json()["detail"]
    assert detail["type"] == "limit_exceeded"
    assert detail["ctx"] == {
        "limit": LIMIT,
        "found": 8 * T * T,
        "setting": "ATTENTION_VIZ_MAX_ABLATION_CELLS",
    }
