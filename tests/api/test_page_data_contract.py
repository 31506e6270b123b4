"""Facts the pages show reach them from the server, written once: the steps of attention
(app/steps.py), the family labels (app/family_labels.py), the ladder's fixed settings
(attention_core.training.FIXED_SETTINGS) and the limits (issue 24.11)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from app.family_labels import FAMILY_LABELS
from app.main import create_app
from app.schemas.pages import ModelPageData, ToyPageData, TrainPageData
from app.settings import Settings
from app.steps import HEAD_STEPS, STEP_NAMES, STEPS
from attention_core.training import ARCHITECTURES, FIXED_SETTINGS, TRAINING_PRESETS

STATIC_JS = Path(__file__).resolve().parents[2] / "static" / "js"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(runs_dir=str(tmp_path_factory.mktemp("runs")))
    with TestClient(create_app(settings)) as c:
        yield c


def initial_data(page: str) -> dict:
    match = re.search(
        r'<script type="application/json" id="initial-data">(.*?)</script>', page, re.S
    )
    assert match, "the page has no initial data"
    return json.loads(html.unescape(match.group(1)))


def test_the_steps_are_the_servers_everywhere(client: TestClient) -> None:
    page = client.get("/").text
    data = initial_data(page)
    assert [s["key"] for s in data["steps"]] == list(STEP_NAMES)
    assert data["steps"][2]["cross_title"] == "k = source @ W_key"
    # The panels are rendered from the same list, in its order, with its titles.
    panels = re.findall(
        r'data-step="([^"]+)"><figcaption><strong class="step-title">([^<]*)<', page
    )
    assert panels == [(s.key, html.escape(s.title)) for s in STEPS]
    # The API's `steps` accepts exactly these names, and a head carries the per-head ones.
    enum = client.get("/openapi.json").json()["components"]["schemas"]["AttentionRequest"]
    items = enum["properties"]["steps"]["anyOf"][0]["items"]
    assert tuple(items["enum"]) == STEP_NAMES
    body = client.post("/api/attention", json={"tokens": ["bank", "loan"]}).json()
    assert set(body["heads"][0]) == set(HEAD_STEPS)
    assert {"x", "output"} <= set(body)


def test_family_labels_come_from_the_server(client: TestClient) -> None:
    assert initial_data(client.get("/").text)["family_labels"] == FAMILY_LABELS
    for word in FAMILY_LABELS.values():
        for js in STATIC_JS.glob("*.js"):
            assert f'"{word}' not in js.read_text(), (js.name, word)


def test_the_ladders_fixed_settings_come_from_the_server(client: TestClient) -> None:
    assert set(FIXED_SETTINGS) == set(ARCHITECTURES)
    presets = client.get("/api/train/presets").json()
    assert presets["fixed"] == FIXED_SETTINGS
    assert initial_data(client.get("/train").text)["fixed"] == FIXED_SETTINGS
    for name, config in TRAINING_PRESETS.items():
        built = config.effective()
        for field, value in FIXED_SETTINGS[name].items():
            assert getattr(built, field) == value, (name, field)
    assert "n_layer: 0" not in (STATIC_JS / "train.js").read_text()


@pytest.mark.parametrize("path", ["/", "/compare", "/lessons"])
def test_the_limits_are_the_servers(client: TestClient, path: str) -> None:
    assert initial_data(client.get(path).text)["limits"] == client.get("/api/limits").json()
    # No copy of them in the pages' code.
    assert "max_lesson_samples: " not in (STATIC_JS / "limits.js").read_text()


@pytest.mark.parametrize(
    ("path", "schema"),
    [
        ("/", ToyPageData),
        ("/compare", ToyPageData),
        ("/lessons", ToyPageData),
        ("/model", ModelPageData),
        ("/train", TrainPageData),
    ],
)
def test_each_pages_initial_data_is_its_typed_model(
    client: TestClient, path: str, schema: type[BaseModel]
) -> None:
    """Nothing in a page's initial data is outside its model (read back, it is the same)."""
    data = initial_data(client.get(path).text)
    typed = schema.model_validate(data)
    dumped = typed.page_json() if isinstance(typed, ToyPageData) else typed.model_dump(mode="json")
    assert dumped == data
    assert set(data) == set(schema.model_fields)


def test_the_model_pages_picker_lists_the_apis_models(client: TestClient) -> None:
    data = ModelPageData.model_validate(initial_data(client.get("/model").text))
    listed = client.get("/api/models").json()
    assert data.models.default == listed["default"]
    models = [m.model_dump(exclude={"label", "about"}) for m in data.models.models]
    assert models == listed["models"]
    assert all(m.label.startswith(f"{m.name} — ") for m in data.models.models)
