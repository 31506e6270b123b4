"""The model registry: sources, names, unsupported models with reasons, lazy LRU loading."""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from app.model_registry import load
from attention_core.models import (
    Decoder,
    Encoder,
    ModelEntry,
    ModelNotFound,
    ModelRegistry,
    ModelUnsupported,
)
from attention_core.models.registry import model_registry as registry_module
from attention_core.models.registry.discovery import hf_cache_dir, split_paths
from attention_core.models.registry.loaded import LoadedModels
from attention_core.progress import Cancelled
from tests.models.checkpoints import write_config
from tests.models.conftest import CHECKPOINTS, DECODERS


def copy(checkpoints: Path, name: str, to: Path) -> Path:
    return Path(shutil.copytree(checkpoints / name, to))


def only(path: Path, **options: object) -> ModelRegistry:
    """A registry of ``path`` (as ATTENTION_VIZ_MODELS) and nothing else."""
    return ModelRegistry(
        include_package=False,
        builtin_dir=None,
        env_paths=[path],
        **options,  # type: ignore[arg-type]
    )


def by_name(entries: list[ModelEntry]) -> dict[str, ModelEntry]:
    return {e.name: e for e in entries}


def test_the_default_registry_lists_the_packaged_minilm_first() -> None:
    registry = ModelRegistry(builtin_dir=None)
    first = registry.entries()[0]
    assert first.name == registry.default_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert (first.source, first.family, first.causal, first.supported) == (
        "package",
        "bert",
        False,
        True,
    )
    assert first.sizes is not None and (first.sizes.layers, first.sizes.heads) == (6, 12)
    assert first.parameters == 22_713_216
    assert isinstance(registry.load(None), Encoder)


def test_env_paths_split_on_pathsep_and_a_directory_may_hold_several(
    checkpoints: Path, tmp_path: Path
) -> None:
    one = copy(checkpoints, "tiny-gpt2", tmp_path / "single" / "solo-gpt2")
    value = os.pathsep.join([str(one), "", str(checkpoints)])
    paths = split_paths(value)
    assert paths == [one, checkpoints]
    registry = ModelRegistry(include_package=False, builtin_dir=None, env_paths=paths)
    entries = registry.entries()
    assert [e.name for e in entries] == ["solo-gpt2", *DECODERS]
    assert all(e.supported and e.source == "env" for e in entries)
    assert [e.family for e in entries[1:]] == [CHECKPOINTS[name][0] for name in DECODERS]
    sizes = by_name(entries)["tiny-gpt2"].sizes
    assert sizes is not None
    assert (sizes.layers, sizes.heads, sizes.kv_heads, sizes.max_positions) == (2, 4, 4, 48)
    llama, llama3 = by_name(entries)["tiny-llama"].sizes, by_name(entries)["tiny-llama3-rope"].sizes
    assert llama is not None and llama3 is not None
    assert (llama.heads, llama.kv_heads, llama.head_dim, llama.max_positions) == (4, 2, 8, 64)
    assert llama3.max_positions == 64  # llama3 RoPE scaling: factor 4 x the original 16
    # Parameters from the headers: tied embeddings counted once, untied twice.
    tied, untied = by_name(entries)["tiny-gpt2"], by_name(entries)["tiny-gpt2-untied"]
    assert tied.parameters is not None and untied.parameters is not None
    assert untied.parameters - tied.parameters == 320 * 32


def test_name_clashes_keep_the_earlier_source_and_suffix_the_later(
    checkpoints: Path, tmp_path: Path
) -> None:
    copy(checkpoints, "tiny-gpt2", tmp_path / "env" / "tiny-gpt2")
    copy(checkpoints, "tiny-gpt2", tmp_path / "runs" / "tiny-gpt2")
    registry = ModelRegistry(
        include_package=False,
        builtin_dir=None,
        cli_paths=[checkpoints / "tiny-gpt2"],
        env_paths=[tmp_path / "env", checkpoints / "tiny-gpt2"],
        runs_dir=tmp_path / "runs",
    )
    names = [(e.name, e.source) for e in registry.entries()]
    assert names == [
        ("tiny-gpt2", "cli"),
        ("tiny-gpt2@env", "env"),
        ("tiny-gpt2@env-2", "env"),
        ("tiny-gpt2@runs", "runs"),
    ]


def test_the_hugging_face_cache_layout(checkpoints: Path, tmp_path: Path) -> None:
    """models--org--name/snapshots/<rev> following refs/main; org/name as the model's name."""
    hub = tmp_path / "hub"
    repo = hub / "models--acme--tiny-gpt2"
    old = copy(checkpoints, "tiny-gpt2-untied", repo / "snapshots" / "0ld")
    copy(checkpoints, "tiny-gpt2", repo / "snapshots" / "c0ffee")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c0ffee\n")
    no_refs = hub / "models--solo"
    copy(checkpoints, "tiny-gpt2-bf16", no_refs / "snapshots" / "abc")
    (hub / "models--empty--repo").mkdir()
    (hub / "datasets--acme--text").mkdir()  # not a model: ignored
    os.utime(old, (1, 1))
    registry = ModelRegistry(include_package=False, builtin_dir=None, hf_cache=hub)
    entries = by_name(registry.entries())
    assert sorted(entries) == ["acme/tiny-gpt2", "empty/repo", "solo"]
    assert entries["acme/tiny-gpt2"].path.name == "c0ffee"
    assert entries["acme/tiny-gpt2"].source == "hf-cache"
    assert entries["solo"].supported and entries["solo"].path.name == "abc"
    assert entries["empty/repo"].reason == "models--empty--repo has no snapshot"
    model = registry.load("acme/tiny-gpt2")
    assert isinstance(model, Decoder) and model.name == "acme/tiny-gpt2"


