"""What every model's forward pass over one text gives the maps: attentions and what follows.

Both families' results (``bert.EncoderOutput``, ``text_model_base.DecoderMaps``) carry
per-layer attentions and hidden states without the batch axis; ``MapFeatures``
derives the stacked tensors, head averages and rollout from them, once, on
first use.
"""

from __future__ import annotations

from functools import cached_property
from typing import Protocol

import torch

from .features import attention_rollout, head_average


class MapFeatures:
    """Mixin for a frozen dataclass with ``layer_attentions`` and ``layer_hidden_states``.

    Shapes: ``layer_attentions[l]`` (H, T, T), rows = the attending token,
    summing to 1; ``layer_hidden_states[l]`` (T, hidden), index 0 = the
    embedding output, index l = the output of layer l.
    """

    layer_attentions: tuple[torch.Tensor, ...]
    layer_hidden_states: tuple[torch.Tensor, ...]

    @cached_property
    def attentions(self) -> torch.Tensor:
        """(L, H, T, T), stacked on first use (per-layer views need no copy)."""
        return torch.stack(self.layer_attentions)

    @cached_property
    def hidden_states(self) -> torch.Tensor:
        """(L+1, T, hidden)."""
        return torch.stack(self.layer_hidden_states)

    @cached_property
    def head_averages(self) -> torch.Tensor:
        """(L, T, T): each layer's mean over heads."""
        return torch.stack([head_average(a) for a in self.layer_attentions])

    @cached_property
    def rollout(self) -> torch.Tensor:
        """(L, T, T): attention rollout after each layer (see ``features.attention_rollout``)."""
        return attention_rollout(self.layer_attentions)

    @property
    def nbytes(self) -> int:
        """Bytes held, counting stacked copies made so far by the properties above."""
        tensors = [*self.layer_attentions, *self.layer_hidden_states]
        tensors += [v for v in self.__dict__.values() if isinstance(v, torch.Tensor)]
        return sum(t.numel() * t.element_size() for t in tensors)


class TokenizedLike(Protocol):
    """A tokenized text as any family gives it."""

    @property
    def tokens(self) -> tuple[str, ...]: ...
    @property
    def special(self) -> tuple[bool, ...]: ...


class OfTokenized:
    """Mixin for a result of one ``tokenized`` text: its tokens and special flags come from it."""

    tokenized: TokenizedLike

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.tokenized.tokens

    @property
    def special(self) -> tuple[bool, ...]:
        return self.tokenized.special


class TokenizedMaps(OfTokenized, MapFeatures):
    """``MapFeatures`` of one ``tokenized`` text."""


class ModelMaps(Protocol):
    """One text through any model, as the API shows it."""

    @property
    def tokens(self) -> tuple[str, ...]: ...
    @property
    def special(self) -> tuple[bool, ...]: ...
    @property
    def token_type_ids(self) -> tuple[int, ...]: ...
    @property
    def layer_attentions(self) -> tuple[torch.Tensor, ...]: ...
    @property
    def layer_hidden_states(self) -> tuple[torch.Tensor, ...]: ...
    @property
    def head_averages(self) -> torch.Tensor: ...
    @property
    def rollout(self) -> torch.Tensor: ...
