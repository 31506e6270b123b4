"""Head ablation: a head's context vector zeroed (or set to its mean over positions) just
before the output projection, and what that does to the model's predictions.

Decoders: each position's log-probability of the token that actually follows
it, and the text's loss (their negative mean), before and after.  Encoders:
the sentence embedding (the mean of the last layer's states, as
sentence-transformers pools MiniLM) before and after, compared by cosine.

``each_head_effects`` ablates every head on its own, the ablations as the
batch dimension of a few forward passes (not one pass per head); a decoder's
batch grows layer by layer, so the layers below an ablated head run once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from ..errors import SpecError
from .access import ContextEdit, DecoderHeadModel, HeadModel
from .unembedding import decoder_logit_blocks, log_probs_of

AblationMode = Literal["zero", "mean"]
ABLATION_MODES: tuple[str, ...] = ("zero", "mean")
# Attention cells (rows x H x T^2) one batched forward pass may hold per step tensor.
BATCH_CELLS = 1 << 22
# Logits (rows x T x vocab) unembedded at once.
BATCH_LOGITS = 1 << 23
TOP_K = 5


def ablation_cost(num_layers: int, num_heads: int, length: int) -> int:
    """What ``each_head`` costs, the number its limit bounds: layers × heads × T²."""
    return num_layers * num_heads * length * length


@dataclass(frozen=True)
class Predictions:
    """Per position: log-probability of the actual next token (T - 1,), the top tokens
    (T, k) and their probabilities (T, k)."""

    next_logprobs: torch.Tensor
    top_ids: torch.Tensor
    top_probs: torch.Tensor

    @property
    def loss(self) -> float:
        return float(-self.next_logprobs.mean())

    @property
    def nbytes(self) -> int:
        tensors = (self.next_logprobs, self.top_ids, self.top_probs)
        return sum(t.numel() * t.element_size() for t in tensors)


@dataclass(frozen=True)
class Ablation:
    heads: tuple[tuple[int, int], ...]  # (layer, head), 0-based
    mode: str
    before: Predictions | None  # decoders
    after: Predictions | None
    embedding_cosine: float | None  # encoders: cosine(sentence embedding after, before)


def check_heads(heads: Sequence[Sequence[int]], num_layers: int, num_heads: int) -> None:
    """0-based (layer, head) pairs: a ``SpecError`` naming the first that does not exist."""
    if not heads:
        raise SpecError("heads is empty; name at least one [layer, head]", field="heads")
    for i, pair in enumerate(heads):
        layer, head = pair
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise SpecError(
                f"heads[{i}] is [{layer + 1}, {head + 1}]; this model has layers 1 to "
                f"{num_layers} and heads 1 to {num_heads}",
                field="heads",
            )


def check_length(heads: HeadModel, length: int) -> None:
    """A decoder's loss needs a next token: at least two tokens."""
    if heads.causal and length < 2:
        raise SpecError(
            f"text is {length} token; a loss needs at least 2 (a token and the one after it)",
            field="text",
        )


def _check_mode(mode: str) -> None:
    if mode not in ABLATION_MODES:
        raise SpecError(f"mode {mode!r} is not one of {', '.join(ABLATION_MODES)}", field="mode")


