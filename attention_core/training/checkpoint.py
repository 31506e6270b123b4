"""A finished run on disk: an ordinary Hugging Face GPT-2 checkpoint directory, plus its story.

``config.json`` + ``model.safetensors`` (``GPT2.save_pretrained``, loadable by
transformers' ``GPT2LMHeadModel``), ``tokenizer.json`` (the character
vocabulary, read by the ``tokenizers`` library), ``tokenizer_config.json`` (so
transformers' ``AutoTokenizer`` reads that file as it is) and ``training.json`` (the
run's settings, corpus hash, losses and fixed-at-zero tensors).  A directory
appears whole or not at all: it is written under a hidden temporary name and
renamed, so a registry scanning the runs directory never lists half a run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..models.checkpoints.files import TOKENIZER_FILE
from ..models.checkpoints.untrusted_json import read_json
from ..models.families.gpt2 import GPT2
from .corpus import CharVocabulary

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
TRAINING_FILE = "training.json"
RUN_FORMAT = "attention-viz training run"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def save_run(
    directory: Path, model: GPT2, vocabulary: CharVocabulary, training: dict[str, Any]
) -> Path:
    """Write the run to ``directory`` atomically; replaces an earlier run saved there.

    A directory that exists and is neither empty nor a run is left alone (error).
    """
    directory = Path(directory)
    if directory.exists() and not _replaceable(directory):
        raise SpecError(
            f"{directory} exists and is not a training run; choose another directory", field="out"
        )
    directory.parent.mkdir(parents=True, exist_ok=True)
    partial = directory.parent / f".{directory.name}.partial-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        model.save_pretrained(partial, metadata={"producer": "attention-viz train"})
        _write_json(partial / TOKENIZER_FILE, vocabulary.tokenizer_json())
        max_length = model.config.n_positions
        _write_json(partial / TOKENIZER_CONFIG_FILE, vocabulary.tokenizer_config(max_length))
        _write_json(partial / TRAINING_FILE, {"format": RUN_FORMAT, **training})
        if directory.exists():
            shutil.rmtree(directory)
        partial.rename(directory)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return directory


def _replaceable(directory: Path) -> bool:
    return directory.is_dir() and (
        not any(directory.iterdir()) or (directory / TRAINING_FILE).is_file()
    )


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_training(directory: Path) -> dict[str, Any] | None:
    """``training.json`` of a directory this module wrote; None for anything else."""
    try:
        raw = read_json(directory / TRAINING_FILE)  # bounded: the runs directory is shared
    except SpecError:
        return None
    return raw if raw.get("format") == RUN_FORMAT else None


def is_run(directory: Path) -> bool:
    """A directory this module wrote (only those are ever pruned or deleted)."""
    return read_training(directory) is not None


def new_run_name(architecture: str, now: float | None = None) -> str:
    """``<architecture>-<UTC date>-<time>-<6 hex>``: sorts by time, unique across replicas."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{architecture.replace('_', '-')}-{stamp}-{secrets.token_hex(3)}"


def check_run_name(name: str) -> str:
    if not _NAME.match(name):
        raise SpecError(
            f"name {name[:40]!r} must be 1-100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            field="name",
        )
    return name


def prune_runs(runs_dir: Path, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest runs in ``runs_dir`` (by modification time).

    Only directories that ``is_run`` recognizes are counted or deleted, and
    stale temporary directories older than an hour are removed.  Safe to run
    from several replicas at once (what another already removed is skipped).
    """
    if not runs_dir.is_dir():
        return []
    runs: list[tuple[float, Path]] = []
    removed: list[Path] = []
    for entry in runs_dir.iterdir():
        try:
            mtime = entry.stat().st_mtime
        except OSError:
            continue
        if entry.name.startswith(".") and ".partial-" in entry.name:
            if time.time() - mtime > 3600:
                shutil.rmtree(entry, ignore_errors=True)
            continue
        if entry.is_dir() and is_run(entry):
            runs.append((mtime, entry))
    runs.sort(key=lambda item: (item[0], item[1].name), reverse=True)
    for _, path in runs[keep:]:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
