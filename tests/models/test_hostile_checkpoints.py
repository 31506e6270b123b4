"""Checkpoints are untrusted files: each hostile one made here is listed as unsupported with
its reason, never loaded, and the other models (the packaged MiniLM among them) keep
answering through the real app, whichever source lists it (a models path, the runs
directory, the Hugging Face cache)."""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from attention_core import SpecError
from attention_core.models import GPT2, Decoder, ModelRegistry, ModelUnsupported, read_header
from attention_core.models.checkpoints.model_size import (
    MAX_LAYERS,
    default_max_model_bytes,
    machine_memory,
)
from attention_core.models.checkpoints.untrusted_json import MAX_JSON_DEPTH, nesting_depth
from attention_core.models.checkpoints.weight_dtype import held_bytes
from attention_core.models.registry import model_registry as registry_module
from tests.models.registries import registry_of

DEEP = "[" * 100_000 + "]" * 100_000
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


# --- making hostile files -------------------------------------------------------------------


def edit_config(directory: Path, **changes: Any) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def replace_in_config(directory: Path, old: str, new: str) -> None:
    path = directory / "config.json"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def header_parts(path: Path) -> tuple[dict[str, Any], bytes]:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def write_weights(path: Path, header_text: str, buffer: bytes) -> None:
    encoded = header_text.encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + buffer)


def edit_header(directory: Path, change: Callable[[dict[str, Any]], object]) -> None:
    """``change`` edits the parsed header (returning None) or returns its new text."""
    path = directory / "model.safetensors"
    header, buffer = header_parts(path)
    text = change(header)
    write_weights(path, text if isinstance(text, str) else json.dumps(header), buffer)


def first_tensor(header: dict[str, Any]) -> dict[str, Any]:
    """The entry that starts the buffer (offset 0)."""
    return next(v for k, v in header.items() if k != "__metadata__" and v["data_offsets"][0] == 0)


def second_tensor(header: dict[str, Any]) -> dict[str, Any]:
    end = first_tensor(header)["data_offsets"][1]
    return next(v for k, v in header.items() if k != "__metadata__" and v["data_offsets"][0] == end)


def deep_header(header: dict[str, Any]) -> str:
    return json.dumps(header)[:-1] + ', "deep": ' + DEEP + "}"


def huge_shape(header: dict[str, Any]) -> str:
    first_tensor(header)["shape"] = ["HUGE", 1]
    return json.dumps(header).replace('"HUGE"', "1e999")


def fractional_shape(header: dict[str, Any]) -> str:
    """The first dimension as 32.7 (the old reader read it as 32)."""
    entry = first_tensor(header)
    entry["shape"] = ["FRACTION", *entry["shape"][1:]]
    return json.dumps(header).replace('"FRACTION"', "32.7")


def shard_index(directory: Path, weight_map_value: object) -> None:
    """model.safetensors moved to a shard and an index naming it as ``weight_map_value``."""
    header, _ = header_parts(directory / "model.safetensors")
    (directory / "model.safetensors").rename(directory / "model-00001-of-00001.safetensors")
    index = {"metadata": {}, "weight_map": {n: weight_map_value for n in header if n[0] != "_"}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))


def overlap(header: dict[str, Any]) -> None:
    """The second tensor's bytes start inside the first's (same length: sizes still match)."""
    second = second_tensor(header)
    begin, end = second["data_offsets"]
    second["data_offsets"] = [begin - 4, end - 4]


def negative_shape(header: dict[str, Any]) -> None:
    first_tensor(header)["shape"][0] = -first_tensor(header)["shape"][0]