def masked_edit(masks: dict[int, torch.Tensor], num_heads: int, mode: str) -> ContextEdit:
    """An edit that replaces, in batch row b, the heads ``masks[layer][b]`` flags (B, H).
    A context of one row with a mask of B rows becomes B rows (broadcast)."""

    def edit(layer: int, context: torch.Tensor) -> torch.Tensor:
        mask = masks.get(layer)
        if mask is None:
            return context
        *lead, T, width = context.shape
        per_head = context.view(*lead, T, num_heads, width // num_heads)  # (B, T, H, D)
        if mode == "zero":
            replacement = torch.zeros((), dtype=context.dtype)
        else:
            replacement = per_head.mean(dim=-3, keepdim=True)  # (B, 1, H, D)
        kept = torch.where(mask[..., None, :, None], replacement, per_head)
        return kept.reshape(*kept.shape[:-2], width)

    return edit


def block_predictions(
    blocks: Iterable[tuple[int, torch.Tensor]], following: torch.Tensor
) -> Predictions:
    """``Predictions`` from logits read a block of positions at a time ((first position,
    (n, vocab)): ``unembedding``): position i scored on ``following[i]`` (the positions
    past its end on none)."""
    nexts, top_ids, top_probs = [], [], []
    for first, logits in blocks:
        picked = following[first : first + logits.shape[0]]
        chosen, ids, logprobs = log_probs_of(logits, picked[:, None], TOP_K)
        nexts.append(chosen[:, 0])
        top_ids.append(ids)
        top_probs.append(logprobs.exp())
    return Predictions(torch.cat(nexts), torch.cat(top_ids), torch.cat(top_probs))


def _predictions(heads: DecoderHeadModel, final: torch.Tensor, ids: torch.Tensor) -> Predictions:
    """final (T, C) final-normed states, ids (T,) -> ``Predictions`` (each position scored
    on the token that follows it; the last on none)."""
    return block_predictions(decoder_logit_blocks(heads, final), ids[1:])


def _sentence(final: torch.Tensor) -> torch.Tensor:
    return final.mean(dim=-2)  # (..., T, C) -> (..., C)


def ablate(
    heads: HeadModel,
    ids: Sequence[int],
    chosen: Sequence[Sequence[int]],
    mode: str = "zero",
    clean: Predictions | None = None,
) -> Ablation:
    """The text ``ids`` with the ``chosen`` (layer, head) pairs (0-based) ablated together.
    A decoder's ``clean`` predictions of ``ids`` (an earlier ablation's ``before``), when
    given, are the answer's ``before``: only the ablated forward runs."""
    _check_mode(mode)
    check_heads(chosen, heads.num_layers, heads.num_heads)
    check_length(heads, len(ids))
    pairs = tuple((int(layer), int(head)) for layer, head in chosen)
    if isinstance(heads, DecoderHeadModel):
        before, after = _decoder_ablation(heads, ids, pairs, mode, clean)
        return Ablation(pairs, mode, before, after, None)
    batch = torch.tensor([list(ids)] * 2)  # row 0 unablated, row 1 ablated
    final = heads.run(
        batch, edit=masked_edit(_masks(pairs, 2, heads.num_heads), heads.num_heads, mode)
    ).hidden[-1]
    sentence = _sentence(final)
    cosine = float(F.cosine_similarity(sentence[1], sentence[0], dim=-1))
    return Ablation(pairs, mode, None, None, cosine)


def _masks(pairs: Sequence[tuple[int, int]], rows: int, num_heads: int) -> dict[int, torch.Tensor]:
    """Per layer, (rows, H): the ``pairs``' heads flagged in the last row only."""
    masks: dict[int, torch.Tensor] = {}
    for layer, head in pairs:
        mask = masks.setdefault(layer, torch.zeros(rows, num_heads, dtype=torch.bool))
        mask[-1, head] = True
    return masks


def _decoder_ablation(
    heads: DecoderHeadModel,
    ids: Sequence[int],
    pairs: Sequence[tuple[int, int]],
    mode: str,
    clean: Predictions | None,
) -> tuple[Predictions, Predictions]:
    """(before, after).  Without ``clean`` row 0 is the text and row 1 the text ablated,
    the same rows up to the first ablated layer: the layers below it run once.  Where the
    blocks add their attention to the residual stream out of place
    (``DecoderHeadModel.residual_broadcasts``) the batch grows at that layer's output
    projection (the edit's two rows of one context; the residual broadcasts), so that
    layer's attention runs once too; else at its block's input (as ``_decoder_effects``
    does per head).  With ``clean``, the ablated text alone."""
    text = torch.tensor([list(ids)])
    H = heads.num_heads
    if clean is not None:
        edit = masked_edit(_masks(pairs, 1, H), H, mode)
        final = heads.run(text, edit=edit).hidden[-1]
        return clean, _predictions(heads, final[0], text[0])
    first = min(layer for layer, _ in pairs)

    def grow(layer: int, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x]) if layer == first else x

    edit = masked_edit(_masks(pairs, 2, H), H, mode)
    at_block = None if heads.residual_broadcasts else grow
    final = heads.run(text, edit=edit, grow=at_block).hidden[-1]
    return _predictions(heads, final[0], text[0]), _predictions(heads, final[1], text[0])


LossFn = Callable[[torch.Tensor], torch.Tensor]
"""Final-normed states (B, T, C) -> (B,) losses (default: the mean next-token loss)."""


