"""A forward pass that never holds every full map: q and k kept, maps gathered.

A forward pass given a ``LongPass`` (a ``blocked_pass.BlockedPass``) sends every
attention layer of the core families (``GPT2Attention``, ``LlamaAttention``, BERT's
layers) and of the transformers backend (``hf.capture.core_attention``) goes to
``LongPass.steps``: it keeps what rebuilds any of the layer's maps
(``KeptLayer``: q as the softmax saw it, after RoPE; the layer's k with its kv
heads; v when an analysis needs it; the scale, mask, soft-cap, sinks and score
bias), computes each head's map once through ``blocked_attention`` (bounded
blocks of rows, causal blocks skipping the keys no row of theirs sees), takes
the context from those same blocks and gathers the answer's cells into a
``MapGrid`` as it goes.  No (H, T, T) tensor is made.  ``StackedPass`` sends
an encoder-decoder's calls to one ``LongPass`` per stack.  What a pass kept
is a ``contract.KeptStack`` per stack; its ``grid(layer, query)`` rebuilds
any view (another pooling, a region, one head at full resolution) from the
kept q/k, a block of rows at a time.  A short input is one block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace

import torch

from ...attention import AttentionSteps, context_steps
from ...blocked_attention import (
    DEFAULT_BLOCK_CELLS,
    AttentionCall,
    BiasRule,
    ScoreBias,
    blocked_attention,
    rows_per_block,
)
from ...progress import report
from . import gpu_pooled
from .map_grid import MapGrid, MapQuery
from .pooling import Region

BlockSink = Callable[[int, int, torch.Tensor], None]


@dataclass(frozen=True)
class KeptLayer:
    """What rebuilds every map of one attention layer (batch axis dropped).

    Shapes: query (H, T, D) as the softmax saw it (after RoPE, q/k norms);
    key (H_kv, S, D); ``value`` (H_kv, S, D_v) when kept (else None); ``mask``
    boolean, broadcastable to (H, T, S), or None; ``score_bias`` broadcastable
    to (H, T, S) or None; ``sinks`` (H,) or None.
    """

    query: torch.Tensor
    key: torch.Tensor
    scale: float
    causal: bool
    mask: torch.Tensor | None = None
    softcap: float | None = None
    sinks: torch.Tensor | None = None
    score_bias: ScoreBias | None = None
    value: torch.Tensor | None = None

    @property
    def num_heads(self) -> int:
        return int(self.query.shape[0])

    @property
    def num_kv_heads(self) -> int:
        return int(self.key.shape[0])

    def call(self, heads: list[int] | None = None, values: bool = False) -> AttentionCall:
        """The attention call of ``heads`` (0-based; None: all), each with its kv head:
        (h, T, D) queries, (h, S, D) keys, values when ``values`` (else none: (h, S, 0))."""
        H = self.num_heads
        chosen = list(range(H)) if heads is None else heads
        index = torch.tensor(chosen, dtype=torch.long, device=self.query.device)
        kv_index = index // (H // self.num_kv_heads)
        key = self.key.index_select(0, kv_index)
        if values and self.value is None:
            raise ValueError("this pass kept no values (run it with values=True)")
        value = self.value.index_select(0, kv_index) if values and self.value is not None else None
        return AttentionCall(
            self.query.index_select(0, index),
            key,
            key[..., :0] if value is None else value,
            _per_head(self.mask, index, H),
            self.causal,
            self.scale,
            False,
            _bias_per_head(self.score_bias, index, H),
            self.softcap,
            None if self.sinks is None else self.sinks.index_select(0, index),
        )

    def blocks(
        self,
        on_block: BlockSink,
        heads: list[int] | None = None,
        rows: tuple[int, int] | None = None,
        block_cells: int = DEFAULT_BLOCK_CELLS,
        values: bool = False,
    ) -> torch.Tensor:
        """Every block of rows of ``heads``' maps handed to ``on_block`` (r0, c0, (h, n, w)),
        never the whole map; the context (h, rows, D_v) of those heads (empty without
        ``values``)."""
        call = self.call(heads, values)
        count = int(call.query.shape[0])
        return blocked_attention(
            call,
            block_rows=rows_per_block(
                count, int(call.key.shape[-2]), block_cells, device=call.query.device
            ),
            on_block=on_block,
            rows=rows,
        )

    def gather(
        self,
        grid: MapGrid,
        block_cells: int = DEFAULT_BLOCK_CELLS,
        column_scale: torch.Tensor | None = None,
    ) -> MapGrid:
        """``grid`` filled with this layer's maps, rebuilt from q and k in blocks of rows.

        Only the heads the grid shows are computed, unless it wants the head
        average (which reads every head).  ``column_scale`` (H, S): each weight
        times its head's scale of its key, each row re-summed to 1 (value_norm).
        """
        spec = grid.spec
        if grid.empty or grid.heads.shape[-1] == 0:
            return grid
        H = self.num_heads
        heads = list(range(H)) if spec.heads is None or spec.average else list(spec.heads)
        device = self.query.device
        with made_on(device):  # q/k kept on a GPU: blocks and cells there, then the cells cross
            inner = grid
            if len(heads) < H:  # the grid counts heads among all H: give back their places
                just_these = MapQuery(
                    spec.hidden, spec.region, spec.block, None, False, hidden_keys=spec.hidden_keys
                )
                inner = MapGrid(just_these, len(heads), grid.num_tokens, grid.num_keys)
            elif grid.heads.device != device:
                inner = MapGrid(spec, H, grid.num_tokens, grid.num_keys)
            sink: BlockSink = inner.add
            if column_scale is not None:
                chosen = torch.tensor(heads, device=column_scale.device)
                scale = column_scale.index_select(0, chosen).to(device)
                sink = rescaled(inner.add, scale)
            self.blocks(sink, heads, grid.row_span, block_cells)  # a region's rows only
        if inner is not grid:
            grid.heads.copy_(inner.heads)
            if grid.average is not None and inner.average is not None:
                grid.average.copy_(inner.average)
        return grid

    def value_lengths(self, out: torch.Tensor) -> torch.Tensor:
        """‖v_j W_O^h‖ per head and key (Kobayashi et al. 2020): what a weight on key j
        moves, through head h's slice of the output projection.  Shapes: ``out``
        (H, D_v, C) -> (H, S); query head h reads kv head h // (H / H_kv)."""
        if self.value is None:
            raise ValueError("this pass kept no values (run it with values=True)")
        return value_lengths(self.value, out)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in kept_tensors(self))


