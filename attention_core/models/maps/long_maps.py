"""A long input's forward pass that never holds every full map: q and k kept, maps gathered.

Inside ``long_pass(pass_)`` (a ``blocked_pass.blocked_pass``) every attention
layer of the core decoders (``GPT2Attention``, ``LlamaAttention``) and of the
transformers backend (``hf.capture.core_attention``) goes to ``LongPass.steps``:
it keeps what rebuilds any of the layer's maps (``KeptLayer``: q as the
softmax saw it, after RoPE; the layer's k with its kv heads; the scale, mask,
soft-cap, sinks and score bias), computes each head's map once through
``blocked_attention`` (bounded blocks of rows, causal blocks skipping the
keys no row of theirs sees), takes the context from those same blocks and
gathers the answer's cells into a ``MapGrid`` as it goes.  No (H, T, T)
tensor is made.  ``LongMaps`` is the result: the tokens, every layer's kept
q/k, the grids of the spec it was run for, and ``grid(layer, spec)`` that
rebuilds any other view (another pooling, a region, one head at full
resolution) from the kept q/k, a block of rows at a time.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace

import torch

from ...attention import AttentionSteps
from ...blocked_attention import (
    DEFAULT_BLOCK_CELLS,
    AttentionCall,
    blocked_attention,
    rows_per_block,
)
from ...progress import report
from .blocked_pass import BlockedPass, blocked_pass, context_steps
from .map_grid import GridSpec, MapGrid
from .pooling import Region
from .text_maps import OfTokenized, TokenizedLike


@dataclass(frozen=True)
class KeptLayer:
    """What rebuilds every map of one attention layer (batch axis dropped).

    Shapes: query (H, T, D) as the softmax saw it (after RoPE, q/k norms);
    key (H_kv, S, D); ``mask`` boolean, broadcastable to (H, T, S), or None;
    ``score_bias`` broadcastable to (H, T, S) or None; ``sinks`` (H,) or None.
    """

    query: torch.Tensor
    key: torch.Tensor
    scale: float
    causal: bool
    mask: torch.Tensor | None = None
    softcap: float | None = None
    sinks: torch.Tensor | None = None
    score_bias: torch.Tensor | None = None

    @property
    def num_heads(self) -> int:
        return int(self.query.shape[0])

    def gather(self, grid: MapGrid, block_cells: int = DEFAULT_BLOCK_CELLS) -> MapGrid:
        """``grid`` filled with this layer's maps, rebuilt from q and k in blocks of rows.

        Only the heads the grid shows are computed, unless it wants the head
        average (which reads every head).
        """
        H, H_kv = self.num_heads, int(self.key.shape[0])
        spec = grid.spec
        heads = list(range(H)) if spec.heads is None or spec.average else list(spec.heads)
        index = torch.tensor(heads)
        query = self.query.index_select(0, index)  # (h, T, D)
        key = self.key.index_select(0, index // (H // H_kv))  # (h, S, D): each head's kv head
        sinks = None if self.sinks is None else self.sinks.index_select(0, index)
        bias = self.score_bias
        if bias is not None and bias.dim() >= 3 and bias.shape[-3] == H:
            bias = bias.index_select(-3, index)
        mask = self.mask
        if mask is not None and mask.dim() >= 3 and mask.shape[-3] == H:
            mask = mask.index_select(-3, index)
        if len(heads) < H:  # the grid counts heads among all H: give it back their places
            just_these = GridSpec(spec.hidden, spec.region, spec.block, None, False)
            inner = MapGrid(just_these, len(heads), grid.num_tokens)
        else:
            inner = grid
        blocked_attention(
            # (h, S, 0) values: the weights are wanted, not the context
            AttentionCall(
                query,
                key,
                key[..., :0],
                mask,
                self.causal,
                self.scale,
                False,
                bias,
                self.softcap,
                sinks,
            ),
            block_rows=rows_per_block(len(heads), int(key.shape[-2]), block_cells),
            on_block=inner.add,
            rows=grid.row_span,  # a region's rows only
        )
        if inner is not grid:
            grid.heads.copy_(inner.heads)
        return grid

    @property
    def nbytes(self) -> int:
        tensors = [self.query, self.key]
        tensors += [t for t in (self.mask, self.sinks, self.score_bias) if t is not None]
        return sum(t.numel() * t.element_size() for t in tensors)


@dataclass(eq=False)
class LongPass:
    """The state of one long forward pass: each layer's ``KeptLayer`` and ``MapGrid``.

    ``report_layers``: report ``("forward", layer, layers)`` after each
    attention layer (the transformers backend; the core decoders' ``run_blocks``
    reports its blocks itself).
    """

    spec: GridSpec
    num_layers: int
    report_layers: bool = False
    block_cells: int = DEFAULT_BLOCK_CELLS
    full_averages: bool = False
    layers: dict[int, KeptLayer] = field(default_factory=dict)
    grids: dict[int, MapGrid] = field(default_factory=dict)
    # With ``full_averages``: each layer's head average at full resolution, (T, T).
    averages: dict[int, torch.Tensor] = field(default_factory=dict)

    def attend(self, layer: int, call: AttentionCall) -> torch.Tensor:
        """The context (1, H, T, D_v) of one layer's attention; its q/k and grid kept.

        Shapes: query (1, H, T, D); key, value (1, H_kv, S, D); a mask or bias
        with a batch axis of 1 (or none).
        """
        query, key = call.query, call.key
        if query.shape[0] != 1:
            raise ValueError(f"a long pass reads one text; got a batch of {query.shape[0]}")

        def unbatched(t: torch.Tensor | None) -> torch.Tensor | None:
            return t[0] if t is not None and t.dim() == 4 else t

        kept = KeptLayer(
            # Own copies where they are views (GPT-2's q and k are views of one projection
            # that holds v too): what is kept is what ``nbytes`` counts.
            query=query[0].contiguous(),
            key=key[0].contiguous(),
            scale=call.scale_factor,
            causal=call.is_causal,
            mask=unbatched(call.attn_mask),
            softcap=call.softcap,
            sinks=call.sinks,
            score_bias=unbatched(call.score_bias),
        )
        H, T = int(query.shape[1]), int(query.shape[2])
        grid = MapGrid(self.spec, H, T)
        whole = Region(0, T, 0, T)
        average = MapGrid(GridSpec(None, whole, (1, 1), ()), H, T) if self.full_averages else None

        def gather(r0: int, c0: int, weights: torch.Tensor) -> None:
            grid.add(r0, c0, weights[0])
            if average is not None:
                average.add(r0, c0, weights[0])

        context = blocked_attention(
            call,
            block_rows=rows_per_block(H, int(key.shape[-2]), self.block_cells),
            on_block=gather,
        )
        self.layers[layer] = kept
        self.grids[layer] = grid
        if average is not None and average.average is not None:
            self.averages[layer] = average.average
        if self.report_layers:
            report("forward", len(self.layers), self.num_layers)
        return context

    def steps(self, layer: int | None, call: AttentionCall) -> AttentionSteps:
        """``attend`` as a ``BlockedPass``: the context only (the scores and weights were
        gathered block by block; their tensors here are empty).  ``layer`` None: the
        next layer in call order."""
        index = len(self.layers) if layer is None else layer
        context = self.attend(index, call)
        return context_steps(call.query, context, None, self.layers[index].scale)


def long_pass(pass_: LongPass) -> AbstractContextManager[BlockedPass]:
    """Every attention layer run by this thread inside the block goes to ``pass_``."""
    return blocked_pass(pass_)


@dataclass(frozen=True)
class LongMaps(OfTokenized):
    """One long text through a model: its tokens, every layer's kept q/k, the first grids.

    ``grids``: per layer, the ``MapGrid`` of ``spec`` (the view the pass was
    run for); ``grid(layer, spec)`` gives that one or rebuilds another.
    ``rollout``: ``features.attention_rollout`` of the full head averages, when
    the pass kept them (``LongPass(full_averages=True)``: T² a layer), else None.
    """

    tokenized: TokenizedLike
    layers: tuple[KeptLayer, ...]
    spec: GridSpec
    grids: tuple[MapGrid, ...]
    rollout: torch.Tensor | None = None  # (L, T, T) when the pass kept full head averages

    def grid(self, layer: int, spec: GridSpec) -> MapGrid:
        """Layer ``layer``'s (0-based) maps as ``spec`` shows them."""
        if replace(spec, average=self.spec.average) == self.spec and (
            self.spec.average or not spec.average
        ):
            return self.grids[layer]
        kept = self.layers[layer]
        return kept.gather(MapGrid(spec, kept.num_heads, len(self.tokens)))

    @property
    def nbytes(self) -> int:
        kept = {id(t): t for layer in self.layers for t in _tensors(layer)}  # masks are shared
        held = sum(t.numel() * t.element_size() for t in kept.values())
        rollout = 0 if self.rollout is None else self.rollout.numel() * 4
        return held + rollout + sum(g.nbytes for g in self.grids)


def _tensors(layer: KeptLayer) -> list[torch.Tensor]:
    held = (layer.query, layer.key, layer.mask, layer.sinks, layer.score_bias)
    return [t for t in held if t is not None]
