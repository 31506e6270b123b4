"""``GET /api/runs`` lists the saved training runs; ``DELETE /api/runs/{name}`` removes one.

Only directories that are runs of this app (a ``training.json`` it wrote) are
listed or removed; a symbolic link, another directory or a name that could
reach outside the runs directory is refused with the reason (404 or 409).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from attention_core import SpecError
from attention_core.training.runs import NotARun, RunNotFound, delete_run, list_runs

from ..errors import error_response
from ..model_registry import get_registry
from ..schemas.attention import ErrorBody
from ..schemas.runs import RunDeleted, RunList, run_summary
from ..training.sse import model_url
from .common import ERRORS, SettingsDep, json_response

router = APIRouter(prefix="/api/runs", tags=["train"])


@router.get("", response_model=RunList)
def runs(settings: SettingsDep) -> Response:
    """The runs in the runs directory, newest first, with their settings and losses."""
    runs_dir = settings.runs_path()
    listed = [run_summary(run, model_url(run.name)) for run in list_runs(runs_dir)]
    return json_response(RunList(runs_dir=str(runs_dir), keep=settings.runs_keep, runs=listed))


@router.delete(
    "/{name}",
    response_model=RunDeleted,
    responses={
        404: {"model": ErrorBody, "description": "No run of that name"},
        409: {"model": ErrorBody, "description": "The name is not a run of this app"},
        422: ERRORS[422],
    },
)
def remove_run(name: str, request: Request, settings: SettingsDep) -> Response:
    """Delete a saved run (its checkpoint directory); it leaves the model list at once."""
    try:
        path = delete_run(settings.runs_path(), name)
    except RunNotFound as exc:
        return error_response(404, ["path", "name"], exc.message, "run_not_found")
    except NotARun as exc:
        return error_response(409, ["path", "name"], exc.message, "not_a_run")
    except SpecError as exc:  # not a plain run name
        return error_response(422, ["path", "name"], exc.message, "spec_error")
    gone = path.resolve()
    get_registry(request).loaded.discard(lambda key: key[0].resolve() == gone)
    return json_response(RunDeleted(deleted=name))
