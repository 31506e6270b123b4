"""The training loop, as nanoGPT's ``train.py`` writes it, as a generator of events.

``train(config, text)`` yields a ``Start``, then after every step a
``Progress`` (with loss estimates every ``eval_every`` steps), a ``Snapshot``
of the probe's attention every ``snapshot_every`` steps, a ``Sample`` at every
evaluation, and finally a ``Done``; it knows nothing of who reads them.
Stopping early is closing the generator.

Reproducible: the same config and text give the same losses, bit for bit, on
the same machine and torch version with the same thread count.  Torch's global
RNG (initialization, dropout) is seeded with ``config.seed`` and kept across
each ``yield``, so a reader that draws random numbers does not change the
run; batches, estimates and samples use their own seeded generators.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..analysis.snapshots import training_scores
from ..models.families.gpt2 import GPT2
from .architectures import BuiltModel, build_model, trainable_parameters
from .batches import estimate_loss, get_batch, language_model_loss, sample_text
from .checkpoint import save_run
from .config import TrainConfig
from .corpus import Corpus, bigram_baseline, default_text, make_corpus
from .events import Done, Event, Progress, Sample, Snapshot, Start

# Seed offsets of the run's own generators, so that none shares a stream.
_EVAL_SEED, _SAMPLE_SEED = 1, 2


def learning_rate_at(step: int, config: TrainConfig) -> float:
    """nanoGPT's schedule: linear warmup, then cosine decay to ``final_learning_rate``."""
    top, bottom = config.learning_rate, config.final_learning_rate
    if step < config.warmup_steps:
        return top * (step + 1) / (config.warmup_steps + 1)
    span = max(config.max_steps - config.warmup_steps, 1)
    ratio = min(max((step - config.warmup_steps) / span, 0.0), 1.0)
    return bottom + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (top - bottom)