# name -> (the checkpoint it starts from, what is done to it, a part of the reason listed)
HOSTILE: dict[str, tuple[str, Callable[[Path], object], str]] = {
    "config-deep": (
        "tiny-gpt2",
        lambda d: (d / "config.json").write_text(DEEP),
        f"config.json: it is not valid JSON (it nests more than {MAX_JSON_DEPTH} levels",
    ),
    "generation-config-deep": (
        "tiny-gpt2",
        lambda d: (d / "generation_config.json").write_text(DEEP),
        "cannot read generation_config.json: it is not valid JSON (it nests more than",
    ),
    "header-deep": (
        "tiny-gpt2",
        lambda d: edit_header(d, deep_header),
        "model.safetensors: the header is not valid JSON (it nests more than 4 levels",
    ),
    "metadata-not-object": (
        "tiny-gpt2",
        lambda d: edit_header(d, lambda h: h.update({"__metadata__": [1, 2]})),
        "model.safetensors: __metadata__ is not a JSON object",
    ),
    "shape-1e999": (
        "tiny-gpt2",
        lambda d: edit_header(d, huge_shape),
        "the header is not valid JSON (the number 1e999 is too large for a float)",
    ),
    "rope-factor-1e999": (
        "tiny-llama3-rope",
        lambda d: replace_in_config(d, '"factor": 4.0', '"factor": 1e999'),
        "the number 1e999 is too large for a float",
    ),
    "weight-map-not-string": (
        "tiny-gpt2",
        lambda d: shard_index(d, 5),
        "model.safetensors.index.json: names the shard '5'; a shard is a file name inside",
    ),
    "n-positions-1e30": (
        "tiny-gpt2",
        lambda d: replace_in_config(d, '"n_positions": 48', '"n_positions": 1e30'),
        "config.json: n_positions is 1e+30; it must be an integer",
    ),
    "n-positions-beyond-64-bits": (
        "tiny-gpt2",
        lambda d: replace_in_config(d, '"n_positions": 48', '"n_positions": ' + "9" * 30),
        "the integer 999999999999999999999999… does not fit in 64 bits",
    ),
    "n-layer-1000000": (
        "tiny-gpt2",
        lambda d: edit_config(d, n_layer=1_000_000),
        f"config.json: n_layer is 1000000; it must be from 0 to {MAX_LAYERS}",
    ),
    "n-layer-1000-tiny-weights": (
        "tiny-gpt2",
        lambda d: edit_config(d, n_layer=1000),
        # 320 tokens x 32 wide, then 1000 layers of q and output projections (32 x 32 each)
        f"config.json implies at least {320 * 32 + 1000 * 2 * 32 * 32:,} parameters "
        "(1000 layers of width 32); the weights hold 37,248",
    ),
    "n-layer-20000": (
        "tiny-gpt2",
        lambda d: edit_config(d, n_layer=20_000),
        f"config.json: n_layer is 20000; it must be from 0 to {MAX_LAYERS}",
    ),
    "n-embd-2-31": (
        "tiny-gpt2",
        lambda d: edit_config(d, n_embd=2**31),
        "config.json: n_embd is 2147483648; it must be from 1 to",
    ),
    "n-embd-float": (
        "tiny-gpt2",
        lambda d: edit_config(d, n_embd=32.0),
        "config.json: n_embd is 32.0; it must be an integer",
    ),
    "n-layer-float": (
        "tiny-gpt2",
        lambda d: edit_config(d, n_layer=2.5),
        "config.json: n_layer is 2.5; it must be an integer",
    ),
    "n-embd-negative": (
        "tiny-gpt2",
        lambda d: edit_config(d, n_embd=-32),
        "config.json: n_embd is -32; it must be from 1 to",
    ),
    "eos-string": (
        "tiny-gpt2",
        lambda d: edit_config(d, eos_token_id="</s>"),
        "config.json: eos_token_id is '</s>'; it must be a token id",
    ),
    "eos-nested": (
        "tiny-llama",
        lambda d: edit_config(d, eos_token_id=[[2]]),
        "config.json: eos_token_id is [[2]]; it must be a token id",
    ),
    "generation-eos-string": (
        "tiny-gpt2",
        lambda d: (d / "generation_config.json").write_text('{"eos_token_id": "x"}'),
        "generation_config.json: eos_token_id is 'x'",
    ),
    "shape-negative": (
        "tiny-gpt2",
        lambda d: edit_header(d, negative_shape),
        "a shape is a list of at most 8 non-negative integers",
    ),
    "shape-fractional": (
        "tiny-gpt2",
        lambda d: edit_header(d, fractional_shape),
        "has shape [32.7",
    ),
    "offsets-overlap": (
        "tiny-gpt2",
        lambda d: edit_header(d, overlap),
        "overlap in the file",
    ),
    "config-too-large": (
        "tiny-gpt2",
        lambda d: edit_config(d, padding="x" * (16 * 2**20)),
        "config.json is larger than 16777216 bytes",
    ),
}


