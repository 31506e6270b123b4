"""What head analysis needs of a model, for every family: ids in, maps and final states out.

``HeadModel`` is the small surface the analysis functions use: tokenize a
text into ids, run a batch of id sequences (with an optional ``ContextEdit``
applied to each layer's concatenated head outputs just before the output
projection), each head's slice of the output projection, and for decoders
the final norm and the unembedding.  ``head_models.head_model(model)`` gives one for
any loaded ``TextModel``:

- decoders (``Decoder``: GPT-2, Llama family) by forward pre-hooks on the
  output projection modules (``attn.c_proj``, ``self_attn.o_proj``) and on the
  blocks (``transformer.h.N``, ``model.layers.N``: a ``grow`` edit may change a
  block's input, e.g. add batch rows there), found by their names, which are
  transformers' names too;
- BERT encoders by the ``edit_context`` argument of their forward pass.

The hooks are registered for one ``run`` (``editing``) and removed after it;
they act on the calling thread's forward pass only, so other requests running
the same model at the same time are not affected.  A model of transformers'
(issue 19's backend) needs only a ``HeadModel`` whose ``run`` calls it: the
names above, ``head_slices`` and the hooks apply to it unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from ..errors import SpecError
from ..models.base.out_projections import head_slices, output_projections
from ..models.base.protocols import DecoderConfig
from ..models.families.bert import Encoder
from ..models.maps.blocked_pass import BlockedPass
from ..models.maps.context_pass import context_only
from ..models.maps.text_maps import TokenizedLike
from ..models.text.decoder import Decoder
from ..models.text.text_model_base import TextModelBase

ContextEdit = Callable[[int, torch.Tensor], torch.Tensor]
"""(layer (0-based), context (B, T, H*D): the heads side by side) -> the context to use."""

BLOCK_LISTS = ("transformer.h", "model.layers", "gpt_neox.layers", "encoder.layer")
FINAL_NORM_NAMES = ("transformer.ln_f", "model.norm", "gpt_neox.final_layer_norm")


@dataclass(frozen=True)
class Tokens:
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    special: tuple[bool, ...]


@dataclass(frozen=True)
class RunOutput:
    """One batch through the model: ``attentions`` L tensors (B, H, T, T) when asked for;
    ``hidden`` L + 1 tensors (B, T, C) as transformers gives them (a decoder's last after
    its final norm)."""

    attentions: tuple[torch.Tensor, ...]
    hidden: tuple[torch.Tensor, ...]


class HeadModel(Protocol):
    """What the analysis functions use of a model (see the module doc)."""

    num_layers: int
    num_heads: int
    causal: bool

    @property
    def max_tokens(self) -> int: ...

    def tokenize(self, text: str) -> Tokens: ...

    def frame(self, block: Sequence[int]) -> tuple[list[int], int]:
        """``block`` wrapped in the special tokens every text gets; and where it starts."""
        ...

    def ordinary_ids(self) -> torch.Tensor:
        """(n,) every token id that is not a special token."""
        ...

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        """How each id reads on its own (a decoder's decoded text, an encoder's WordPiece)."""
        ...

    def run(
        self,
        ids: torch.Tensor,
        *,
        attentions: bool = False,
        edit: ContextEdit | None = None,
        blocked: BlockedPass | None = None,
    ) -> RunOutput:
        """``ids`` (B, T) through the model (inference mode is the caller's).  Without
        ``attentions`` no map is held: each layer's context is computed block by block
        (``context_pass``), at any length; ``blocked``: the pass every attention call goes
        to instead (``context_pass.WatchedPass``: a sum read block by block)."""
        ...

    def out_weights(self, layer: int) -> torch.Tensor:
        """(H, D, C): head h's slice of layer ``layer``'s output projection, as ``x @ W``."""
        ...


class _TokenizedIds(TokenizedLike, Protocol):
    @property
    def input_ids(self) -> tuple[int, ...]: ...


class _LoadedModel(Protocol):
    """What ``HeadModelBase`` reads of a loaded model (a ``TextModelBase``, an ``Encoder``)."""

    @property
    def config(self) -> DecoderConfig: ...
    @property
    def max_tokens(self) -> int: ...

    def tokenize(self, text: str) -> _TokenizedIds: ...


class HeadModelBase:
    """What every ``HeadModel`` over a loaded model (``self.text_model``) shares: the
    model's sizes, its limit, its tokens and the framing of an induction block."""

    text_model: _LoadedModel

    def __init__(self, text_model: _LoadedModel) -> None:
        self.text_model = text_model
        config = text_model.config
        self.num_layers = config.num_layers
        self.num_heads = config.num_heads
        self.head_dim = config.head_dim

    @property
    def max_tokens(self) -> int:
        return self.text_model.max_tokens

    def tokenize(self, text: str) -> Tokens:
        t = self.text_model.tokenize(text)
        return Tokens(t.input_ids, t.tokens, t.special)

    def frame(self, block: Sequence[int]) -> tuple[list[int], int]:
        prefix, suffix = _framing(self.tokenize("a"))
        return [*prefix, *block, *suffix], len(prefix)


class TextModelTokens(HeadModelBase):
    """``HeadModelBase`` over a ``TextModelBase``, with its ordinary ids and token texts."""

    text_model: TextModelBase[Any]

    def ordinary_ids(self) -> torch.Tensor:
        tokenizer = self.text_model.tokenizer
        count = min(tokenizer.vocab_size, self.text_model.config.vocabulary_size)
        return _without(count, tokenizer.special_ids)

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        return [self.text_model.tokenizer.decode([i]) for i in ids]


class DecoderHeadModel(TextModelTokens):
    """``HeadModel`` of a loaded ``Decoder`` (see the module doc).  ``residual_broadcasts``:
    its blocks add the attention's output to the residual stream out of place (``x = x +
    attended``), so a batch that grows at an output projection carries the residual of a
    batch of one along (as the package's own families do)."""

    causal = True
    residual_broadcasts = True

    def __init__(self, decoder: Decoder, module: nn.Module | None = None) -> None:
        super().__init__(decoder)
        self.decoder = decoder
        self.module: nn.Module = module or decoder.model  # type: ignore[assignment]
        self.vocabulary_size = decoder.config.vocabulary_size
        self.projections = output_projections(self.module, self.num_layers)
        self.blocks = layer_blocks(self.module, self.num_layers)
        self.final_norm: nn.Module = _submodule(self.module, FINAL_NORM_NAMES, "final norm")
        self.lm_head: nn.Module = self._lm_head()

    def _lm_head(self) -> nn.Module:
        return self.module.get_submodule("lm_head")

    def run(
        self,
        ids: torch.Tensor,
        *,
        attentions: bool = False,
        edit: ContextEdit | None = None,
        grow: ContextEdit | None = None,
        blocked: BlockedPass | None = None,
    ) -> RunOutput:
        """``grow(layer, x (B, T, C))`` may replace each block's input (e.g. a bigger batch)."""
        with self.editing(edit, grow):
            out = self.decoder.model(
                ids,
                num_logits=0,
                output_attentions=attentions,
                output_hidden_states=True,
                blocked=context_only(attentions, blocked),
            )
        return RunOutput(out.attentions, out.hidden_states)

    def editing(
        self, edit: ContextEdit | None, grow: ContextEdit | None = None
    ) -> AbstractContextManager[None]:
        """``editing`` over this model's output projections and blocks."""
        return editing(self.projections, self.blocks, edit, grow)

    def out_weights(self, layer: int) -> torch.Tensor:
        return head_slices(self.projections[layer], self.num_heads, self.head_dim)

    def unembed(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., C) final-normed states -> (..., vocab) logits."""
        out: torch.Tensor = self.lm_head(hidden)
        return out


class EncoderHeadModel(HeadModelBase):
    """``HeadModel`` of a BERT-family ``Encoder`` (single texts, no sentence pairs)."""

    causal = False

    def __init__(self, encoder: Encoder) -> None:
        super().__init__(encoder)
        self.encoder = encoder

    def ordinary_ids(self) -> torch.Tensor:
        return _without(self.encoder.config.vocab_size, self.encoder.tokenizer.special_ids)

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        return self.encoder.tokenizer.id_pieces(list(ids))

    def run(
        self,
        ids: torch.Tensor,
        *,
        attentions: bool = False,
        edit: ContextEdit | None = None,
        blocked: BlockedPass | None = None,
    ) -> RunOutput:
        maps, hidden, _ = self.encoder.forward_layers(
            ids,
            torch.zeros_like(ids),
            edit_context=edit,
            blocked=context_only(attentions, blocked),
        )
        return RunOutput(maps if attentions else (), hidden)

    def out_weights(self, layer: int) -> torch.Tensor:
        W = self.encoder.layers[layer].W_out  # (C, H*D), nn.Linear layout
        return W.T.reshape(self.num_heads, self.head_dim, -1)  # (H, D, C)


# --- helpers ------------------------------------------------------------------------------


def layer_blocks(module: nn.Module, num_layers: int) -> list[nn.Module]:
    """The transformer blocks, in order: the entries of the model's ``ModuleList`` of layers
    (``transformer.h``, ``model.layers``; transformers' names too)."""
    for name in BLOCK_LISTS:
        try:
            blocks = module.get_submodule(name)
        except AttributeError:
            continue
        if isinstance(blocks, nn.ModuleList) and len(blocks) == num_layers:
            return list(blocks)
    raise SpecError(
        f"found no list of {num_layers} blocks ({', '.join(BLOCK_LISTS)})", field="model"
    )


def _submodule(module: nn.Module, names: Sequence[str], what: str) -> nn.Module:
    for name in names:
        try:
            return module.get_submodule(name)
        except AttributeError:
            continue
    raise SpecError(f"this model has no {what} ({', '.join(names)})", field="model")


def _framing(probe: Tokens) -> tuple[list[int], list[int]]:
    """The special ids a text gets before (BOS, [CLS]) and after ([SEP]) its own tokens."""
    first = probe.special.index(False) if False in probe.special else len(probe.ids)
    last = len(probe.ids) - probe.special[::-1].index(False) if False in probe.special else first
    return list(probe.ids[:first]), list(probe.ids[last:])


def _without(count: int, special: frozenset[int]) -> torch.Tensor:
    keep = torch.ones(count, dtype=torch.bool)
    keep[[i for i in special if i < count]] = False
    return keep.nonzero().squeeze(-1)


# --- edits through forward pre-hooks -------------------------------------------------------


@contextmanager
def editing(
    projections: Sequence[nn.Module],
    blocks: Sequence[nn.Module],
    edit: ContextEdit | None,
    grow: ContextEdit | None = None,
) -> Iterator[None]:
    """Within the block, this thread's forward passes apply ``edit`` to each output
    projection's input and ``grow`` to each block's input (None: no change), by pre-hooks
    registered for the block and removed at its end.  The modules are shared: a hook
    leaves another thread's forward through them alone."""
    owner = threading.get_ident()
    handles = [
        module.register_forward_pre_hook(_hook(owner, change, layer))
        for change, modules in ((edit, projections), (grow, blocks))
        if change is not None
        for layer, module in enumerate(modules)
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _hook(owner: int, change: ContextEdit, layer: int) -> Callable[..., object]:
    def hook(_module: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...] | None:
        if threading.get_ident() != owner:
            return None
        return (change(layer, args[0]), *args[1:])

    return hook