def value_lengths(value: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``KeptLayer.value_lengths`` of values (H_kv, S, D_v) and head outputs (H, D_v, C):
    (H, S)."""
    per_head = value.repeat_interleave(out.shape[0] // value.shape[0], dim=0)
    lengths: torch.Tensor = torch.linalg.vector_norm(per_head @ out.to(per_head), dim=-1)
    return lengths


def made_on(device: torch.device) -> AbstractContextManager[object]:
    """New tensors (the blocks' masks) on ``device``; nothing changes for the CPU."""
    return nullcontext() if device.type == "cpu" else device


def rescaled(on_block: BlockSink, scale: torch.Tensor) -> BlockSink:
    """``on_block`` given each block's weights times ``scale`` (h, S) of their columns,
    rows re-summed to 1 (a block holds every key its rows see, so its rows are whole)."""

    def sink(r0: int, c0: int, weights: torch.Tensor) -> None:
        part = weights * scale[:, None, c0 : c0 + weights.shape[-1]]
        totals = part.sum(dim=-1, keepdim=True)
        on_block(r0, c0, part.div_(totals.clamp_min(torch.finfo(part.dtype).tiny)))

    return sink


def _bias_per_head(bias: ScoreBias | None, index: torch.Tensor, H: int) -> ScoreBias | None:
    """A score bias cut to the heads of ``index`` (``_per_head``; a rule: its heads')."""
    return bias.heads(index) if isinstance(bias, BiasRule) else _per_head(bias, index, H)


def _per_head(t: torch.Tensor | None, index: torch.Tensor, H: int) -> torch.Tensor | None:
    """A mask or bias broadcast over heads, cut to the heads of ``index`` when per head."""
    if t is not None and t.dim() >= 3 and t.shape[-3] == H:
        return t.index_select(-3, index)
    return t


def kept_tensors(layer: KeptLayer) -> list[torch.Tensor]:
    held = (layer.query, layer.key, layer.value, layer.mask, layer.sinks, layer.score_bias)
    return [t for t in held if isinstance(t, torch.Tensor)]  # a ``BiasRule`` holds a table


@dataclass(eq=False)
class LongPass:
    """The state of one stack's forward pass: each layer's ``KeptLayer`` and ``MapGrid``.

    ``query``: the view gathered while the pass runs (None: none; any view is
    rebuilt afterwards from the kept q/k).  ``report_layers``: report
    ``("forward", layer, layers)`` after each attention layer (the
    transformers backend and BERT; the core decoders' ``run_blocks`` reports
    its blocks itself).  ``keep_values``: keep each layer's v too (value-norm
    maps, the head trace).  ``full_averages``: keep each layer's head average
    at full resolution, (T, S) (the rollout).  ``head_outputs``: layer (0-based) ->
    its heads' slices of the output projection (H, D_v, C), which a value-weighted
    ``query`` needs (without them such a view is not gathered during the pass).
    ``watch``: layer -> what also reads each of its blocks (``PassOptions.watch``).
    ``device_pooling``: on a GPU, gather the view with ``gpu_pooled`` (flash attention's
    context, the maps recomputed from its log-sum-exp by a Triton kernel, 16-bit
    scores) wherever that is exactly the view asked for (``gpu_pooled.fits``); the kept
    q/k are the same float32 tensors either way (a decoder's pass that used it leaves
    them on the GPU: ``KeptLayer.gather`` computes a zoom's blocks and cells there and
    moves only the cells).
    """

    query: MapQuery | None
    num_layers: int
    report_layers: bool = False
    block_cells: int = DEFAULT_BLOCK_CELLS
    full_averages: bool = False
    keep_values: bool = False
    head_outputs: Callable[[int], torch.Tensor] | None = None
    watch: Callable[[int], BlockSink] | None = None
    device_pooling: bool = False
    layers: dict[int, KeptLayer] = field(default_factory=dict)
    grids: dict[int, MapGrid] = field(default_factory=dict)
    pooled_on_device: int = 0  # layers whose view ``gpu_pooled`` gathered
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
            score_bias=bias if isinstance(bias := call.score_bias, BiasRule) else unbatched(bias),
            value=call.value[0].contiguous() if self.keep_values else None,
        )
        H, T, S = int(query.shape[1]), int(query.shape[2]), int(key.shape[-2])
        grid, to_grid = self._grid(layer, call.value[0], H, T, S)
        whole = Region(0, T, 0, S)
        average = (
            MapGrid(MapQuery(None, whole, (1, 1), ()), H, T, S) if self.full_averages else None
        )

        watcher = None if self.watch is None else self.watch(layer)

        def gather(r0: int, c0: int, weights: torch.Tensor) -> None:
            for sink in (watcher, to_grid, None if average is None else average.add):
                if sink is not None:
                    sink(r0, c0, weights[0])

        own = replace(call, query=kept.query[None], key=kept.key[None])  # contiguous
        context = self._pooled(own, self._device_grid(own, grid, average, watcher))
        if context is None:
            context = blocked_attention(
                own if kept.value is None else replace(own, value=kept.value[None]),
                block_rows=rows_per_block(H, S, self.block_cells, device=query.device),
                on_block=gather,
            )
        self.layers[layer] = kept
        if grid is not None:
            self.grids[layer] = grid
        if average is not None and average.average is not None:
            self.averages[layer] = average.average
        if self.report_layers:
            report("forward", len(self.layers), self.num_layers)
        return context

    def _pooled(self, call: AttentionCall, grid: MapGrid | None) -> torch.Tensor | None:
        """The context by ``gpu_pooled``, its view pooled into ``grid``; None when it does
        not gather this layer (no grid) or Triton failed (``gpu_pooled.KernelFailed``)."""
        if grid is None:
            return None
        try:
            context = gpu_pooled.pooled_attend(call, grid)
        except gpu_pooled.KernelFailed:
            return None
        self.pooled_on_device += 1
        return context

    def _device_grid(
        self,
        call: AttentionCall,
        grid: MapGrid | None,
        average: MapGrid | None,
        watcher: BlockSink | None,
    ) -> MapGrid | None:
        """``grid`` when ``gpu_pooled`` gathers this layer's view (``device_pooling``):
        nothing else reads the blocks and the kernel means what the blocked path does."""
        chosen = (
            self.device_pooling
            and average is None
            and watcher is None
            and gpu_pooled.fits(call, self.query)
            and gpu_pooled.kernel_available(call.query.device)
        )
        return grid if chosen else None

    def _grid(
        self, layer: int, value: torch.Tensor, H: int, T: int, S: int
    ) -> tuple[MapGrid | None, BlockSink | None]:
        """This layer's view and what hands it each block (value-weighted: each weight
        times its key's ‖v_j W_O^h‖, rows re-summed to 1); (None, None) when none."""
        query = self.query
        if query is None:
            return None, None
        grid = MapGrid(query, H, T, S)
        if query.measure == "weights":
            return grid, grid.add
        if self.head_outputs is None:
            return None, None
        return grid, rescaled(grid.add, value_lengths(value, self.head_outputs(layer)))

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        """``attend`` as a ``BlockedPass``: the context only (the scores and weights were
        gathered block by block; their tensors here are empty).  ``layer`` None: the
        next layer in call order."""
        index = len(self.layers) if layer is None else layer
        context = self.attend(index, call)
        return context_steps(call.query, context, None, self.layers[index].scale)

    def kept(self) -> tuple[KeptLayer, ...]:
        """Every layer's ``KeptLayer`` in order; a ``RuntimeError`` when one was not seen."""
        if sorted(self.layers) != list(range(self.num_layers)):
            raise RuntimeError(f"the pass saw layers {sorted(self.layers)} of {self.num_layers}")
        return tuple(self.layers[i] for i in range(self.num_layers))


@dataclass(eq=False)
class StackedPass:
    """An encoder-decoder's pass: each call goes to its stack's ``LongPass`` (``site`` maps
    ``id(module)`` to the call's (stack, 0-based layer)); ``forward`` progress counts the
    encoder's and the decoder's self-attention layers."""

    passes: Mapping[str, LongPass]
    site: Callable[[object], tuple[str, int]]
    progress_stacks: tuple[str, ...] = ("encoder", "decoder")

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        stack, index = self.site(module)
        steps = self.passes[stack].steps(index, call)
        if stack in self.progress_stacks:
            done = sum(len(self.passes[s].layers) for s in self.progress_stacks)
            total = sum(self.passes[s].num_layers for s in self.progress_stacks)
            report("forward", done, total)
        return steps