@pytest.fixture(scope="module")
def hostile(checkpoints: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of every ``HOSTILE`` checkpoint and one good GPT-2 (``fine``)."""
    root = tmp_path_factory.mktemp("hostile")
    for name, (base, make, _) in HOSTILE.items():
        shutil.copytree(checkpoints / base, root / name)
        make(root / name)
    shutil.copytree(checkpoints / "tiny-gpt2", root / "fine")
    return root


@pytest.fixture(scope="module")
def client(hostile: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The real app with the packaged MiniLM, the hostile directory as ATTENTION_VIZ_MODELS,
    and one hostile checkpoint in each of the runs directory and a Hugging Face cache."""
    runs = tmp_path_factory.mktemp("runs")
    shutil.copytree(hostile / "config-deep", runs / "run-deep")
    hub = tmp_path_factory.mktemp("hub")
    shutil.copytree(hostile / "shape-1e999", hub / "models--acme--evil" / "snapshots" / "abc")
    old = os.environ.get("HF_HUB_CACHE")
    os.environ["HF_HUB_CACHE"] = str(hub)
    try:
        settings = Settings(models=str(hostile), runs_dir=str(runs), hf_cache=True)
        with TestClient(create_app(settings)) as test_client:
            yield test_client
    finally:
        if old is None:
            del os.environ["HF_HUB_CACHE"]
        else:
            os.environ["HF_HUB_CACHE"] = old


def listed(client: TestClient) -> dict[str, dict[str, Any]]:
    response = client.get("/api/models")
    assert response.status_code == 200, response.text
    return {m["name"]: m for m in response.json()["models"]}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_checkpoint_is_listed_with_its_reason(client: TestClient, name: str) -> None:
    model = listed(client)[name]
    assert model["supported"] is False
    assert HOSTILE[name][2] in model["reason"]
    answer = client.post("/api/model/attention", json={"model": name, "text": "the bank"})
    assert answer.status_code == 422, answer.text
    (detail,) = answer.json()["detail"]
    assert detail["loc"] == ["body", "model"]
    assert detail["msg"].startswith(f"model {name!r} is not supported: ")


def test_every_source_lists_them_and_the_others_keep_answering(client: TestClient) -> None:
    models = listed(client)
    assert models[MINILM]["supported"] and models["fine"]["supported"]
    assert "nests more than" in models["run-deep"]["reason"]
    assert models["run-deep"]["source"] == "runs"
    assert "1e999" in models["acme/evil"]["reason"]
    assert models["acme/evil"]["source"] == "hf-cache"
    assert client.get("/model").status_code == 200
    assert client.get("/api/model").json()["name"] == MINILM
    for body in ({"text": "the river bank"}, {"model": "fine", "text": "the river bank"}):
        answer = client.post("/api/model/attention", json={**body, "format": "json"})
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["attentions"]) in (2, 6)


