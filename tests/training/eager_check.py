"""A trained model against transformers' GPT-2 on the same checkpoint (test_architectures,
test_shipped_model)."""

from __future__ import annotations

import torch


def same_as_eager(model: torch.nn.Module, reference: torch.nn.Module, ids: torch.Tensor) -> None:
    """Our model's logits and attention maps on ``ids`` equal transformers' (eager) to 1e-5."""
    with torch.inference_mode():
        ours = model(ids, output_attentions=True)
        theirs = reference(ids, output_attentions=True)
    torch.testing.assert_close(ours.logits, theirs.logits, atol=1e-5, rtol=1e-5)
    for a, b in zip(ours.attentions, theirs.attentions, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
