"""``HeadModel``s of the transformers backend (issue 19): its decoders and encoders.

A transformers-backed decoder is the package's ``Decoder`` over a
``TransformersLM``: ``DecoderHeadModel`` applies once it is given the
transformers module (the output projections, blocks and final norm are found
by transformers' own names, see ``access``), with the unembedding from
``get_output_embeddings()`` and Gemma's final logit soft-capping.  An encoder
(``TransformersEncoder``: RoBERTa and kin) is run by transformers inside
``editing``, with the same hooks on its output projections, held for the run.

Imported only when a model of the backend is loaded (it imports transformers).
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from ..errors import SpecError
from ..models.base.out_projections import head_slices, output_projections
from ..models.base.protocols import TextModel
from ..models.hf.language_model import TransformersLM
from ..models.hf.text_models import TransformersEncoder
from ..models.maps.blocked_pass import BlockedPass
from ..models.maps.context_pass import context_only
from ..models.text.decoder import Decoder
from .access import (
    ContextEdit,
    DecoderHeadModel,
    RunOutput,
    TextModelTokens,
    editing,
)


class TransformersDecoderHeadModel(DecoderHeadModel):
    """``DecoderHeadModel`` of a ``Decoder`` whose model is a ``TransformersLM``.  Not every
    transformers block broadcasts its residual (Falcon adds the attention in place)."""

    residual_broadcasts = False

    def __init__(self, decoder: Decoder, lm: TransformersLM) -> None:
        text = cast(Any, lm.model).config.get_text_config()
        cap = getattr(text, "final_logit_softcapping", None)
        self.final_softcap: float | None = float(cap) if cap else None
        super().__init__(decoder, lm.model)

    def _lm_head(self) -> nn.Module:
        head = self.module.get_output_embeddings()  # type: ignore[operator]
        if not isinstance(head, nn.Module):
            raise SpecError("this model has no language-modelling head", field="model")
        return head

    def unembed(self, hidden: torch.Tensor) -> torch.Tensor:
        """As transformers' causal LM: the head, then (Gemma 2) cap · tanh(logits / cap)."""
        logits = super().unembed(hidden)
        if self.final_softcap is not None:
            logits = torch.tanh(logits / self.final_softcap) * self.final_softcap
        return logits


class TransformersEncoderHeadModel(TextModelTokens):
    """``HeadModel`` of a ``TransformersEncoder`` (single texts; sentence embedding: the mean
    of the last layer's states, as for the hand-written BERT family)."""

    causal = False

    def __init__(self, encoder: TransformersEncoder) -> None:
        super().__init__(encoder)
        self.encoder = encoder
        module = encoder.model.model
        self.projections = output_projections(module, self.num_layers)

    def run(
        self,
        ids: torch.Tensor,
        *,
        attentions: bool = False,
        edit: ContextEdit | None = None,
        blocked: BlockedPass | None = None,
    ) -> RunOutput:
        with editing(self.projections, (), edit):
            out = self.encoder.model(
                ids,
                output_attentions=attentions,
                output_hidden_states=True,
                blocked=context_only(attentions, blocked),
            )
        return RunOutput(out.attentions, out.hidden_states)

    def out_weights(self, layer: int) -> torch.Tensor:
        return head_slices(self.projections[layer], self.num_heads, self.head_dim)


def transformers_head_model(
    model: TextModel,
) -> TransformersDecoderHeadModel | TransformersEncoderHeadModel | None:
    """The ``HeadModel`` of a transformers-backed decoder or encoder; None for any other."""
    if isinstance(model, Decoder) and isinstance(model.model, TransformersLM):
        return TransformersDecoderHeadModel(model, model.model)
    if isinstance(model, TransformersEncoder):
        return TransformersEncoderHeadModel(model)
    return None
