"""``/api/model/why`` and ``/api/model/attribute`` over real HTTP semantics (FastAPI's
TestClient): the core's numbers with layers and heads from 1, and every bad input as a 422
naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from attention_core.analysis import head_model
from attention_core.analysis.attribution import attribute
from attention_core.analysis.qk_decomposition import why
from attention_core.models import GPT2, Decoder
from tests.api_calls import error, post, served

TEXT = "The bank approved the loan, and the river bank was muddy."
SHORT = TEXT[:28]  # 20 tokens or fewer: AtP* on tiny-gpt2 fits LIMIT
LIMIT = 4000  # max_ablation_cells: exact ablation of tiny-gpt2 on "bank bank" fits, TEXT not


@pytest.fixture(scope="module")
def client(checkpoints: Path) -> Iterator[TestClient]:
    yield from served(checkpoints, max_ablation_cells=LIMIT)


@pytest.fixture(scope="module")
def gpt2(checkpoints: Path) -> Decoder:
    return Decoder.from_dir(checkpoints / "tiny-gpt2", GPT2.from_pretrained, "gpt2")


def test_why_is_the_cores_decomposition_with_layers_from_1(
    client: TestClient, gpt2: Decoder
) -> None:
    body = {"model": "tiny-gpt2", "text": TEXT, "layer": 2, "head": 3, "row": 9, "col": 4, "top": 5}
    got = post(client, "/api/model/why", body)
    heads = head_model(gpt2)
    expected = why(heads, heads.tokenize(TEXT).ids, 1, 2, 9, 4)
    assert got["components"] == [*expected.components]
    assert got["components"][:2] == ["embedding", "L1 H1"] and got["components"][-1] == "biases"
    torch.testing.assert_close(torch.tensor(got["grid"]), expected.grid)
    assert got["score"] == pytest.approx(expected.score, rel=1e-6)
    assert got["softcap"] is None  # GPT-2 caps nothing
    assert got["weight"] == pytest.approx(expected.weight, rel=1e-6)
    assert got["scale"] == pytest.approx(expected.scale)
    values = [pair["value"] for pair in got["contributions"]]
    assert len(values) == 5 and values == sorted(values, key=abs, reverse=True)
    assert sum(values) + got["rest"] == pytest.approx(got["score"], abs=1e-5)
    largest = float(expected.grid.abs().max())
    assert abs(values[0]) == pytest.approx(largest, rel=1e-6)
    names = got["components"]
    first = got["contributions"][0]
    i, j = names.index(first["query"]), names.index(first["key"])
    assert got["grid"][i][j] == pytest.approx(first["value"])


def test_why_on_an_encoder(client: TestClient) -> None:
    got = post(
        client,
        "/api/model/why",
        {"text": "the river bank", "layer": 3, "head": 2, "row": 3, "col": 1},
    )
    assert got["family"] == "bert" and len(got["components"]) == 2 + 2 * 13
    assert sum(map(sum, got["grid"])) == pytest.approx(got["score"], rel=1e-4, abs=1e-5)


def test_attribute_is_the_cores_estimate(client: TestClient, gpt2: Decoder) -> None:
    heads = head_model(gpt2)
    ids = heads.tokenize(SHORT).ids
    token = heads.token_texts([ids[6]])[0]
    body: dict[str, Any] = {
        "model": "tiny-gpt2",
        "text": SHORT,
        "method": "atp_star",
        "ablation": "mean",
        "target": {"position": 5, "token": token},
    }
    got = post(client, "/api/model/attribute", body)
    expected = attribute(heads, ids, "atp_star", "mean", (5, ids[6]))
    assert got["target"] == {"position": 5, "token": ids[6]} and got["target_text"] == token
    torch.testing.assert_close(torch.tensor(got["estimate"]), expected.estimate)
    torch.testing.assert_close(torch.tensor(got["direct"]), expected.direct)
    assert got["loss"] == pytest.approx(expected.loss) and got["exact"] is None
    assert expected.graddrop is not None
    torch.testing.assert_close(torch.tensor(got["graddrop"]), expected.graddrop)
    assert got["cancelled"] == [{"layer": n + 1, "head": h + 1} for n, h in expected.cancelled]
    by_id = post(
        client, "/api/model/attribute", {**body, "target": {"position": 5, "token": ids[6]}}
    )
    assert by_id["estimate"] == got["estimate"]
    plain = post(client, "/api/model/attribute", {"model": "tiny-gpt2", "text": TEXT})
    assert plain["method"] == "attribution_patching" and plain["target"] is None
    assert plain["graddrop"] is None and plain["cancelled"] == []
    assert len(plain["estimate"]) == 2 and len(plain["estimate"][0]) == 4


def test_attribute_exact_gives_both_grids(client: TestClient, gpt2: Decoder) -> None:
    text = "bank bank"
    got = post(
        client, "/api/model/attribute", {"model": "tiny-gpt2", "text": text, "method": "exact"}
    )
    heads = head_model(gpt2)
    expected = attribute(heads, heads.tokenize(text).ids, "exact")
    assert expected.exact is not None
    torch.testing.assert_close(torch.tensor(got["exact"]), expected.exact)
    torch.testing.assert_close(torch.tensor(got["estimate"]), expected.estimate)


def where(response: Any) -> list[Any]:
    return error(response)["loc"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"row": 3, "col": 4}, ["body", "col"]),  # a masked cell
        ({"row": 99}, ["body", "row"]),
        ({"col": 99, "row": 99}, ["body", "row"]),
        ({"layer": 3}, ["body", "layer"]),
        ({"layer": 0}, ["body", "layer"]),
        ({"head": 5}, ["body", "head"]),
        ({"col": -1}, ["body", "col"]),
        ({"extra": 1}, ["body", "extra"]),
    ],
)
def test_bad_cells_get_a_422_naming_the_field(
    client: TestClient, change: dict[str, Any], loc: list[Any]
) -> None:
    body = {"model": "tiny-gpt2", "text": TEXT, "layer": 1, "head": 1, "row": 5, "col": 2, **change}
    assert where(client.post("/api/model/why", json=body)) == loc


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"target": {"position": 99, "token": 3}}, ["body", "target", "position"]),
        ({"target": {"position": 2, "token": "bank river"}}, ["body", "target", "token"]),
        ({"target": {"position": 2, "token": 10**6}}, ["body", "target", "token"]),
        ({"method": "guess"}, ["body", "method"]),
        ({"ablation": "resample"}, ["body", "ablation"]),
    ],
)
def test_bad_attributions_get_a_422_naming_the_field(
    client: TestClient, change: dict[str, Any], loc: list[Any]
) -> None:
    body = {"model": "tiny-gpt2", "text": TEXT, **change}
    assert where(client.post("/api/model/attribute", json=body)) == loc


def test_an_encoder_is_refused_with_the_reason(client: TestClient) -> None:
    detail = error(client.post("/api/model/attribute", json={"text": "the river bank"}))
    assert detail["loc"] == ["body", "model"] and "masked-language-model head" in detail["msg"]


def test_exact_over_its_limit_carries_the_contract_ctx(client: TestClient, gpt2: Decoder) -> None:
    T = len(gpt2.tokenize(TEXT))
    body = {"model": "tiny-gpt2", "text": TEXT, "method": "exact"}
    detail = error(client.post("/api/model/attribute", json=body))
    assert detail["loc"] == ["body", "method"] and detail["type"] == "limit_exceeded"
    assert detail["ctx"] == {
        "limit": LIMIT,
        "found": 8 * T * T,
        "setting": "ATTENTION_VIZ_MAX_ABLATION_CELLS",
    }


def test_atp_star_counts_graddrops_passes_before_any_work(
    client: TestClient, gpt2: Decoder
) -> None:
    """TEXT's softmax recomputation alone (layers·(layers − 1)/2 × heads² × T²) fits heads ×
    LIMIT; with GradDrop's L − 1 forward and backward passes (3 × layers × heads × T² each)
    it does not: refused naming the method, the limit and the setting."""
    T = len(gpt2.tokenize(TEXT))
    assert 1 * 16 * T * T <= 4 * LIMIT < (16 + 1 * 3 * 2 * 4) * T * T
    body = {"model": "tiny-gpt2", "text": TEXT, "method": "atp_star"}
    detail = error(client.post("/api/model/attribute", json=body))
    assert detail["loc"] == ["body", "method"] and detail["type"] == "limit_exceeded"
    assert "GradDrop" in detail["msg"]
    assert detail["ctx"] == {
        "limit": 4 * LIMIT,
        "found": (16 + 24) * T * T,
        "setting": "ATTENTION_VIZ_MAX_ABLATION_CELLS",
    }
    assert len(gpt2.tokenize(SHORT)) <= 20  # (16 + 24) × 20² ≤ 4 × LIMIT


def test_the_top_heads_are_confirmed_exactly_and_a_null_token_is_the_models_own(
    client: TestClient, gpt2: Decoder
) -> None:
    heads = head_model(gpt2)
    ids = heads.tokenize(TEXT).ids
    body = {"model": "tiny-gpt2", "text": TEXT, "target": {"position": 7}, "confirm_top": 3}
    got = post(client, "/api/model/attribute", body)
    with torch.no_grad():
        final = heads.run(torch.tensor([list(ids)])).hidden[-1]  # type: ignore[attr-defined]
    own = int(heads.unembed(final[0, 7]).argmax())  # type: ignore[attr-defined]
    assert got["target"] == {"position": 7, "token": own}
    exact = attribute(heads, ids, "exact", "zero", (7, own)).exact
    assert exact is not None
    estimate = torch.tensor(got["estimate"])
    order = estimate.flatten().abs().argsort(descending=True)[:3].tolist()
    assert [(c["layer"], c["head"]) for c in got["confirmed"]] == [
        (i // 4 + 1, i % 4 + 1) for i in order
    ]
    for c in got["confirmed"]:
        assert c["exact"] == pytest.approx(float(exact[c["layer"] - 1, c["head"] - 1]), abs=1e-5)
        assert c["estimate"] == pytest.approx(float(estimate[c["layer"] - 1, c["head"] - 1]))
    too_many = {**body, "confirm_top": 17}
    assert error(client.post("/api/model/attribute", json=too_many))["loc"] == [
        "body",
        "confirm_top",
    ]
