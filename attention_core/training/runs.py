"""The runs directory as a reader sees it: which runs are there, what they were, removing one.

Only directories ``checkpoint.is_run`` recognizes (a ``training.json`` this
package wrote) are listed or deleted; anything else in the directory, a
symbolic link, or a name that is not a plain run name is refused with the
reason, never touched.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_type_hints

from ..errors import SpecError
from .checkpoint import TRAINING_FILE, check_run_name, is_run, read_training

log = logging.getLogger(__name__)


class RunNotFound(SpecError):
    """No run of that name in the runs directory."""


class NotARun(SpecError):
    """A name in the runs directory that is not a run this package wrote (never deleted)."""


def _fact(description: str) -> Any:
    return field(default=None, metadata={"description": description})


@dataclass(frozen=True)
class RunFacts:
    """What a listing shows of training.json (the history, samples and tensors stay on
    disk); None: absent from the file, or not of the field's type."""

    architecture: str | None = _fact("the model's architecture (a training preset's)")
    steps: int | None = _fact("optimizer steps taken")
    val_loss: float | None = _fact("the last validation loss")
    train_loss: float | None = _fact("the last loss estimated on the training text")
    untrained_val_loss: float | None = _fact("the validation loss before the first step")
    baseline_val_loss: float | None = _fact("a bigram model's validation loss")
    elapsed_s: float | None = _fact("seconds the training took")
    parameters: int | None = _fact("the model's parameter count")
    vocab_size: int | None = _fact("tokens in its vocabulary")
    text_source: str | None = _fact("what it was trained on")

    def given(self) -> dict[str, str | int | float]:
        """The facts the file gave (with their types), by name."""
        found = {item.name: getattr(self, item.name) for item in fields(self)}
        return {name: value for name, value in found.items() if value is not None}


def _kinds() -> dict[str, tuple[type, ...]]:
    """Each fact's types (a float may be written as an int)."""
    found: dict[str, tuple[type, ...]] = {}
    for name, hint in get_type_hints(RunFacts).items():
        kinds = tuple(kind for kind in get_args(hint) if kind is not type(None))
        found[name] = (*kinds, int) if float in kinds else kinds
    return found


def read_facts(training: dict[str, Any]) -> tuple[RunFacts, tuple[str, ...]]:
    """A run's facts from its training.json, and the names of those of the wrong type
    (dropped: a shared runs directory may hold a file edited or written by another version)."""
    kinds = _kinds()
    present = {name: training[name] for name in kinds if training.get(name) is not None}
    wrong = tuple(
        name
        for name, value in present.items()
        if isinstance(value, bool) or not isinstance(value, kinds[name])  # true is no count
    )
    return RunFacts(**{k: v for k, v in present.items() if k not in wrong}), wrong


@dataclass(frozen=True)
class RunSummary:
    name: str
    modified: float  # seconds since the epoch (the directory's mtime: when it was saved)
    config: dict[str, Any]  # the effective settings
    facts: RunFacts
    unreadable: tuple[str, ...] = ()  # facts of training.json dropped for their type

    @property
    def probe(self) -> str | None:
        probe = self.config.get("probe")
        return probe if isinstance(probe, str) else None


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
        facts, wrong = read_facts(training)
        if wrong:
            log.warning("run %r: %s of training.json dropped (wrong type)", entry.name, wrong)
        settings = config if isinstance(config, dict) else {}
        found.append(RunSummary(entry.name, modified, settings, facts, wrong))
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
