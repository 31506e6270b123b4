"""Long-text maps through the API: ``heads``, ``pool`` (max over blocks) and ``rows``/``cols``
on a ~300-token random GPT-2, against the full maps of the same request and transformers'.

The same requests on the long path (a server whose ``model_full_maps_bytes`` is 0, so
every input takes it: maps gathered block by block from kept q and k) equal the full
path's to float rounding; the long path's answer limit is a 422 naming ``pool``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.models.checkpoints import eager_attentions, make_gpt2
from tests.requires import require

NAME = "long-gpt2"
TEXT = " ".join(["the river bank was muddy and the money was in the bank"] * 17)
POOL = 32


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    return make_gpt2(tmp_path_factory.mktemp("long") / NAME, n_positions=400, seed=7)


@pytest.fixture(scope="module")
def client(model_dir: Path) -> Iterator[TestClient]:
    settings = Settings(models=str(model_dir), hf_cache=False)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def long_client(model_dir: Path) -> Iterator[TestClient]:
    """Every input takes the long path (its maps are over 0 bytes)."""
    settings = Settings(
        models=str(model_dir),
        hf_cache=False,
        model_full_maps_bytes=0,
        model_max_answer_cells=200_000,
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def post(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/api/model/attention", json={"model": NAME, "text": TEXT, **body})
    assert response.status_code == 200, response.text
    return response.json()


def max_pool(maps: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    """The reference: each block's maximum, blocks starting every ``block`` cells."""
    rows = np.arange(0, maps.shape[-2], block[0])
    cols = np.arange(0, maps.shape[-1], block[1])
    return np.maximum.reduceat(np.maximum.reduceat(maps, rows, axis=-2), cols, axis=-1)


@pytest.fixture(scope="module")
def full(client: TestClient) -> dict[str, Any]:
    return post(client)


def test_the_text_is_about_300_tokens(full: dict[str, Any]) -> None:
    assert 280 <= len(full["tokens"]) <= 340
    assert full["head_numbers"] == [1, 2, 3, 4]
    assert full["region"] is None and full["pooled"] is None