def test_hf_cache_dir_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hub").mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert hf_cache_dir() == tmp_path / "hub"
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert hf_cache_dir() == tmp_path / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "absent"))
    assert hf_cache_dir() is None


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        # Encoder-decoders load (tests/models/test_seq2seq.py); without weights they cannot.
        (
            {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]},
            "odd-model: no model.safetensors",
        ),
        ({"model_type": "bart", "is_encoder_decoder": True}, "odd-model: no model.safetensors"),
        ({"model_type": "mamba"}, "model_type 'mamba' has no attention heads"),
        ({"architectures": ["Thing"]}, "config.json has no model_type"),
        ({"model_type": "gpt2", "n_embd": 10, "n_head": 3}, "n_embd (10) is not a multiple"),
        ({"model_type": "bert", "hidden_size": 8}, "config.json lacks the field"),
    ],
)
def test_unsupported_configs_are_listed_with_the_reason(
    tmp_path: Path, config: dict[str, object], reason: str
) -> None:
    write_config(tmp_path / "odd-model", config)
    registry = only(tmp_path)
    (entry,) = registry.entries()
    assert entry.name == "odd-model" and not entry.supported
    assert entry.reason is not None and reason in entry.reason
    with pytest.raises(ModelUnsupported, match="'odd-model' is not supported: ") as error:
        registry.load("odd-model")
    assert error.value.field == "model"


def test_broken_files_are_listed_with_the_file_and_the_reason(
    checkpoints: Path, tmp_path: Path
) -> None:
    truncated = copy(checkpoints, "tiny-gpt2", tmp_path / "truncated")
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    garbage = copy(checkpoints, "tiny-gpt2", tmp_path / "garbage")
    (garbage / "model.safetensors").write_bytes(b"\xff" * 7)
    no_tokenizer = copy(checkpoints, "tiny-gpt2", tmp_path / "no-tokenizer")
    (no_tokenizer / "tokenizer.json").unlink()
    no_weights = copy(checkpoints, "tiny-gpt2", tmp_path / "no-weights")
    (no_weights / "model.safetensors").unlink()
    bad_json = copy(checkpoints, "tiny-gpt2", tmp_path / "bad-json")
    (bad_json / "config.json").write_text("{")
    copy(checkpoints, "tiny-gpt2", tmp_path / "fine")
    entries = by_name(only(tmp_path).entries())
    assert entries["fine"].supported
    reasons = {name: e.reason or "" for name, e in entries.items()}
    assert reasons["truncated"].startswith("model.safetensors: the file is truncated: tensor")
    assert reasons["garbage"].startswith("model.safetensors: the file is 7 bytes, too short")
    assert reasons["no-tokenizer"] == "no-tokenizer: no tokenizer.json"
    assert "no model.safetensors or model.safetensors.index.json" in reasons["no-weights"]
    assert reasons["bad-json"].startswith("bad-json: cannot read config.json")


def test_missing_paths_are_listed_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    registry = ModelRegistry(
        include_package=False,
        builtin_dir=None,
        cli_paths=[tmp_path / "nowhere"],
        env_paths=[tmp_path / "file.txt", tmp_path, tmp_path / "empty"],
    )
    reasons = [(e.name, e.reason) for e in registry.entries()]
    assert reasons == [
        ("nowhere", f"{tmp_path / 'nowhere'} does not exist"),
        ("file.txt", f"{tmp_path / 'file.txt'} is not a directory"),
        (tmp_path.name, f"{tmp_path} holds no config.json, nor does any directory in it"),
    ]  # and an empty directory (a mount point with nothing mounted) lists nothing


def test_unknown_names_list_the_models(checkpoints: Path) -> None:
    registry = only(checkpoints)
    with pytest.raises(ModelNotFound, match="unknown model 'gpt-5'; the models are: tiny-gpt2"):
        registry.load("gpt-5")
    with pytest.raises(ModelNotFound, match="no default model"):
        registry.load(None)