def test_any_exception_of_one_checkpoint_is_its_reason(
    checkpoints: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only SpecError: whatever a family's config reader raises stays with that model."""
    shutil.copytree(checkpoints / "tiny-gpt2", tmp_path / "odd")
    shutil.copytree(checkpoints / "tiny-llama", tmp_path / "good")
    real_family_of = registry_module.family_of

    def explode(raw: object) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    def family_of(raw: dict[str, Any]) -> object:
        family = real_family_of(raw)
        return replace(family, sizes=explode) if family.name == "gpt2" else family

    monkeypatch.setattr(registry_module, "family_of", family_of)
    registry = registry_of(tmp_path)
    entries = {e.name: e for e in registry.entries()}
    assert entries["odd"].reason == (
        "odd: its files could not be read (RecursionError: maximum recursion depth exceeded)"
    )
    assert entries["odd"].family == "gpt2"
    assert entries["good"].supported
    assert isinstance(registry.load("good"), Decoder)


def test_nesting_depth_skips_strings() -> None:
    assert nesting_depth('{"a": "[[[[{{{{", "b": [[1]], "c": "\\"[["}') == 3
    assert nesting_depth(DEEP) == MAX_JSON_DEPTH + 1  # stops counting past the limit


# --- sizes: ATTENTION_VIZ_MAX_MODEL_BYTES ---------------------------------------------------


def test_the_size_limit_is_checked_from_the_config_and_the_headers(
    checkpoints: Path, tmp_path: Path
) -> None:
    shutil.copytree(checkpoints / "tiny-gpt2", tmp_path / "gpt2")
    shutil.copytree(checkpoints / "tiny-gpt2-bf16", tmp_path / "bf16")
    gpt2 = read_header(tmp_path / "gpt2" / "model.safetensors")
    bf16 = read_header(tmp_path / "bf16" / "model.safetensors")
    weights = held_bytes([gpt2])
    assert weights == 4 * gpt2.parameters  # float32
    assert held_bytes([bf16]) == 2 * bf16.parameters  # bf16 is held as stored
    assert held_bytes([bf16]) == bf16.path.stat().st_size - 8 - _header_length(bf16.path)
    assert held_bytes([bf16], torch.float32) == 4 * bf16.parameters  # ATTENTION_VIZ_DTYPE

    def reasons(limit: int) -> dict[str, str | None]:
        registry = registry_of(tmp_path, max_model_bytes=limit, offload=False)
        return {e.name: e.reason for e in registry.entries()}

    assert reasons(weights) == {"bf16": None, "gpt2": None}
    too_small = reasons(weights - 1)
    assert too_small["gpt2"] == (
        f"the weights take {weights:,} bytes once loaded (float32, as stored); the limit is "
        f"{weights - 1:,} bytes (ATTENTION_VIZ_MAX_MODEL_BYTES)"
    )
    assert too_small["bf16"] is None  # half the bytes: counted as held
    implied = 320 * 32 + 2 * 2 * 32 * 32  # embeddings, then 2 layers' q and output projections
    assert reasons(4 * implied - 1)["gpt2"] == (
        f"config.json implies at least {implied:,} parameters ({4 * implied:,} bytes as "
        f"float32, as stored); the limit is {4 * implied - 1:,} bytes "
        "(ATTENTION_VIZ_MAX_MODEL_BYTES)"
    )


def _header_length(path: Path) -> int:
    return int(struct.unpack("<Q", path.read_bytes()[:8])[0])


def test_the_setting_reaches_the_listing_and_the_api(checkpoints: Path, tmp_path: Path) -> None:
    shutil.copytree(checkpoints / "tiny-gpt2", tmp_path / "gpt2")
    settings = Settings(models=str(tmp_path), hf_cache=False, max_model_bytes=1000)
    with TestClient(create_app(settings)) as client:
        models = listed(client)
        assert (
            "the limit is 1,000 bytes (ATTENTION_VIZ_MAX_MODEL_BYTES)" in models["gpt2"]["reason"]
        )
        answer = client.get("/api/model", params={"model": "gpt2"})
        assert answer.status_code == 422
        assert "ATTENTION_VIZ_MAX_MODEL_BYTES" in answer.json()["detail"][0]["msg"]


def test_the_default_limit_is_half_the_machines_memory() -> None:
    memory = machine_memory()
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memory is not None and 0 < memory <= physical
    assert default_max_model_bytes() == memory // 2
    assert ModelRegistry().max_model_bytes == memory // 2


def test_a_failed_load_is_remembered_until_the_files_change(
    checkpoints: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header whose names do not fit the config passes the listing and fails the load: once."""
    good = tmp_path / "good.safetensors"
    directory = Path(shutil.copytree(checkpoints / "tiny-gpt2", tmp_path / "models" / "m"))
    shutil.copy(directory / "model.safetensors", good)
    edit_header(directory, lambda h: json.dumps(h).replace("h.1.", "h.7."))
    registry = registry_of(tmp_path / "models")
    assert registry.entries()[0].supported
    calls = []
    real = registry_module._family

    def counting(entry: Any) -> Any:
        family = real(entry)
        return replace(family, load=lambda *a: calls.append(1) or family.load(*a))

    monkeypatch.setattr(registry_module, "_family", counting)
    for _ in range(3):
        with pytest.raises(ModelUnsupported, match="'m' is not supported: m: the weights do not"):
            registry.load("m")
    assert len(calls) == 1
    (entry,) = registry.entries()
    assert entry.reason is not None and entry.reason.startswith("m: the weights do not match")
    shutil.copy(good, directory / "model.safetensors")  # fixed: a new fingerprint
    assert registry.entries()[0].supported
    assert isinstance(registry.load("m"), Decoder) and len(calls) == 2


# --- shard indexes and symlinks: only files inside the checkpoint are read ------------------


def sharded(source: Path, directory: Path, shard: str) -> Path:
    """``source`` with its weights named ``shard`` by an index (the weights themselves gone)."""
    shutil.copytree(source, directory)
    header, _ = header_parts(directory / "model.safetensors")
    (directory / "model.safetensors").unlink()
    index = {"metadata": {}, "weight_map": {n: shard for n in header if n != "__metadata__"}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    return directory


def test_a_shard_index_cannot_lead_outside_its_checkpoint(
    checkpoints: Path, tmp_path: Path
) -> None:
    victim = Path(shutil.copytree(checkpoints / "tiny-gpt2", tmp_path / "elsewhere" / "victim"))
    models = tmp_path / "models"
    source = checkpoints / "tiny-gpt2"
    sharded(source, models / "dotdot", "../../elsewhere/victim/model.safetensors")
    sharded(source, models / "absolute", str(victim / "model.safetensors"))
    linked = sharded(source, models / "symlink", "model-00001-of-00001.safetensors")
    (linked / "model-00001-of-00001.safetensors").symlink_to(victim / "model.safetensors")
    single = Path(shutil.copytree(source, models / "single-symlink"))
    (single / "model.safetensors").unlink()
    (single / "model.safetensors").symlink_to(victim / "model.safetensors")
    inside = sharded(source, models / "inside", "shards/model-00001-of-00001.safetensors")
    (inside / "shards").mkdir()
    shutil.copy(
        source / "model.safetensors", inside / "shards" / "model-00001-of-00001.safetensors"
    )
    registry = registry_of(models)
    reasons = {e.name: e.reason for e in registry.entries()}
    assert reasons == {
        "absolute": f"model.safetensors.index.json: names the shard "
        f"{str(victim / 'model.safetensors')!r}; a shard is a file name inside the checkpoint "
        "directory",
        "dotdot": "model.safetensors.index.json: names the shard "
        "'../../elsewhere/victim/model.safetensors'; a shard is a file name inside the "
        "checkpoint directory",
        "inside": None,
        "single-symlink": "model.safetensors: leads outside its checkpoint directory; only "
        "files inside it are read",
        "symlink": "model-00001-of-00001.safetensors: leads outside its checkpoint directory; "
        "only files inside it are read",
    }
    assert isinstance(registry.load("inside"), Decoder)
    for name in ("dotdot", "absolute", "symlink"):  # loading directly refuses as well
        with pytest.raises(SpecError, match="a shard is a file name inside|leads outside"):
            GPT2.from_pretrained(models / name)


def hf_repo(hub: Path, repo: str, files: dict[str, bytes], blobs_of: str | None = None) -> Path:
    """A Hugging Face cache repository whose snapshot links every file to ``../../blobs``
    (of ``blobs_of``'s repository, when given), as ``huggingface_hub`` writes it."""
    snapshot = hub / f"models--{repo}" / "snapshots" / "c0ffee"
    snapshot.mkdir(parents=True)
    blobs = hub / f"models--{blobs_of or repo}" / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    for number, (name, data) in enumerate(files.items()):
        blob = blobs / f"{repo.replace('/', '-')}-{number:040x}"
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


def test_hugging_face_cache_snapshots_may_link_to_their_own_blobs(
    checkpoints: Path, tmp_path: Path
) -> None:
    hub = tmp_path / "hub"
    source = checkpoints / "tiny-llama"
    files = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}
    hf_repo(hub, "acme--single", files)
    shards = sharded(source, tmp_path / "sharded", "model-00001-of-00001.safetensors")
    shutil.copy(source / "model.safetensors", shards / "model-00001-of-00001.safetensors")
    hf_repo(hub, "acme--sharded", {p.name: p.read_bytes() for p in shards.iterdir()})
    hf_repo(hub, "acme--thief", files, blobs_of="other--repo")
    registry = registry_of(hf_cache=hub)
    reasons = {e.name: e.reason for e in registry.entries()}
    assert reasons == {
        "acme/sharded": None,
        "acme/single": None,
        "acme/thief": "model.safetensors: leads outside its checkpoint directory; only files "
        "inside it are read",
        "other/repo": "models--other--repo has no snapshot",
    }
    for name in ("acme/single", "acme/sharded"):
        model = registry.load(name)
        assert isinstance(model, Decoder)
        assert model.encode("the bank").layer_attentions[0].shape[0] == 4


# --- every backend: the transformers one reads the same checks ------------------------------

TRANSFORMERS_HOSTILE = (
    "generation-config-deep",
    "metadata-not-object",
    "shape-fractional",
    "offsets-overlap",
    "weight-map-not-string",
    "n-layer-float",
    "eos-nested",
)


def test_checkpoints_of_the_transformers_backend_are_checked_alike(
    hf_checkpoints: Callable[[str], Path], tmp_path: Path
) -> None:
    """A Qwen3 (transformers backend) made hostile each way: the same reasons, and the
    untouched one still loads; too large for the limit, it is refused from its headers."""
    source = hf_checkpoints("tiny-qwen3")
    for name in TRANSFORMERS_HOSTILE:
        shutil.copytree(source, tmp_path / name)
        HOSTILE[name][1](tmp_path / name)
    sharded(source, tmp_path / "dotdot", "../tiny-qwen3/model.safetensors")
    shutil.copytree(source, tmp_path / "tiny-qwen3")
    registry = registry_of(tmp_path)
    entries = {e.name: e for e in registry.entries()}
    assert entries["tiny-qwen3"].supported and entries["tiny-qwen3"].backend == "transformers"
    for name in TRANSFORMERS_HOSTILE:
        reason = entries[name].reason
        assert reason is not None and HOSTILE[name][2] in reason, name
    assert "names the shard '../tiny-qwen3/model.safetensors'" in str(entries["dotdot"].reason)
    assert entries["tiny-qwen3"].parameters is not None
    weights = held_bytes([read_header(source / "model.safetensors")])
    small = registry_of(tmp_path, max_model_bytes=weights - 1, offload=False)
    refused = {e.name: e for e in small.entries()}["tiny-qwen3"]
    assert refused.reason is not None and refused.reason.startswith(f"the weights take {weights:,}")
    assert registry.load("tiny-qwen3").info().layers == 2


def test_a_cache_ref_cannot_lead_outside_its_repository(checkpoints: Path, tmp_path: Path) -> None:
    """refs/main names a commit: "../../../elsewhere" is not one (the newest snapshot is used)."""
    shutil.copytree(checkpoints / "tiny-llama", tmp_path / "elsewhere")
    repo = tmp_path / "hub" / "models--acme--tiny"
    shutil.copytree(checkpoints / "tiny-gpt2", repo / "snapshots" / "abc")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("../../../elsewhere")
    registry = registry_of(hf_cache=tmp_path / "hub")
    (entry,) = registry.entries()
    assert entry.path == repo / "snapshots" / "abc" and entry.family == "gpt2"


def test_a_directory_that_cannot_be_looked_into_hides_nothing_else(
    checkpoints: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Permission denied (as a user other than root meets a mode-000 directory; root reads
    everything, so the error is raised here by hand): only that directory is left out."""
    models = tmp_path / "models"
    shutil.copytree(checkpoints / "tiny-gpt2", models / "fine")
    shutil.copytree(checkpoints / "tiny-gpt2", models / "locked")
    real_is_file, real_exists = Path.is_file, Path.exists

    def denied(path: Path) -> None:
        if "locked" in path.parts:
            raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Path, "is_file", lambda p: denied(p) or real_is_file(p))
    monkeypatch.setattr(Path, "exists", lambda p: denied(p) or real_exists(p))
    registry = registry_of(models, cli_paths=[models / "locked"], runs_dir=models)
    reasons = {e.name: e.reason for e in registry.entries()}
    assert reasons == {
        "locked": f"{models / 'locked'} cannot be read (Permission denied)",
        "fine": None,
        "fine@runs": None,
    }