def test_pooled_overview_equals_pooling_the_full_maps(
    client: TestClient, full: dict[str, Any], model_dir: Path
) -> None:
    T = len(full["tokens"])
    block = -(-T // POOL)
    pooled = post(client, pool=POOL, heads=[4, 2])
    assert pooled["head_numbers"] == [4, 2]
    side = -(-T // block)
    assert side <= POOL
    assert pooled["pooled"] == {"block": [block, block], "shape": [side, side], "reduce": "maximum"}
    for layer in range(2):
        maps = np.array(full["attentions"][layer])[[3, 1]]
        got = np.array(pooled["attentions"][layer])
        assert got.shape == (2, side, side)
        np.testing.assert_array_equal(got, max_pool(maps, (block, block)))
        for key in ("head_average", "rollout"):
            want = max_pool(np.array(full[key][layer]), (block, block))
            np.testing.assert_array_equal(np.array(pooled[key][layer]), want)
    # And against transformers' own eager attention, pooled the same way.
    decoder = client.app.state.models.load(NAME)  # type: ignore[attr-defined]
    theirs = eager_attentions(model_dir, decoder.tokenize(TEXT).input_ids)
    for layer in range(2):
        want = max_pool(theirs[layer][0, [3, 1]].numpy(), (block, block))
        np.testing.assert_allclose(np.array(pooled["attentions"][layer]), want, atol=1e-5)


def test_a_region_equals_the_same_cells_of_the_full_map(
    client: TestClient, full: dict[str, Any]
) -> None:
    T = len(full["tokens"])
    rows, cols = [100, 181], [7, T]
    region = post(client, rows=rows, cols=cols, heads=[3], layers=[2])
    assert region["region"] == {"rows": rows, "cols": cols} and region["pooled"] is None
    assert region["tokens"] == full["tokens"]  # the axes stay the whole text's
    got = np.array(region["attentions"][0])
    np.testing.assert_array_equal(got, np.array(full["attentions"][1])[[2], 100:181, 7:])
    np.testing.assert_array_equal(
        np.array(region["rollout"][0]), np.array(full["rollout"][1])[100:181, 7:]
    )
    # A region pooled: the same blocks as pooling the crop.
    zoomed = post(client, rows=rows, cols=cols, pool=20, layers=[1], format="compact")
    assert zoomed["pooled"]["block"] == [5, -(-(T - 7) // 20)]
    assert zoomed["attentions"][0]["shape"] == [4, *zoomed["pooled"]["shape"]]


def test_a_region_of_the_maps_without_special_tokens(client: TestClient) -> None:
    hidden = post(client, hide_special=True, layers=[1])
    region = post(client, hide_special=True, layers=[1], rows=[0, 50], cols=[10, 60], pool=10)
    want = max_pool(np.array(hidden["attentions"][0])[:, 0:50, 10:60], (5, 5))
    np.testing.assert_array_equal(np.array(region["attentions"][0]), want)


def close(got: Any, want: np.ndarray) -> None:
    np.testing.assert_allclose(np.array(got), want, atol=1e-6, rtol=0)


def test_long_path_pooled_overview_equals_pooling_the_full_maps(
    long_client: TestClient, full: dict[str, Any]
) -> None:
    T = len(full["tokens"])
    block = -(-T // POOL)
    pooled = post(long_client, pool=POOL, heads=[4, 2])
    assert pooled["maps_path"] == "long" and full.get("maps_path", "full") == "full"
    assert pooled["rollout_note"] is None  # under model_long_rollout_tokens: computed
    assert pooled["tokens"] == full["tokens"] and pooled["head_numbers"] == [4, 2]
    assert pooled["pooled"] == post(long_client, pool=POOL, layers=[1])["pooled"]
    for layer in range(2):
        close(
            pooled["attentions"][layer],
            max_pool(np.array(full["attentions"][layer])[[3, 1]], (block, block)),
        )
        close(
            pooled["head_average"][layer],
            max_pool(np.array(full["head_average"][layer]), (block, block)),
        )
        want = max_pool(np.array(full["rollout"][layer]), (block, block))
        close(pooled["rollout"][layer], want)


def test_long_path_region_and_one_head_at_full_resolution(
    long_client: TestClient, full: dict[str, Any]
) -> None:
    T = len(full["tokens"])
    region = post(long_client, rows=[100, 181], cols=[7, T], heads=[3], layers=[2])
    assert region["region"] == {"rows": [100, 181], "cols": [7, T]} and region["pooled"] is None
    close(region["attentions"][0], np.array(full["attentions"][1])[[2], 100:181, 7:])
    close(region["head_average"][0], np.array(full["head_average"][1])[100:181, 7:])
    close(region["rollout"][0], np.array(full["rollout"][1])[100:181, 7:])
    # One head, no average: the zoom a page makes after the overview.
    head = post(long_client, heads=[1], layers=[1], head_average=False, format="compact")
    assert head["head_average"] is None
    assert head["attentions"][0]["shape"] == [1, T, T]


def test_long_path_region_without_special_tokens(
    client: TestClient, long_client: TestClient
) -> None:
    hidden = post(client, hide_special=True, layers=[1])
    body = {"hide_special": True, "layers": [1], "rows": [0, 50], "cols": [10, 60], "pool": 10}
    region = post(long_client, **body)
    assert region["tokens"] == hidden["tokens"]
    close(
        region["attentions"][0], max_pool(np.array(hidden["attentions"][0])[:, 0:50, 10:60], (5, 5))
    )
    close(
        region["head_average"][0],
        max_pool(np.array(hidden["head_average"][0])[0:50, 10:60], (5, 5)),
    )
    want = max_pool(np.array(hidden["rollout"][0])[0:50, 10:60], (5, 5))
    close(region["rollout"][0], want)


def test_long_path_answer_over_its_limit_is_refused_naming_pool(
    long_client: TestClient, full: dict[str, Any]
) -> None:
    T = len(full["tokens"])
    response = long_client.post("/api/model/attention", json={"model": NAME, "text": TEXT})
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "pool"]
    assert detail["ctx"] == {
        "limit": 200_000,
        "found": 2 * 6 * T * T,  # 4 heads, their average and the rollout
        "setting": "ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS",
    }
    assert "ask with pool" in detail["msg"]


def test_value_norm_and_hidden_states_answer_past_the_budget_as_below_it(
    client: TestClient, long_client: TestClient
) -> None:
    """value_norm and hidden_states come from the one pass at every length: past the
    full-maps budget (``maps_path`` 'long') the answer is the one below it."""
    for extra in ({"measure": "value_norm"}, {"hidden_states": True}):
        body = {"layers": [2], "pool": 8, **extra}
        answer = post(long_client, **body)
        assert answer.pop("maps_path") == "long" and answer["rollout"] is not None
        below = post(client, **body)
        assert below.pop("maps_path") == "full"
        assert answer == below


@pytest.mark.parametrize("served", ["client", "long_client"])
@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"pool": 0}, "pool", "greater than or equal to 1"),
        ({"pool": 1025}, "pool", "less than or equal to 1024"),
        ({"heads": [5]}, "heads", "heads [5] do not exist; this model has heads 1 to 4"),
        ({"heads": [0, 2]}, "heads", "heads 1 to 4"),
        ({"rows": [0, 10_000]}, "rows", "0 <= start < stop <="),
        ({"rows": [5, 5]}, "rows", "0 <= start < stop <="),
        ({"cols": [-1, 3]}, "cols", "0 <= start < stop <="),
        ({"cols": [3]}, "cols", "at least 2 items"),
    ],
)
def test_bad_map_options_are_422_naming_the_field(
    request: pytest.FixtureRequest,
    served: str,
    full: dict[str, Any],
    body: dict[str, Any],
    field: str,
    words: str,
) -> None:
    client: TestClient = request.getfixturevalue(served)
    response = client.post("/api/model/attention", json={"model": NAME, "text": TEXT, **body})
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", field]
    assert words in detail["msg"]
    if field in ("rows", "cols") and "start" in words:
        assert f"<= {len(full['tokens'])}" in detail["msg"]


def test_generation_takes_the_same_options(client: TestClient) -> None:
    body = {"model": NAME, "prompt": "the river bank", "max_new_tokens": 6, "layers": [2]}
    full = client.post("/api/model/generate", json=body).json()
    pooled = client.post("/api/model/generate", json={**body, "heads": [2], "pool": 4}).json()
    assert pooled["generated_ids"] == full["generated_ids"]
    T = len(full["tokens"])
    block = -(-T // 4)
    assert pooled["pooled"]["block"] == [block, block] and pooled["head_numbers"] == [2]
    want = max_pool(np.array(full["attentions"][0])[[1]], (block, block))
    np.testing.assert_array_equal(np.array(pooled["attentions"][0]), want)
