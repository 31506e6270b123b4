"""The body of ``POST /api/train`` and the events it streams back.

Every setting is optional: an architecture's preset (``GET /api/train/presets``)
fills what is not given.  The same fields come as JSON or as
``multipart/form-data`` form fields (then the text may be an uploaded
``file``).  The sizes are bounded twice: here by what is never sensible, and
by the server's ``ATTENTION_VIZ_TRAIN_*`` limits (``app/training/request.py``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from . import examples
from .attention import MAX_SEED

Architecture = Literal["bigram", "average", "single_head", "multi_head", "gpt"]


class TrainRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples.TRAIN)

    architecture: Architecture = Field(
        "gpt", description="a step of the tutorials' ladder (see GET /api/train/presets)"
    )
    n_layer: int | None = Field(None, ge=0, le=1000)
    n_head: int | None = Field(None, ge=1, le=1000)
    n_embd: int | None = Field(None, ge=1, le=100_000)
    block_size: int | None = Field(None, ge=1, le=100_000)
    batch_size: int | None = Field(None, ge=1, le=100_000)
    max_steps: int | None = Field(None, ge=1, le=10_000_000)
    learning_rate: float | None = Field(None, gt=0, le=1)
    dropout: float | None = Field(None, ge=0, lt=1)
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    eval_every: int | None = Field(None, ge=0, le=10_000_000)
    eval_iters: int | None = Field(None, ge=1, le=200)
    snapshot_every: int | None = Field(None, ge=0, le=10_000_000)
    sample_chars: int | None = Field(None, ge=0, le=500)
    probe: str | None = Field(
        None,
        min_length=1,
        description="text whose attention every snapshot records (at most block_size "
        "characters, all of them in the training text); default: a sentence of the text",
    )
    text: str | None = Field(
        None,
        description="the training text (default: the shipped corpus of river and money "
        "banks); in a multipart body it may instead be an uploaded `file`",
    )


class TrainLadder(BaseModel):
    """Each step of the ladder's settings, and this server's limits (the API's and the page's)."""

    presets: dict[str, dict[str, object]]
    fixed: dict[str, dict[str, int]] = Field(
        description="what each step of the ladder fixes, whatever its settings say"
    )
    default_probe: str
    limits: dict[str, int | float]


class TrainPresets(TrainLadder):
    """What the /train page offers: the ladder, each step's settings, and this server's limits."""

    architectures: dict[str, str]


# The events of the stream, documented for the OpenAPI page (the route streams them as SSE).
EVENT_DOCS = """\
`text/event-stream`, one event per message (`event: <name>` then `data: <JSON>`); the
schema below is that of one message, `TrainEventMessage` (`data` is sent as JSON text):

- `start`: `name` (the model's name once saved), `config` (the settings used), `vocab_size`,
  `parameters`, `trainable_parameters`, `fixed_at_zero`, `train_chars`, `val_chars`,
  `baseline_val_loss` (the count bigram's val loss: the line to beat), `probe_tokens`.
- `progress`: `step`, `max_steps`, `train_loss` (last batch), `val_loss` and
  `eval_train_loss` (estimates, on evaluation steps, else null), `learning_rate`,
  `tokens_per_s`, `elapsed_s`, `eta_s`.
- `snapshot`: `step` and `attention`, the probe's weights for every layer and head as one
  compact uint8 tensor of shape (layers, heads, T, T) (as `/api/model/attention` sends them);
  `scores`: each head-type score of `/api/model/head-scores` as layers × heads (the probe's
  maps; induction on a seeded random block seen twice, through the model at that step).
- `sample`: `step`, `prompt`, `text` (a continuation of the probe).
- `done`: `name`, `model_url` (its `/model` page), `val_loss`, `train_loss`,
  `untrained_val_loss`, `baseline_val_loss`, `elapsed_s`.
- `error`: `detail`, as in every 4xx body.

Closing the connection stops the run (its process is killed; nothing is saved).
"""
