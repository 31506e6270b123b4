"""An encoder-decoder's two stacks without its LM head: what every map and analysis reads.

The maps, the head traces, the induction sums, the ablation and the logit lens read
the stacks' attention calls and hidden states, never the model's logits; a full
forward would also make the target's logits, target × vocabulary floats (1 GB for
1,024 target tokens of mBART's 250,027 words; per batch row in an ablation's batch),
only to drop them.  The analyses unembed the states they need a bounded block at a
time (``analysis.unembedding``).

BART, Marian, LED... have a headless model (``base_model``: ``BartModel``).  The T5
family's LM class is its own base: its encoder and decoder stacks are called as its
forward calls them (the decoder reading the encoder's last state).
"""

from __future__ import annotations

from typing import Any

import torch


def stacks_forward(
    model: Any,
    source_ids: torch.Tensor,
    decoder_ids: torch.Tensor,
    hidden_states: bool,
    keywords: dict[str, Any],
) -> Any:
    """``model``'s encoder over ``source_ids`` (B, S) and decoder over ``decoder_ids`` (B, T),
    no cache, no LM head: an output with ``encoder_last_hidden_state`` and, with
    ``hidden_states``, ``encoder_hidden_states`` and ``decoder_hidden_states``."""
    base = model.base_model
    if base is not model:
        return base(
            input_ids=source_ids,
            decoder_input_ids=decoder_ids,
            output_hidden_states=hidden_states,
            use_cache=False,
            **keywords,
        )
    from transformers.modeling_outputs import Seq2SeqModelOutput

    encoded = model.get_encoder()(
        input_ids=source_ids, output_hidden_states=hidden_states, **keywords
    )
    decoded = model.get_decoder()(
        input_ids=decoder_ids,
        encoder_hidden_states=encoded.last_hidden_state,
        output_hidden_states=hidden_states,
        use_cache=False,
        **keywords,
    )
    return Seq2SeqModelOutput(
        last_hidden_state=decoded.last_hidden_state,
        decoder_hidden_states=decoded.hidden_states,
        encoder_last_hidden_state=encoded.last_hidden_state,
        encoder_hidden_states=encoded.hidden_states,
    )
