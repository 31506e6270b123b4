"""A ``POST /api/train`` body (JSON or multipart) checked against the limits, as a job.

Everything a run could fail on early is checked here, before a process is
started: the settings (``TrainConfig`` raises ``SpecError`` naming the field),
the server's ``ATTENTION_VIZ_TRAIN_*`` limits (``LimitError``: field, size,
limit), the text (UTF-8, not empty, long enough for ``block_size``, not too
many distinct characters) and the probe (short enough, only characters of
the text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from attention_core import SpecError
from attention_core.errors import EMPTY_INPUT
from attention_core.training import (
    TRAINING_PRESETS,
    TRAINING_SETTINGS,
    TrainConfig,
    default_text,
    min_text_chars,
    parameter_count,
    preset_config,
)

from ..errors import validation_item
from ..limits import LimitError, over_limit
from ..schemas.train import TrainRequest
from ..settings import Settings

SHIPPED_CORPUS = "bank_stories.txt"
MAX_FORM_FIELDS = 40


class UnreadableBody(ValueError):
    """The body cannot be read at all: malformed (400) or of a type not accepted (415)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class TrainJob:
    """A checked run: its config (sizes filled in from the preset) and its text (None: shipped)."""

    config: TrainConfig
    text: str | None
    source: str  # "shipped corpus", "pasted text" or "uploaded file <name>"


