"""``GET /api/runs`` and ``DELETE /api/runs/{name}``: the training runs this server saves."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class RunSummaryOut(BaseModel):
    """One run: its settings and losses (the rest of its training.json stays on disk)."""

    name: str = Field(description="the run's directory, and its model name on /model")
    modified: float = Field(description="when it was saved, seconds since the epoch")
    model_url: str = Field(description="its /model page")
    config: dict[str, Any] = Field(description="the effective training settings")
    architecture: str | None = None
    steps: int | None = None
    val_loss: float | None = None
    train_loss: float | None = None
    untrained_val_loss: float | None = None
    baseline_val_loss: float | None = None
    elapsed_s: float | None = None
    parameters: int | None = None
    vocab_size: int | None = None
    text_source: str | None = None


class RunList(BaseModel):
    runs_dir: str = Field(
        description="where runs are saved (ATTENTION_VIZ_RUNS_DIR); every server of this "
        "user on this machine shares the default one"
    )
    keep: int = Field(description="newest runs kept (ATTENTION_VIZ_RUNS_KEEP)")
    runs: list[RunSummaryOut] = Field(description="newest first")


class RunDeleted(BaseModel):
    deleted: str = Field(description="the run's name")
