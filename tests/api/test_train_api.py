"""POST /api/train: bad input is a 4xx naming the field, a run streams its events and saves
a checkpoint transformers loads, and GET /api/train/presets.

In-process through TestClient (each run still starts a real worker process);
tests/api/test_train_live.py covers what needs real sockets: 429, disconnects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from attention_core.models import GPT2
from attention_core.models.maps.transport import CompactTensor, decode_compact
from tests.requires import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TINY = {
    "architecture": "gpt",
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "block_size": 16,
    "batch_size": 4,
    "max_steps": 6,
    "eval_every": 3,
    "eval_iters": 2,
    "snapshot_every": 2,
    "sample_chars": 10,
}


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def train_client(runs_dir: Path) -> Iterator[TestClient]:
    settings = Settings(
        runs_dir=str(runs_dir), train_concurrent=4, train_max_parameters=200_000, train_nice=0
    )
    with TestClient(create_app(settings)) as client:
        yield client


def decode_compact_payload(payload: dict) -> torch.Tensor:
    """A compact tensor as the API sends it, decoded as a client would."""
    return decode_compact(CompactTensor(payload["dtype"], tuple(payload["shape"]), payload["data"]))


def parse_sse(lines: Iterator[str]) -> list[tuple[str, dict]]:
    """(event, data) per message of a text/event-stream; comments are skipped."""
    events, name, data = [], None, []
    for line in lines:
        if line == "":
            if name is not None:
                events.append((name, json.loads("\n".join(data))))
            name, data = None, []
        elif line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        else:
            assert line.startswith(":"), line
    return events


def stream(client: TestClient, **kwargs: object) -> list[tuple[str, dict]]:
    with client.stream("POST", "/api/train", **kwargs) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache, no-store"
        return parse_sse(response.iter_lines())


def test_a_run_streams_its_events_and_saves_a_checkpoint(
    train_client: TestClient, runs_dir: Path
) -> None:
    events = stream(train_client, json=TINY)
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-1] == "done"
    start = events[0][1]
    assert start["config"]["n_layer"] == 1 and start["n_head"] == 2
    assert start["probe_tokens"] == list("Kim rowed the bo")
    assert start["baseline_val_loss"] == pytest.approx(1.8236, abs=1e-4)
    progress = [data for name, data in events if name == "progress"]
    assert [p["step"] for p in progress] == list(range(7))
    assert [p["step"] for p in progress if p["val_loss"] is not None] == [0, 3, 6]
    snapshots = [data for name, data in events if name == "snapshot"]
    assert [s["step"] for s in snapshots] == [0, 2, 4, 6]
    weights = decode_compact_payload(snapshots[-1]["attention"])
    assert weights.shape == (1, 2, 16, 16)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 2, 16), atol=16 / 510, rtol=0)
    assert [data["step"] for name, data in events if name == "sample"] == [0, 3, 6]

    done = events[-1][1]
    assert done["name"] == start["name"] and done["model_url"] == f"/model?model={done['name']}"
    assert done["val_loss"] == progress[-1]["val_loss"]
    assert done["untrained_val_loss"] == progress[0]["val_loss"]
    saved = runs_dir / done["name"]
    training = json.loads((saved / "training.json").read_text())
    assert training["text_source"] == "shipped corpus"
    assert training["trained_by"] == "POST /api/train"

    # The saved checkpoint: transformers' GPT2LMHeadModel gives our logits, and the last
    # snapshot is the checkpoint's own attention for the probe (to the uint8 step).
    transformers = require("transformers")
    reference = transformers.GPT2LMHeadModel.from_pretrained(
        saved, attn_implementation="eager", dtype=torch.float32
    ).eval()
    ours = GPT2.from_pretrained(saved)
    ids = torch.randint(0, start["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        torch.testing.assert_close(ours(ids).logits, reference(ids).logits, atol=1e-5, rtol=1e-5)
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(saved / "tokenizer.json"))
        probe = torch.tensor([tokenizer.encode("Kim rowed the bo").ids])
        (attention,) = ours(probe, output_attentions=True).attentions
    torch.testing.assert_close(weights[0], attention[0], atol=1 / 510, rtol=0)


def test_an_uploaded_file_is_the_training_text(train_client: TestClient, runs_dir: Path) -> None:
    text = "the river bank was muddy. the bank lent money. " * 20
    form = {k: str(v) for k, v in TINY.items()}
    events = stream(
        train_client, data=form, files={"file": ("banks.txt", text.encode(), "text/plain")}
    )
    start, done = events[0][1], events[-1][1]
    assert start["vocab_size"] == len(set(text)) + 1
    assert start["train_chars"] + start["val_chars"] == len(text)
    assert "".join(start["probe_tokens"]) == "the bank lent mo"  # the val split's first sentence
    training = json.loads((runs_dir / done["name"] / "training.json").read_text())
    assert training["text_source"] == "uploaded file banks.txt"


def test_pasted_text_and_other_rungs(train_client: TestClient) -> None:
    text = "abcabcabd " * 30
    events = stream(train_client, json={**TINY, "architecture": "bigram", "text": text})
    assert [n for n, _ in events].count("snapshot") == 0  # a bigram has no attention
    assert events[-1][0] == "done"
    average = stream(train_client, json={**TINY, "architecture": "average", "max_steps": 2})
    snapshot = next(data for name, data in average if name == "snapshot")
    weights = decode_compact_payload(snapshot["attention"])
    assert weights.shape == (1, 1, 16, 16)
    assert abs(float(weights[0, 0, 3, 0]) - 0.25) <= 1 / 510  # uniform over 4 positions


def error_of(response) -> tuple[list, str]:
    (item,) = response.json()["detail"]
    return item["loc"], item["msg"]


BAD_JSON = [
    ({"text": ""}, ["body", "text"], "text is empty"),
    ({"text": "   \n  "}, ["body", "text"], "text is empty"),
    (
        {"text": "short text", "block_size": 64},
        ["body", "text"],
        "text is 10 characters; with block_size 64 it must be at least 130",
    ),
    ({"architecture": "transformer"}, ["body", "architecture"], "Input should be 'bigram'"),
    ({"n_layer": 50}, ["body", "n_layer"], "n_layer is 50; the limit is 8"),
    ({"n_embd": 100_001}, ["body", "n_embd"], "less than or equal to 100000"),
    ({"n_embd": 4096}, ["body", "n_embd"], "n_embd is 4096; the limit is 512"),
    ({"block_size": 100_000}, ["body", "block_size"], "block_size is 100000; the limit is 256"),
    ({"batch_size": 1000}, ["body", "batch_size"], "batch_size is 1000; the limit is 128"),
    ({"max_steps": 10**9}, ["body", "max_steps"], "less than or equal to 10000000"),
    ({"max_steps": 100_000}, ["body", "max_steps"], "max_steps is 100000; the limit is 5000"),
    ({"n_head": 100}, ["body", "n_head"], "n_head is 100; the limit is 16"),
    (
        {"n_embd": 512, "n_layer": 8},
        ["body", "n_embd"],
        "parameters (n_layer 8, n_embd 512, vocabulary 49, block_size 64); the limit is 200000",
    ),
    (
        {"n_embd": 16, "block_size": 256, "batch_size": 128, "n_head": 16, "n_layer": 4},
        ["body", "batch_size"],
        "batch_size × n_head × block_size² × n_layer is 536870912; the limit is 8388608",
    ),
    ({"n_embd": 30, "n_head": 4}, ["body", "n_head"], "n_embd (30) is not a multiple of"),
    ({"probe": "Zürich"}, ["body", "probe"], "probe has characters the training text does not"),
    ({"probe": "x" * 70}, ["body", "probe"], "probe is 70 characters; the model reads at most"),
    ({"learning_rate": 5}, ["body", "learning_rate"], "less than or equal to 1"),
    ({"layers": 3}, ["body", "layers"], "Extra inputs are not permitted"),
    (
        {"text": "ab" * 200 + "".join(map(chr, range(0x4E00, 0x4E00 + 1100)))},
        ["body", "text"],
        "distinct characters; the limit is 1024",
    ),
]


@pytest.mark.parametrize(("body", "loc", "message"), BAD_JSON)
def test_bad_settings_are_a_422_naming_the_field(
    train_client: TestClient, body: dict, loc: list, message: str
) -> None:
    response = train_client.post("/api/train", json=body)
    assert response.status_code == 422, response.text
    got_loc, msg = error_of(response)
    assert got_loc == loc and message in msg, (got_loc, msg)


def test_lone_surrogates_are_not_text(train_client: TestClient) -> None:
    body = b'{"text": "' + b"ab\\ud800" * 100 + b'"}'
    response = train_client.post(
        "/api/train", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert error_of(response) == (
        ["body", "text"],
        "text is not valid Unicode: surrogates not allowed at character 2",
    )


def test_text_over_the_size_limit(runs_dir: Path) -> None:
    settings = Settings(runs_dir=str(runs_dir), train_max_text_bytes=1000)
    with TestClient(create_app(settings)) as client:
        response = client.post("/api/train", json={"text": "é" * 501})
        assert response.status_code == 422
        assert error_of(response) == (
            ["body", "text"],
            "text is 1002 bytes; the limit is 1000 (ATTENTION_VIZ_TRAIN_MAX_TEXT_BYTES)",
        )
        upload = client.post("/api/train", files={"file": ("a.txt", b"a" * 1001)})
        assert upload.status_code == 422
        assert error_of(upload)[0] == ["body", "file"]
    big = TestClient(create_app(Settings(runs_dir=str(runs_dir))))
    huge = big.post("/api/train", content=b"x" * 3_000_000, headers={"content-type": "text/plain"})
    assert huge.status_code == 413


def test_bad_uploads(train_client: TestClient) -> None:
    latin1 = "la rivière et la banque, encore et encore. ".encode("latin-1") * 10
    response = train_client.post("/api/train", files={"file": ("notes.txt", latin1)})
    assert response.status_code == 422
    loc, msg = error_of(response)
    assert loc == ["body", "file"]
    assert msg.startswith("the file 'notes.txt' is not UTF-8 text: byte 0xe8 at offset 7")
    empty = train_client.post("/api/train", files={"file": ("empty.txt", b"")})
    assert error_of(empty) == (["body", "file"], "file is empty; give some text to train on")
    both = train_client.post(
        "/api/train", data={"text": "abc" * 100}, files={"file": ("a.txt", b"abc" * 100)}
    )
    assert error_of(both) == (["body", "text"], "give the text or upload a file, not both")
    other = train_client.post("/api/train", files={"upload": ("a.txt", b"abc" * 100)})
    assert error_of(other)[0] == ["body", "upload"]


def test_unreadable_bodies(train_client: TestClient) -> None:
    broken = train_client.post(
        "/api/train", content=b'{"max_steps": ', headers={"content-type": "application/json"}
    )
    assert broken.status_code == 400 and error_of(broken)[0] == ["body"]
    not_utf8 = train_client.post(
        "/api/train", content=b'{"text": "\xff\xfe"}', headers={"content-type": "application/json"}
    )
    assert not_utf8.status_code == 400
    array = train_client.post("/api/train", json=[1, 2])
    assert array.status_code == 422 and error_of(array)[0] == ["body"]
    plain = train_client.post(
        "/api/train", content=b"hello", headers={"content-type": "text/plain"}
    )
    assert plain.status_code == 415
    assert "send application/json or multipart/form-data" in error_of(plain)[1]


def test_an_unwritable_runs_directory_is_a_503(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with TestClient(create_app(Settings(runs_dir=str(blocker / "runs")))) as client:
        response = client.post("/api/train", json=TINY)
    assert response.status_code == 503
    loc, msg = error_of(response)
    assert loc == ["settings", "runs_dir"] and "ATTENTION_VIZ_RUNS_DIR" in msg


def test_presets_list_the_ladder_and_the_limits(train_client: TestClient) -> None:
    body = train_client.get("/api/train/presets").json()
    assert list(body["architectures"]) == ["bigram", "average", "single_head", "multi_head", "gpt"]
    assert body["presets"]["multi_head"]["n_head"] == 4
    assert body["presets"]["bigram"]["n_layer"] == 0
    assert body["limits"]["train_max_parameters"] == 200_000
    assert body["limits"]["train_concurrent"] == 4
    assert body["default_probe"] == "Kim rowed the boat, then went to the bank "