def test_new_runs_appear_and_changed_ones_reload_without_a_restart(
    checkpoints: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    registry = ModelRegistry(include_package=False, builtin_dir=None, runs_dir=runs)
    assert registry.entries() == []  # the runs directory may not exist yet
    copy(checkpoints, "tiny-gpt2", runs / "run-1")
    assert [e.name for e in registry.entries()] == ["run-1"]
    first = registry.load("run-1")
    assert registry.load("run-1") is first
    copy(checkpoints, "tiny-gpt2", runs / "run-2")
    assert [(e.name, e.source) for e in registry.entries()] == [
        ("run-1", "runs"),
        ("run-2", "runs"),
    ]
    # The run saved again (other weights, same directory): the next load reads the new files.
    shutil.copy(checkpoints / "tiny-gpt2-untied" / "model.safetensors", runs / "run-1")
    shutil.copy(checkpoints / "tiny-gpt2-untied" / "config.json", runs / "run-1")
    again = registry.load("run-1")
    assert again is not first
    assert not registry.is_loaded(by_name(registry.entries())["run-2"])


def test_descriptions_are_cached_until_the_files_change(
    checkpoints: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy(checkpoints, "tiny-gpt2", tmp_path / "m")
    registry = only(tmp_path)
    calls = []
    real = registry_module.describe
    monkeypatch.setattr(registry_module, "describe", lambda *a: calls.append(1) or real(*a))
    for _ in range(3):
        registry.entries()
    assert len(calls) == 1
    time.sleep(0.01)
    (tmp_path / "m" / "config.json").touch()
    registry.entries()
    assert len(calls) == 2


def test_a_request_resolves_its_model_in_one_scan_describing_only_that_model(
    checkpoints: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = only(checkpoints)
    scans: list[int] = []
    described: list[str] = []
    real_candidates, real_describe = registry.candidates, registry_module.describe
    monkeypatch.setattr(registry, "candidates", lambda: scans.append(1) or real_candidates())
    monkeypatch.setattr(
        registry_module, "describe", lambda c, *a: described.append(c.name) or real_describe(c, *a)
    )
    entry, model = load(registry, "tiny-llama")
    assert (len(scans), described) == (1, ["tiny-llama"])
    assert (entry.name, model.name) == ("tiny-llama", "tiny-llama")
    assert registry.entry("tiny-llama") == entry  # the description is cached: one more scan
    assert (len(scans), described) == (2, ["tiny-llama"])
    with pytest.raises(ModelNotFound, match="unknown model 'gpt-5'; the models are: tiny-gpt2"):
        registry.entry("gpt-5")
    assert (len(scans), described) == (3, ["tiny-llama"])


def test_at_most_max_loaded_models_stay_in_memory(checkpoints: Path) -> None:
    registry = only(checkpoints, max_loaded=2)
    a = registry.load("tiny-gpt2")
    registry.load("tiny-gpt2-untied")
    assert registry.load("tiny-gpt2") is a  # used again: now the most recent
    registry.load("tiny-gpt2-bf16")  # evicts tiny-gpt2-untied, the least recently used
    loaded = {e.name for e in registry.entries() if registry.is_loaded(e)}
    assert loaded == {"tiny-gpt2", "tiny-gpt2-bf16"}
    assert registry.load("tiny-gpt2") is a


def test_racing_requests_load_a_model_once(
    checkpoints: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = only(checkpoints)
    calls = []
    gate = threading.Event()
    family = registry_module._family(by_name(registry.entries())["tiny-gpt2"])
    real_load = family.load

    def slow_load(*args: object) -> object:
        calls.append(1)
        gate.wait(5)
        return real_load(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(registry_module, "_family", lambda entry: replace(family, load=slow_load))
    results: list[object] = []
    start = threading.Barrier(4)

    def request() -> None:
        start.wait(5)
        results.append(registry.load("tiny-gpt2"))

    threads = [threading.Thread(target=request) for _ in range(4)]
    for t in threads:
        t.start()
    # Give the other three time to find the load under way (they must not start their own;
    # were one late, it would find the model loaded: the assertions hold either way).
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and len(results) == 4
    assert all(r is results[0] for r in results)


def test_a_failed_load_is_not_remembered() -> None:
    models: LoadedModels[str, str] = LoadedModels(1)

    def fail() -> str:
        raise OSError("disk")

    with pytest.raises(OSError, match="disk"):
        models.get("a", fail)
    assert models.get("a", lambda: "loaded") == "loaded"
    assert models.get("b", lambda: "b") == "b" and "a" not in models


def test_a_waiter_loads_the_model_itself_when_its_loader_was_cancelled() -> None:
    """Two requests ask for one model; the first, loading it, is cancelled (its client left):
    the second does not inherit that ``Cancelled`` but loads the model itself."""
    models: LoadedModels[str, str] = LoadedModels(1)
    loading = threading.Event()
    answers: list[str] = []

    def cancelled_load() -> str:
        loading.set()
        pending = models._loading["m"]  # the first's load, which the second waits on
        blocked = threading.Event()
        while not pending._condition._waiters:  # until the second is blocked in result()
            blocked.wait(0.001)
        raise Cancelled("load cancelled after 1 of 2")

    def second() -> None:
        loading.wait(timeout=60)
        answers.append(models.get("m", lambda: "loaded by the second"))

    thread = threading.Thread(target=second)
    thread.start()
    with pytest.raises(Cancelled):
        models.get("m", cancelled_load)
    thread.join(timeout=60)
    assert answers == ["loaded by the second"]