def each_head_effects(
    heads: HeadModel, ids: Sequence[int], mode: str = "zero", losses: LossFn | None = None
) -> torch.Tensor:
    """(L, H): a decoder's Δloss (loss without that head − loss with all), or an encoder's
    cosine of the sentence embedding without that head to the one with all."""
    _check_mode(mode)
    check_length(heads, len(ids))
    if isinstance(heads, DecoderHeadModel):
        return _decoder_effects(heads, ids, mode, losses)
    L, H, T = heads.num_layers, heads.num_heads, len(ids)
    rows = 1 + L * H
    per_pass = max(1, BATCH_CELLS // (H * T * T))
    text = torch.tensor(list(ids))
    results: list[torch.Tensor] = []
    for first in range(0, rows, per_pass):
        count = min(per_pass, rows - first)
        masks: dict[int, torch.Tensor] = {}
        for b, row in enumerate(range(first, first + count)):
            if row == 0:
                continue
            layer, head = divmod(row - 1, H)
            mask = masks.setdefault(layer, torch.zeros(count, H, dtype=torch.bool))
            mask[b, head] = True
        batch = text.expand(count, T)
        final = heads.run(batch, edit=masked_edit(masks, H, mode)).hidden[-1]  # (B, T, C)
        results.append(_sentence(final))
    out = torch.cat(results)  # (rows, C) sentence embeddings
    return F.cosine_similarity(out[1:], out[:1], dim=-1).view(L, H)


def _decoder_passes(L: int, H: int, T: int) -> list[list[tuple[int, int, int]]]:
    """The passes of ``_decoder_effects``: each a list of (layer, first head, heads), so that
    no layer's batch holds more than ``BATCH_CELLS`` attention cells (rows × H × T²) unless
    one row alone does.  Whole layers share a pass while 1 + H rows fit; else each pass
    ablates a chunk of one layer's heads."""
    rows = max(1, BATCH_CELLS // (H * T * T))  # rows one pass may hold
    if 1 + H <= rows:
        group_size = max(1, rows // H)
        return [
            [(layer, 0, H) for layer in range(first, min(L, first + group_size))]
            for first in range(0, L, group_size)
        ]
    chunk = max(1, rows - 1)
    return [
        [(layer, head, min(chunk, H - head))] for layer in range(L) for head in range(0, H, chunk)
    ]


def _decoder_effects(
    heads: DecoderHeadModel, ids: Sequence[int], mode: str, losses_of: LossFn | None
) -> torch.Tensor:
    """Decoders share the layers below an ablation: one pass starts with the text alone
    (batch 1) and, entering each layer l of its pass, grows the batch by a copy of row 0 per
    head of l it ablates (``_decoder_passes``).  So a head of layer l costs the layers from
    l up, not the whole model."""
    L, H, T = heads.num_layers, heads.num_heads, len(ids)
    text = torch.tensor([list(ids)])  # (1, T)
    clean: torch.Tensor | None = None
    deltas: list[torch.Tensor] = []
    for segments in _decoder_passes(L, H, T):
        masks: dict[int, torch.Tensor] = {}
        grown: dict[int, int] = {}
        rows = 1
        for layer, head, count in segments:
            rows += count  # the batch at this layer's projection
            mask = torch.zeros(rows, H, dtype=torch.bool)
            mask[rows - count :, head : head + count] = torch.eye(count, dtype=torch.bool)
            masks[layer] = mask
            grown[layer] = count

        def grow(layer: int, x: torch.Tensor, grown: dict[int, int] = grown) -> torch.Tensor:
            if layer not in grown:
                return x
            return torch.cat([x, x[:1].expand(grown[layer], *x.shape[1:])])  # (B + n, T, C)

        final = heads.run(text, edit=masked_edit(masks, H, mode), grow=grow).hidden[-1]
        losses = (
            _losses(heads, final, text[0]) if losses_of is None else losses_of(final)
        )  # (1 + heads ablated in this pass,)
        clean = losses[0] if clean is None else clean
        deltas.append(losses[1:] - clean)
    return torch.cat(deltas).view(L, H)


def _losses(heads: DecoderHeadModel, final: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(B,) mean negative log-likelihood of ``ids`` (T,) under each row's final states."""
    B, T, _ = final.shape
    step = max(1, BATCH_LOGITS // (T * heads.vocabulary_size))
    losses = []
    for first in range(0, B, step):
        logits = heads.unembed(final[first : first + step, :-1]).float()  # (b, T-1, vocab)
        b = logits.shape[0]
        targets = ids[1:].expand(b, T - 1).reshape(-1)  # (b*(T-1),)
        nll = F.cross_entropy(logits.reshape(b * (T - 1), -1), targets, reduction="none")
        losses.append(nll.view(b, T - 1).mean(-1))
    return torch.cat(losses)
