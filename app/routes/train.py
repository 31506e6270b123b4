"""``POST /api/train``: train a tiny GPT and stream its progress as Server-Sent Events.

Thin: the body is checked (``training/request.py``), a slot is taken (429 when
this process already runs ``ATTENTION_VIZ_TRAIN_CONCURRENT`` runs), a child
process is started (``training/runner.py``) and its frames are relayed.  No
state outlives the response: the finished model is a checkpoint directory in
the runs directory, which replicas can share.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from attention_core.training import ARCHITECTURES, DEFAULT_PROBE, FIXED_SETTINGS, TRAINING_PRESETS

from ..errors import error_response
from ..schemas.train import EVENT_DOCS, TrainPresets, TrainRequest
from ..schemas.train_events import TrainEventMessage
from ..settings import Settings
from ..training.request import UnreadableBody, read_train_request
from ..training.runner import (
    STALLED_GRACE_S,
    EventStreamResponse,
    relay,
    run_deadline,
    start_run,
    writable_runs_dir,
)
from .common import ERRORS, EventStreamDocs, SettingsDep, json_error

router = APIRouter(prefix="/api/train", tags=["train"])

# Seconds a client is told to wait when every slot is busy: runs last about a minute.
RETRY_AFTER_S = 30
LIMIT_FIELDS = (
    "train_concurrent",
    "train_max_seconds",
    "train_max_steps",
    "train_max_parameters",
    "train_max_text_bytes",
    "train_max_vocabulary",
    "train_max_layers",
    "train_max_embd",
    "train_max_block_size",
    "train_max_batch_size",
    "train_max_attention_cells",
    "max_heads",
)

_REQUEST_SCHEMA = TrainRequest.model_json_schema()
_FORM_SCHEMA = {
    **_REQUEST_SCHEMA,
    "properties": {
        **_REQUEST_SCHEMA["properties"],
        "file": {"type": "string", "format": "binary", "description": "the text, UTF-8"},
    },
}


def train_limits(settings: Settings) -> dict[str, int | float]:
    from ..training.runner import cpu_count

    limits: dict[str, int | float] = {name: getattr(settings, name) for name in LIMIT_FIELDS}
    limits["train_concurrent"] = settings.train_concurrent or cpu_count()
    return limits


@router.get("/presets", response_model=TrainPresets)
async def train_presets(settings: SettingsDep) -> TrainPresets:
    """The ladder's steps, each step's default settings, and this server's training limits."""
    return TrainPresets(
        architectures=ARCHITECTURES,
        presets={name: config.to_dict() for name, config in TRAINING_PRESETS.items()},
        fixed=FIXED_SETTINGS,
        default_probe=DEFAULT_PROBE,
        limits=train_limits(settings),
    )


@router.post(
    "",
    response_class=EventStreamDocs,
    status_code=200,
    responses={
        # The route's media type is text/event-stream: a "model" is documented under it, as
        # the schema of each message (OpenAPI 3.2's itemSchema is not valid in 3.1).
        200: {"model": TrainEventMessage, "description": EVENT_DOCS},
        **{k: json_error(v["description"]) for k, v in ERRORS.items() if k != 404},
        415: json_error("Not JSON or multipart/form-data"),
        429: {
            **json_error("Every training slot of this server process is busy; see Retry-After"),
            "headers": {"Retry-After": {"schema": {"type": "integer"}}},
        },
        503: json_error("The runs directory cannot be written"),
    },
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {
                "application/json": {"schema": _REQUEST_SCHEMA},
                "multipart/form-data": {"schema": _FORM_SCHEMA},
            },
        },
    },
)
async def train(request: Request, settings: SettingsDep) -> Response:
    """Train a model and stream `start`, `progress`, `snapshot`, `sample`, `done` or `error`.

    The text is the shipped corpus unless `text` (JSON or a form field) or a
    `file` (multipart) gives one; it is split 90/10 into train and validation.
    The finished model is saved under the runs directory and listed by the model
    registry under the name the `start` event gives.  Closing the connection
    stops the run and frees its CPU.
    """
    try:
        job = await read_train_request(request, settings)
    except UnreadableBody as exc:
        kind = "body_unparsable" if exc.status == 400 else "unsupported_media_type"
        return error_response(exc.status, ["body"], exc.message, kind)
    runs_dir = writable_runs_dir(settings)
    if runs_dir is None:
        return error_response(
            503,
            ["settings", "runs_dir"],
            f"the runs directory {settings.runs_path()} cannot be written; set "
            "ATTENTION_VIZ_RUNS_DIR to a writable directory (a volume in a container)",
            "runs_dir_not_writable",
        )
    slots = request.app.state.training_slots
    if not slots.try_acquire():
        return error_response(
            429,
            ["body"],
            f"this server is already running {slots.total} training run(s), its limit "
            f"(ATTENTION_VIZ_TRAIN_CONCURRENT); try again in {RETRY_AFTER_S} s",
            "too_many_runs",
            headers={"retry-after": str(RETRY_AFTER_S)},
        )
    deadline = run_deadline(settings)
    try:
        _, process = await start_run(job, runs_dir, settings)
    except BaseException:
        slots.release()
        raise
    return EventStreamResponse(
        relay(process, slots, settings, deadline), deadline=deadline + STALLED_GRACE_S
    )