def make_optimizer(model: GPT2, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (nanoGPT's ``configure_optimizers``).

    Tensors fixed at zero (``requires_grad=False``) are not handed to it at all.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=config.learning_rate, betas=(config.beta1, config.beta2), foreach=True
    )


def _keeping_rng(event: Event) -> Iterator[Event]:
    """Yield ``event`` with torch's global RNG state kept across the pause."""
    state = torch.get_rng_state()
    yield event
    torch.set_rng_state(state)


def _probe_attention(model: GPT2, probe: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """One (H, T, T) tensor per layer for the probe (T,), in eval mode."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(probe[None], output_attentions=True, num_logits=0)
    model.train(was_training)
    return tuple(a[0].clone() for a in out.attentions)


@dataclass
class _Run:
    """What a run is made of, set up once: the data, the model and its optimizer."""

    config: TrainConfig
    corpus: Corpus
    probe: torch.Tensor  # (T,)
    built: BuiltModel
    model: GPT2
    optimizer: torch.optim.AdamW
    batches: torch.Generator
    baseline: float


@dataclass
class _Losses:
    """The losses so far: the last batch's, the last estimates, the untrained one."""

    train_loss: float | None = None
    untrained_val: float = math.nan
    val_loss: float = math.nan
    eval_train: float = math.nan
    history: list[dict[str, float | int | None]] = field(default_factory=list)


def _set_up(config: TrainConfig, text: str | None) -> _Run:
    corpus = make_corpus(default_text() if text is None else text, config.block_size)
    probe = corpus.vocabulary.encode(config.probe, field="probe")
    torch.manual_seed(config.seed)
    built = build_model(config, corpus.vocabulary.size)
    model = built.model.train()
    optimizer = make_optimizer(model, config)
    batches = torch.Generator().manual_seed(config.seed)
    return _Run(config, corpus, probe, built, model, optimizer, batches, bigram_baseline(corpus))


def _start(run: _Run) -> Start:
    model, corpus = run.model, run.corpus
    return Start(
        config=run.config.effective(),
        vocab_size=corpus.vocabulary.size,
        parameters=sum(p.numel() for p in model.parameters()),
        trainable_parameters=sum(p.numel() for p in trainable_parameters(run.built)),
        frozen=run.built.frozen + run.built.masked,
        train_chars=len(corpus.train),
        val_chars=len(corpus.val),
        corpus_sha256=corpus.sha256,
        baseline_val_loss=run.baseline,
        probe_tokens=tuple(run.config.probe),
    )


def _evaluate(run: _Run, losses: _Losses, step: int) -> None:
    """Estimate the validation and training losses; the first is the untrained one."""
    config = run.config
    seed = config.seed + _EVAL_SEED
    B, T = config.batch_size, config.block_size
    losses.val_loss = estimate_loss(run.model, run.corpus.val, T, B, config.eval_iters, seed)
    losses.eval_train = estimate_loss(run.model, run.corpus.train, T, B, config.eval_iters, seed)
    if step == 0:
        losses.untrained_val = losses.val_loss
    losses.history.append(
        {
            "step": step,
            "train_loss": losses.eval_train,
            "val_loss": losses.val_loss,
            "batch": losses.train_loss,
        }
    )


def _progress(run: _Run, losses: _Losses, step: int, evaluating: bool, elapsed: float) -> Progress:
    config = run.config
    per_step = elapsed / step if step else None
    return Progress(
        step=step,
        max_steps=config.max_steps,
        train_loss=losses.train_loss,
        val_loss=losses.val_loss if evaluating else None,
        eval_train_loss=losses.eval_train if evaluating else None,
        learning_rate=learning_rate_at(min(step, config.max_steps - 1), config),
        tokens_per_s=config.batch_size * config.block_size / per_step if per_step else None,
        elapsed_s=elapsed,
        eta_s=per_step * (config.max_steps - step) if per_step is not None else None,
    )


def _probe_events(run: _Run, step: int, evaluating: bool) -> Iterator[Event]:
    """The probe's attention (on the first and last step and every ``snapshot_every``)
    and, at an evaluation, a sample written from it."""
    config, model, vocabulary = run.config, run.model, run.corpus.vocabulary
    last = step == config.max_steps
    snapshot_due = config.snapshot_every and step % config.snapshot_every == 0
    if model.config.n_layer and (last or step == 0 or snapshot_due):
        maps = _probe_attention(model, run.probe)
        scores = training_scores(model, maps, run.probe.tolist(), vocabulary.unknown_id)
        yield from _keeping_rng(Snapshot(step, maps, scores))
    if evaluating and config.sample_chars:
        ids = sample_text(
            model,
            run.probe,
            config.sample_chars,
            config.sample_temperature,
            config.seed + _SAMPLE_SEED + step,
            banned=vocabulary.unknown_id,
        )
        yield from _keeping_rng(Sample(step, config.probe, vocabulary.decode(ids)))


def _step(run: _Run, step: int) -> float:
    """One optimizer step on a fresh batch; its loss."""
    config = run.config
    for group in run.optimizer.param_groups:
        group["lr"] = learning_rate_at(step, config)
    x, y = get_batch(run.corpus.train, config.block_size, config.batch_size, run.batches)
    loss = language_model_loss(run.model, x, y)
    run.optimizer.zero_grad(set_to_none=True)
    torch.autograd.backward(loss)  # loss.backward(), which torch leaves untyped
    if config.grad_clip:
        torch.nn.utils.clip_grad_norm_(trainable_parameters(run.built), config.grad_clip)
    run.optimizer.step()
    return float(loss.detach())


def _training_record(run: _Run, losses: _Losses, step: int, elapsed: float) -> dict[str, Any]:
    """What ``training.json`` says of the run."""
    config, built, corpus = run.config, run.built, run.corpus
    return {
        "architecture": config.architecture,
        "config": config.effective().to_dict(),
        "fixed_at_zero": list(built.frozen),
        "fixed_at_zero_in_part": {name: "query and key columns" for name in built.masked},
        "vocab_size": corpus.vocabulary.size,
        "parameters": sum(p.numel() for p in run.model.parameters()),
        "corpus": {
            "sha256": corpus.sha256,
            "characters": len(corpus.text),
            "train_characters": len(corpus.train),
            "val_characters": len(corpus.val),
        },
        "steps": step,
        "val_loss": losses.val_loss,
        "train_loss": losses.eval_train,
        "untrained_val_loss": losses.untrained_val,
        "baseline_val_loss": run.baseline,
        "elapsed_s": round(elapsed, 3),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "history": losses.history,
    }


def train(
    config: TrainConfig,
    text: str | None = None,
    *,
    save_to: Path | None = None,
    run_info: dict[str, Any] | None = None,
) -> Iterator[Event]:
    """Train ``config`` on ``text`` (default: the shipped corpus), yielding events.

    With ``save_to``, the finished run is written there (``checkpoint.save_run``)
    before ``Done``; ``run_info`` is added to its ``training.json``.
    """
    run = _set_up(config, text)
    yield from _keeping_rng(_start(run))
    started = time.perf_counter()
    losses = _Losses()
    step = 0
    while True:
        last = step == config.max_steps
        evaluating = last or step == 0 or bool(config.eval_every and step % config.eval_every == 0)
        if evaluating:
            _evaluate(run, losses, step)
        elapsed = time.perf_counter() - started
        yield from _keeping_rng(_progress(run, losses, step, evaluating, elapsed))
        yield from _probe_events(run, step, evaluating)
        if last:
            break
        losses.train_loss = _step(run, step)
        step += 1

    elapsed = time.perf_counter() - started
    directory = None
    if save_to is not None:
        run.model.eval()
        training = {**_training_record(run, losses, step, elapsed), **(run_info or {})}
        directory = str(save_run(Path(save_to), run.model, run.corpus.vocabulary, training))
    yield Done(
        step=step,
        val_loss=losses.val_loss,
        eval_train_loss=losses.eval_train,
        untrained_val_loss=losses.untrained_val,
        baseline_val_loss=run.baseline,
        elapsed_s=elapsed,
        directory=directory,
    )
