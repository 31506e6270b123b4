"""Batches and loss estimates, as nanoGPT's ``train.py`` makes them."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..models.families.gpt2 import GPT2


def get_batch(
    data: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` windows at random offsets of ``data`` (N,): inputs and next-character targets.

    Shapes: x, y (batch_size, block_size); y is x shifted left by one.
    """
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = starts[:, None] + torch.arange(block_size + 1)  # (B, T + 1)
    windows = data[offsets]  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def language_model_loss(model: GPT2, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of next-character predictions.  Shapes: x, y (B, T) -> scalar."""
    logits = model(x).logits  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))  # (B*T, V)


@torch.no_grad()
def estimate_loss(
    model: GPT2,
    data: torch.Tensor,
    block_size: int,
    batch_size: int,
    eval_iters: int,
    seed: int,
) -> float:
    """Mean loss over ``eval_iters`` batches, in eval mode (no dropout).

    The batches come from a generator seeded with ``seed`` each time, so every
    estimate of a run is over the same windows: the curve shows the model
    changing, not the sample.
    """
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(eval_iters):
        x, y = get_batch(data, block_size, batch_size, generator)
        total += float(language_model_loss(model, x, y))
    model.train(was_training)
    return total / eval_iters


@torch.no_grad()
def sample_text(
    model: GPT2,
    prompt: torch.Tensor,
    length: int,
    temperature: float,
    seed: int,
    banned: int | None = None,
) -> list[int]:
    """``length`` ids sampled after ``prompt`` (T,), the context cut to the model's window.

    Uses its own seeded generator, so sampling never moves the training RNG.
    ``banned`` (the ``<unk>`` id, which no training text contains) is never drawn.
    """
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    window = model.config.n_positions
    ids = prompt.tolist()
    new: list[int] = []
    for _ in range(length):
        context = torch.tensor([ids[-window:]])  # (1, <= window)
        logits = model(context, num_logits=1).logits[0, -1]  # (V,)
        if banned is not None:
            logits[banned] = float("-inf")
        probs = torch.softmax(logits / temperature, dim=-1)
        next_id = int(torch.multinomial(probs, 1, generator=generator))
        ids.append(next_id)
        new.append(next_id)
    model.train(was_training)
    return new
