"""What a training run reports, as plain dataclasses: the loop knows no reader.

The web app turns them into Server-Sent Events and the CLI into a progress
bar.  Losses are mean cross-entropy in nats per character.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import TrainConfig


@dataclass(frozen=True)
class Start:
    """Sent once, before the first step: what is being trained, and the line to beat."""

    config: TrainConfig
    vocab_size: int
    parameters: int
    trainable_parameters: int
    frozen: tuple[str, ...]
    train_chars: int
    val_chars: int
    corpus_sha256: str
    baseline_val_loss: float  # the count bigram's, see corpus.bigram_baseline
    probe_tokens: tuple[str, ...]  # one character each


@dataclass(frozen=True)
class Progress:
    """After ``step`` optimizer updates.

    ``train_loss``: the last training batch's loss (None at step 0).
    ``val_loss``/``eval_train_loss``: estimates over ``eval_iters`` batches of
    each split, on steps where the run evaluates (else None).
    """

    step: int
    max_steps: int
    train_loss: float | None
    val_loss: float | None
    eval_train_loss: float | None
    learning_rate: float
    tokens_per_s: float | None
    elapsed_s: float
    eta_s: float | None


@dataclass(frozen=True)
class Snapshot:
    """The probe's attention after ``step`` updates: one (H, T, T) tensor per layer.

    Rows sum to 1; the upper triangle (the future) is 0.  ``scores``: each head-type score
    (``attention_core.analysis``) as (L, H), induction on the model at this step.
    """

    step: int
    attentions: tuple[torch.Tensor, ...]
    scores: dict[str, torch.Tensor] | None = None


@dataclass(frozen=True)
class Sample:
    """``text`` generated after the ``prompt`` by the model as it is at ``step``."""

    step: int
    prompt: str
    text: str


@dataclass(frozen=True)
class Done:
    """The run finished; ``directory`` is where it was saved (None if it was not)."""

    step: int
    val_loss: float
    eval_train_loss: float
    untrained_val_loss: float
    baseline_val_loss: float
    elapsed_s: float
    directory: str | None


Event = Start | Progress | Snapshot | Sample | Done