async def read_train_request(request: Request, settings: Settings) -> TrainJob:
    """Parse, validate and bound the body; raise ``RequestValidationError``-shaped errors."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    upload: tuple[str, bytes] | None = None
    if content_type == "multipart/form-data":
        fields, upload = await _read_form(request, settings)
    elif content_type in ("application/json", ""):
        fields = await _read_json(request)
    else:
        raise UnreadableBody(
            415,
            f"content-type {content_type[:60]!r} is not accepted; send application/json or "
            "multipart/form-data",
        )
    try:
        body = TrainRequest.model_validate(fields)
    except ValidationError as exc:
        first = validation_item(exc.errors()[0], ["body"])
        raise LimitError(
            first["loc"], first["msg"], kind=first["type"], ctx=first.get("ctx")
        ) from None

    text, source = _text_of(body, upload, settings)
    return TrainJob(_config_of(body, text, settings), text, source)


async def _read_json(request: Request) -> dict[str, Any]:
    try:
        raw = await request.json()
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableBody(400, f"the body is not UTF-8 JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise LimitError(["body"], "the body must be a JSON object of training settings")
    return raw


async def _read_form(
    request: Request, settings: Settings
) -> tuple[dict[str, Any], tuple[str, bytes] | None]:
    try:
        form = await request.form(
            max_files=1,
            max_fields=MAX_FORM_FIELDS,
            max_part_size=settings.train_max_text_bytes + 1,
        )
    except HTTPException as exc:  # Starlette's MultiPartException, as a 400
        raise UnreadableBody(400, f"the multipart body could not be read ({exc.detail})") from None
    fields: dict[str, Any] = {}
    upload = None
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            if key != "file":
                raise LimitError(
                    ["body", key], f"upload the text as the part named 'file', not {key!r}"
                )
            data = await value.read(settings.train_max_text_bytes + 1)
            upload = (value.filename or "file", data)
        else:
            fields[key] = value
    await form.close()
    # An empty form field means "not given" (an HTML form sends every input).
    return {k: v for k, v in fields.items() if v != "" or k == "text"}, upload


def _text_of(
    body: TrainRequest, upload: tuple[str, bytes] | None, settings: Settings
) -> tuple[str | None, str]:
    limit = settings.train_max_text_bytes
    env = "ATTENTION_VIZ_TRAIN_MAX_TEXT_BYTES"
    if upload is not None:
        if body.text is not None:
            raise LimitError(["body", "text"], "give the text or upload a file, not both")
        filename, data = upload
        if len(data) > limit:
            raise over_limit(
                ["body", "file"],
                f"the file is more than {limit} bytes; the limit is {limit} ({env})",
                limit=limit,
                found=len(data),
                setting=env,
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LimitError(
                ["body", "file"],
                f"the file {filename[:60]!r} is not UTF-8 text: byte 0x{data[exc.start]:02x} at "
                f"offset {exc.start} ({exc.reason})",
            ) from None
        return _checked_text(text, "file", settings), f"uploaded file {filename[:100]}"
    if body.text is None:
        return None, "shipped corpus"
    size = len(body.text.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        message = f"text is {size} bytes; the limit is {limit} ({env})"
        raise over_limit(["body", "text"], message, limit=limit, found=size, setting=env)
    return _checked_text(body.text, "text", settings), "pasted text"


def _checked_text(text: str, field: str, settings: Settings) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, from a JSON escape such as \ud800
        raise LimitError(
            ["body", field], f"{field} is not valid Unicode: {exc.reason} at character {exc.start}"
        ) from None
    if not text.strip():
        raise LimitError(
            ["body", field], f"{field} is empty; give some text to train on", kind=EMPTY_INPUT
        )
    distinct = len(set(text))
    if distinct > settings.train_max_vocabulary:
        raise over_limit(
            ["body", field],
            f"{field} has {distinct} distinct characters; the limit is "
            f"{settings.train_max_vocabulary} (ATTENTION_VIZ_TRAIN_MAX_VOCABULARY)",
            limit=settings.train_max_vocabulary,
            found=distinct,
            setting="ATTENTION_VIZ_TRAIN_MAX_VOCABULARY",
        )
    return text


def _config_of(body: TrainRequest, text: str | None, settings: Settings) -> TrainConfig:
    preset = TRAINING_PRESETS[body.architecture]
    given = {
        name: getattr(body, name) for name in TRAINING_SETTINGS if getattr(body, name) is not None
    }
    _check_limits(preset, given, settings)
    corpus = default_text() if text is None else text
    try:
        config = preset_config(body.architecture, given, text)
    except SpecError as exc:
        raise LimitError(
            ["body", exc.field or "body"], exc.message, kind=exc.kind, ctx=exc.ctx
        ) from None

    where = "file" if text is not None and body.text is None else "text"
    _check_corpus(config, corpus, where)
    _check_model_size(config, len(set(corpus)) + 1, settings)
    return config


def _check_corpus(config: TrainConfig, corpus: str, where: str) -> None:
    """Long enough for the blocks, and holding every character of the probe."""
    needed = min_text_chars(config.block_size)
    if len(corpus) < needed:
        raise LimitError(
            ["body", where],
            f"{where} is {len(corpus)} characters; with block_size {config.block_size} it "
            f"must be at least {needed} (train and validation each need block_size + 1)",
            kind="text_too_short",
            ctx={"minimum": needed, "found": len(corpus), "block_size": config.block_size},
        )
    unknown = sorted(set(config.probe) - set(corpus))
    if unknown:
        raise LimitError(
            ["body", "probe"],
            f"probe has characters the training text does not: "
            f"{', '.join(repr(c) for c in unknown[:10])}",
        )


def _check_model_size(config: TrainConfig, vocab_size: int, settings: Settings) -> None:
    """The parameters and the attention cells a step holds, within the server's limits."""
    parameters = parameter_count(config, vocab_size)
    if parameters > settings.train_max_parameters:
        raise over_limit(
            ["body", "n_embd"],
            f"the model would have {parameters} parameters (n_layer {config.effective_layers}, "
            f"n_embd {config.n_embd}, vocabulary {vocab_size}, block_size {config.block_size}); "
            f"the limit is {settings.train_max_parameters} (ATTENTION_VIZ_TRAIN_MAX_PARAMETERS)",
            limit=settings.train_max_parameters,
            found=parameters,
            setting="ATTENTION_VIZ_TRAIN_MAX_PARAMETERS",
        )
    cells = (
        config.batch_size
        * config.effective_heads
        * config.block_size**2
        * max(config.effective_layers, 1)
    )
    if cells > settings.train_max_attention_cells:
        raise over_limit(
            ["body", "batch_size"],
            f"batch_size × n_head × block_size² × n_layer is {cells}; the limit is "
            f"{settings.train_max_attention_cells} (ATTENTION_VIZ_TRAIN_MAX_ATTENTION_CELLS)",
            limit=settings.train_max_attention_cells,
            found=cells,
            setting="ATTENTION_VIZ_TRAIN_MAX_ATTENTION_CELLS",
        )


def _check_limits(preset: TrainConfig, given: dict[str, Any], settings: Settings) -> None:
    bounds = {
        "n_layer": (settings.train_max_layers, "TRAIN_MAX_LAYERS"),
        "n_head": (settings.max_heads, "MAX_HEADS"),
        "n_embd": (settings.train_max_embd, "TRAIN_MAX_EMBD"),
        "block_size": (settings.train_max_block_size, "TRAIN_MAX_BLOCK_SIZE"),
        "batch_size": (settings.train_max_batch_size, "TRAIN_MAX_BATCH_SIZE"),
        "max_steps": (settings.train_max_steps, "TRAIN_MAX_STEPS"),
    }
    for name, (limit, env) in bounds.items():
        value = given.get(name, getattr(preset, name))
        if value > limit:
            setting = f"ATTENTION_VIZ_{env}"
            message = f"{name} is {value}; the limit is {limit} ({setting})"
            raise over_limit(["body", name], message, limit=limit, found=value, setting=setting)
