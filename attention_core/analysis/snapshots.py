"""Head scores of a model being trained, for the snapshots of its probe text.

The probe's own maps give the previous-token, duplicate-token, first-token
and entropy scores; induction is measured on a seeded block of R random
token ids (R = ``min(32, context // 2)``), seen twice, through the model as
it is at that step.  Torch's global RNG is not touched, so a run's losses do
not change when its snapshots are scored.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..models.families.gpt2 import GPT2
from .scores import induction_score, text_scores
from .scoring import DEFAULT_INDUCTION_LENGTH


def training_scores(
    model: GPT2,
    attentions: Sequence[torch.Tensor],
    probe: Sequence[int],
    ordinary: int,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """Each score (L, H) for the probe's maps ``attentions`` (L x (H, T, T)); induction on
    ids drawn from ``range(ordinary)`` (the vocabulary without its special ids)."""
    scores = text_scores(attentions, probe)
    R = min(DEFAULT_INDUCTION_LENGTH, model.config.n_positions // 2, ordinary)
    if R < 2:
        return scores
    block = torch.randperm(ordinary, generator=torch.Generator().manual_seed(seed))[:R]
    ids = torch.cat([block, block])[None]  # (1, 2R)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        maps = model(ids, output_attentions=True, num_logits=0).attentions
    model.train(was_training)
    scores["induction"] = induction_score(torch.stack([a[0] for a in maps]), 0, R)
    return scores
