"""Head ablation and the logit lens of an encoder-decoder (T5, BART, Marian), on its decoder.

What an encoder-decoder predicts is the target: decoder position i (its input is
the start token, then the target's tokens, shifted right) predicts the target's
token i (``labels``).  So both analyses read the decoder's predictions:

- ablation: any stack's heads (the encoder's, the decoder's self-attention or the
  cross-attention) have their context vectors zeroed (or set to their mean over
  positions) just before their output projection, and the decoder's predictions
  of the target are compared before and after (``ablation.Predictions``: the
  log-probability of each target token, the top tokens; the loss their negative
  mean).  ``each_head`` ablates every head of one stack on its own, the
  ablations as the batch of a few forward passes.
- the logit lens: the decoder's residual stream after each layer through its final
  norm (T5's, mBART's; BART's and Marian's decoders have none) and the LM head
  (with Marian's and BART's ``final_logits_bias``, T5's rescaling of tied
  embeddings).  The encoder's states are never read by the LM head (only by the
  cross-attention): its lens has no meaning, and is refused with the reason.

Every forward holds no map (a ``ContextPass``: each attention's context block by
block).  The edits are forward pre-hooks on the output projections, installed for
one forward and acting on the calling thread's calls only (``access.editing``: other
requests may run the same model at the same time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from ..errors import SpecError
from ..models.base.capabilities import StackName
from ..models.hf.capture import AttentionRun
from ..models.hf.seq2seq import EncoderDecoder, TargetText
from ..models.maps.context_pass import ContextPass
from .ablation import (
    BATCH_CELLS,
    Ablation,
    Predictions,
    ablation_cost,
    block_predictions,
    check_heads,
    masked_edit,
)
from .access import editing
from .logit_lens import LENS_TOP_K, LogitLens
from .unembedding import logit_blocks

FINAL_NORMS = ("model.decoder.layer_norm", "decoder.final_layer_norm")

HeadMasks = Mapping[tuple[StackName, int], torch.Tensor]
"""(stack, layer) -> (B, H): the heads ablated in each batch row."""


@dataclass(frozen=True)
class Seq2SeqText:
    """A source and a target as the model reads them: the source's ids, the decoder's
    input (start token, then the target's tokens but the last) and the labels."""

    source: tuple[int, ...]
    target: TargetText

    @property
    def labels(self) -> torch.Tensor:
        """(T,) the target's ids, what each decoder position predicts (none without one)."""
        return torch.tensor(self.target.labels, dtype=torch.long)


def read(
    model: EncoderDecoder, text: str, target: str | None, what: str | None = None
) -> Seq2SeqText:
    """``text`` (the source) and ``target``, tokenized; ``what``, when named, needs a target
    (without one the decoder reads its start token alone)."""
    if target is None and what is not None:
        raise SpecError(
            f"{what} of an encoder-decoder scores its predictions of the target: give "
            "target (the decoder's text), e.g. a translation of text",
            field="target",
        )
    return Seq2SeqText(model.tokenize(text).input_ids, model.target_text(target))


def check_stack_heads(
    model: EncoderDecoder, stack: StackName, heads: Sequence[Sequence[int]]
) -> None:
    """0-based (layer, head) pairs of ``stack``: a ``SpecError`` on ``heads`` naming the first
    that does not exist."""
    check_heads(heads, model.layers_of(stack), model.info().heads)


# --- the forward --------------------------------------------------------------------------


def out_projection(model: EncoderDecoder, stack: StackName, layer: int) -> torch.nn.Module:
    _, module = model.layer_modules[(stack, layer)]
    found: torch.nn.Module = next(
        getattr(module, n) for n in ("out_proj", "o", "dense") if hasattr(module, n)
    )
    return found


def _ablating(model: EncoderDecoder, masks: HeadMasks, mode: str) -> AbstractContextManager[None]:
    """Within the block, this thread's forwards replace the flagged heads' contexts
    (``access.editing``'s pre-hooks on their output projections)."""
    keys = list(masks)
    heads = model.info().heads
    edits = [masked_edit({0: masks[key]}, heads, mode) for key in keys]

    def edit(index: int, context: torch.Tensor) -> torch.Tensor:
        return edits[index](0, context)

    projections = [out_projection(model, stack, layer) for stack, layer in keys]
    return editing(projections, [], edit if keys else None)


def seq2seq_forward(
    model: EncoderDecoder,
    text: Seq2SeqText,
    rows: int = 1,
    hooks: AbstractContextManager[None] | None = None,
    blocked: ContextPass | None = None,
) -> Any:
    """The model's two stacks (no LM head: logits are read in blocks) over ``rows`` copies
    of ``text``, inside ``hooks`` (``access.editing``'s pre-hooks); no map held (``blocked``,
    a ``ContextPass``: each context fused or block by block).  Its output has both stacks'
    hidden states."""
    source = torch.tensor([text.source]).expand(rows, -1)
    decoder_input = torch.tensor([text.target.input_ids]).expand(rows, -1)
    run = AttentionRun(blocked=blocked or ContextPass())
    with hooks or nullcontext():
        return model.stacks_with(run, source, decoder_input, hidden_states=True)


def decoder_states(
    model: EncoderDecoder,
    text: Seq2SeqText,
    rows: int = 1,
    masks: HeadMasks | None = None,
    mode: str = "zero",
) -> tuple[torch.Tensor, ...]:
    """The decoder's hidden states (L + 1 of them, each (rows, T, C), the last after the final
    norm where the family has one) of ``rows`` copies of ``text``, ``masks``' heads ablated;
    no map held."""
    out = seq2seq_forward(model, text, rows, _ablating(model, masks or {}, mode))
    return tuple(out.decoder_hidden_states)


def final_norm(model: EncoderDecoder) -> torch.nn.Module | None:
    for name in FINAL_NORMS:
        try:
            found: torch.nn.Module = model.model.get_submodule(name)
            return found
        except AttributeError:
            continue
    return None


# The T5 family as transformers 4 wrote it: decoder states scaled by d_model**-0.5 before a
# tied LM head (MT5 left out: transformers 5 never scales it, and its checkpoints are untied).
_SCALED_WHEN_TIED = frozenset({"t5", "umt5", "longt5", "switch_transformers", "pop2piano"})


def decoder_output_scale(config: Any) -> float:
    """What the model's forward multiplies its final decoder states by before the LM head.

    transformers 5's T5 configs say it (``scale_decoder_outputs``: the saved
    ``tie_word_embeddings`` not false, while ``tie_word_embeddings`` itself is always
    true once loaded); older ones, and Switch Transformers, scale when tied.
    """
    scaled = getattr(config, "scale_decoder_outputs", None)
    if scaled is None:
        family = getattr(config, "model_type", None)
        scaled = family in _SCALED_WHEN_TIED and bool(config.tie_word_embeddings)
    return float(config.d_model) ** -0.5 if scaled else 1.0


def unembed(model: EncoderDecoder, states: torch.Tensor) -> torch.Tensor:
    """(..., C) final-normed decoder states -> (..., vocab) logits, as the model's head."""
    hf = model.model
    scale = decoder_output_scale(hf.config)
    if scale != 1.0:
        states = states * scale
    logits: torch.Tensor = hf.lm_head(states).float()
    bias = getattr(hf, "final_logits_bias", None)
    return logits if bias is None else logits + bias.float()


def predictions(model: EncoderDecoder, final: torch.Tensor, labels: torch.Tensor) -> Predictions:
    """final (T, C) decoder states -> each target token's log-probability (none without a
    target) and the top tokens."""
    vocabulary = int(model.model.config.vocab_size)
    blocks = logit_blocks(partial(unembed, model), vocabulary, final)
    return block_predictions(blocks, labels)


# --- the analyses ---------------------------------------------------------------------------


def ablate_stack(
    model: EncoderDecoder,
    text: Seq2SeqText,
    stack: StackName,
    chosen: Sequence[Sequence[int]],
    mode: str = "zero",
) -> Ablation:
    """``chosen`` (layer, head) pairs (0-based) of ``stack`` ablated together: the decoder's
    predictions of the target before and after (row 0 clean, row 1 ablated)."""
    check_stack_heads(model, stack, chosen)
    pairs = tuple((int(layer), int(head)) for layer, head in chosen)
    H = model.info().heads
    masks: dict[tuple[StackName, int], torch.Tensor] = {}
    for layer, head in pairs:
        mask = masks.setdefault((stack, layer), torch.zeros(2, H, dtype=torch.bool))
        mask[1, head] = True
    final = decoder_states(model, text, 2, masks, mode)[-1]
    labels = text.labels
    before, after = (predictions(model, final[row], labels) for row in (0, 1))
    return Ablation(pairs, mode, before, after, None)


def each_head_cost(model: EncoderDecoder, stack: StackName, text: Seq2SeqText) -> int:
    """What ``each_head_effects`` costs (its limit bounds it): the stack's layers × heads ×
    (source + target tokens)², every row a forward of both stacks."""
    tokens = len(text.source) + len(text.target)
    return ablation_cost(model.layers_of(stack), model.info().heads, tokens)


def each_head_effects(
    model: EncoderDecoder, text: Seq2SeqText, stack: StackName, mode: str = "zero"
) -> torch.Tensor:
    """(L, H) of ``stack``: the target's loss without that head − the loss with all."""
    L, H = model.layers_of(stack), model.info().heads
    pairs = [(layer, head) for layer in range(L) for head in range(H)]
    return heads_effects(model, text, stack, pairs, mode).view(L, H)


def heads_effects(
    model: EncoderDecoder,
    text: Seq2SeqText,
    stack: StackName,
    pairs: Sequence[tuple[int, int]],
    mode: str = "zero",
) -> torch.Tensor:
    """(k,): for each (layer, head) of ``stack`` (0-based) ablated alone, the target's loss
    without it − the loss with all; the ablations the batch of a few forward passes."""
    H = model.info().heads
    tokens = len(text.source) + len(text.target)
    per_pass = max(1, BATCH_CELLS // (H * tokens * tokens))
    rows = 1 + len(pairs)
    labels = text.labels
    losses: list[torch.Tensor] = []
    for first in range(0, rows, per_pass):
        count = min(per_pass, rows - first)
        masks: dict[tuple[StackName, int], torch.Tensor] = {}
        for b, row in enumerate(range(first, first + count)):
            if row:
                layer, head = pairs[row - 1]
                mask = masks.setdefault((stack, layer), torch.zeros(count, H, dtype=torch.bool))
                mask[b, head] = True
        final = decoder_states(model, text, count, masks, mode)[-1]
        losses += [
            predictions(model, final[b], labels).next_logprobs.mean().neg() for b in range(count)
        ]
    found = torch.stack(losses)
    return found[1:] - found[0]


def lens_stack(model: EncoderDecoder, stack: str | None) -> None:
    """The lens reads the decoder: its stack ('decoder', or none); the others say why not."""
    if stack in (None, "decoder"):
        return
    why = {
        "encoder": "the encoder's states are read by the decoder's cross-attention, never by "
        "the LM head",
        "cross": "cross-attention is a part of each decoder layer: its writes are in the "
        "decoder's residual stream, which stack 'decoder' reads",
    }.get(stack, f"{model.name} has stacks encoder, decoder and cross")
    raise SpecError(
        f"the logit lens of an encoder-decoder reads its decoder (stack 'decoder'): {why}",
        field="stack",
    )


def seq2seq_lens(model: EncoderDecoder, text: Seq2SeqText, k: int = LENS_TOP_K) -> LogitLens:
    """After each decoder layer, each target position's top ``k`` tokens (the last layer's:
    the model's own predictions)."""
    with torch.inference_mode():
        hidden = decoder_states(model, text)
        norm = final_norm(model)
        ids, probs = [], []
        for layer in range(1, len(hidden)):
            state = hidden[layer][0]
            if norm is not None and layer < len(hidden) - 1:
                state = norm(state)
            top = predictions(model, state, text.labels)
            ids.append(top.top_ids[:, :k])
            probs.append(top.top_probs[:, :k])
    return LogitLens(text.target.tokens, torch.stack(ids), torch.stack(probs))
