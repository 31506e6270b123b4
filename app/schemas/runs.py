"""``GET /api/runs`` and ``DELETE /api/runs/{name}``: the training runs this server saves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, create_model

from attention_core.training.runs import RunFacts, RunSummary

from .core_fields import dataclass_fields


class RunNamed(BaseModel):
    """One run: its settings and losses (the rest of its training.json stays on disk)."""

    name: str = Field(description="the run's directory, and its model name on /model")
    modified: float = Field(description="when it was saved, seconds since the epoch")
    model_url: str = Field(description="its /model page")
    config: dict[str, Any] = Field(description="the effective training settings")
    unreadable: list[str] = Field(
        [],
        description="facts of its training.json left out for their type (absent when none)",
    )


# The facts are the core's RunFacts, each given only when its training.json has it.
if TYPE_CHECKING:
    RunSummaryOut = RunNamed
else:
    RunSummaryOut = create_model(
        "RunSummaryOut",
        __base__=RunNamed,
        __module__=__name__,
        __doc__=RunNamed.__doc__,
        **dataclass_fields(RunFacts),
    )


def run_summary(run: RunSummary, model_url: str) -> RunSummaryOut:
    """A listed run as it is answered (a fact the file lacks stays absent)."""
    answer: dict[str, object] = {
        "name": run.name,
        "modified": run.modified,
        "model_url": model_url,
        "config": run.config,
        **run.facts.given(),
    }
    if run.unreadable:
        answer["unreadable"] = list(run.unreadable)
    return RunSummaryOut.model_validate(answer)


class RunList(BaseModel):
    runs_dir: str = Field(
        description="where runs are saved (ATTENTION_VIZ_RUNS_DIR); every server of this "
        "user on this machine shares the default one"
    )
    keep: int = Field(description="newest runs kept (ATTENTION_VIZ_RUNS_KEEP)")
    runs: list[RunSummaryOut] = Field(description="newest first")


class RunDeleted(BaseModel):
    deleted: str = Field(description="the run's name")
