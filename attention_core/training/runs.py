"""The runs directory as a reader sees it: which runs are there, what they were, removing one.

Only directories ``checkpoint.is_run`` recognizes (a ``training.json`` this
package wrote) are listed or deleted; anything else in the directory, a
symbolic link, or a name that is not a plain run name is refused with the
reason, never touched.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .checkpoint import TRAINING_FILE, check_run_name, is_run, read_training

# What a listing shows of training.json (the history, samples and tensors stay on disk).
SUMMARY_FIELDS = (
    "architecture",
    "steps",
    "val_loss",
    "train_loss",
    "untrained_val_loss",
    "baseline_val_loss",
    "elapsed_s",
    "parameters",
    "vocab_size",
    "text_source",
)


class RunNotFound(SpecError):
    """No run of that name in the runs directory."""


class NotARun(SpecError):
    """A name in the runs directory that is not a run this package wrote (never deleted)."""


@dataclass(frozen=True)
class RunSummary:
    name: str
    modified: float  # seconds since the epoch (the directory's mtime: when it was saved)
    config: dict[str, Any]  # the effective settings
    facts: dict[str, Any]  # SUMMARY_FIELDS present in training.json

    @property
    def probe(self) -> str | None:
        probe = self.config.get("probe")
        return probe if isinstance(probe, str) else None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "modified": self.modified, "config": self.config, **self.facts}


def run_probe(directory: Path) -> str | None:
    """The probe text a run was trained to show (its snapshots' text), if it is a run."""
    training = read_training(directory)
    config = training.get("config") if training else None
    probe = config.get("probe") if isinstance(config, dict) else None
    return probe if isinstance(probe, str) and probe else None


def list_runs(runs_dir: Path) -> list[RunSummary]:
    """The runs in ``runs_dir``, newest first; an absent directory has none."""
    if not runs_dir.is_dir():
        return []
    found: list[RunSummary] = []
    for entry in runs_dir.iterdir():
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        training = read_training(entry)
        if training is None:
            continue
        try:
            modified = entry.stat().st_mtime
        except OSError:  # removed meanwhile
            continue
        config = training.get("config")
        facts = {k: training[k] for k in SUMMARY_FIELDS if k in training}
        found.append(
            RunSummary(entry.name, modified, config if isinstance(config, dict) else {}, facts)
        )
    found.sort(key=lambda run: (run.modified, run.name), reverse=True)
    return found


def run_directory(runs_dir: Path, name: str) -> Path:
    """``runs_dir/name`` when it is a run of ours; ``RunNotFound`` or ``NotARun`` saying why not.

    The name is a plain run name (no separators, no leading dot), and the path
    is checked again after resolving, so nothing outside ``runs_dir`` is reached.
    """
    check_run_name(name)
    path = runs_dir / name
    if path.is_symlink():
        raise NotARun(f"{name!r} is a symbolic link, not a run; it is left alone", field="name")
    if not path.exists():
        raise _not_found(name)
    if path.resolve().parent != runs_dir.resolve():
        raise NotARun(f"{name!r} is outside the runs directory", field="name")
    if not path.is_dir() or not is_run(path):
        raise NotARun(
            f"{name!r} is not a training run of attention-viz (no {TRAINING_FILE} written by "
            "it); it is left alone",
            field="name",
        )
    return path


def delete_run(runs_dir: Path, name: str) -> Path:
    """Remove the run ``name`` from ``runs_dir`` (see ``run_directory`` for what is refused)."""
    path = run_directory(runs_dir, name)
    try:
        shutil.rmtree(path)
    except FileNotFoundError as exc:  # another request removed it first
        raise RunNotFound(
            f"there is no run called {name!r} in the runs directory", field="name"
        ) from exc
    return path


def _not_found(name: str) -> RunNotFound:
    return RunNotFound(f"there is no run called {name!r} in the runs directory", field="name")
