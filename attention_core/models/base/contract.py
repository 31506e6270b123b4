"""The one model contract: a forward pass on a text gives named stacks of kept layers.

Every model, whatever its family or backend, answers ``forward_stacks`` with a
``ModelPass``: its stacks by name (``encoder``, ``decoder``, ``cross``; GPT-2
and BERT have one, an encoder-decoder three), each a ``KeptStack`` with its
query tokens (rows), its key tokens (columns) and, per layer, the
``KeptLayer`` that rebuilds any head's map (q as the softmax saw it, k, v
where asked, the scale, mask or window, soft-cap, score bias and sinks).  Maps
and analyses read these, block by block, at any length: nothing downstream
asks what kind of model it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import torch

from ...errors import SpecError
from ..maps.blocked_pass import BlockedPass
from ..maps.features import attention_rollout
from ..maps.long_maps import BlockSink, KeptLayer, LongPass, kept_tensors
from ..maps.map_grid import MapGrid, MapQuery
from ..maps.text_maps import OfTokenized, TokenizedLike
from .capabilities import STACK_NAMES as STACK_NAMES
from .capabilities import Capabilities, StackName, StackTrace, Target
from .result_cache import ResultCache

# (a stack's rows, whether its first token is a sink) -> the view gathered during the pass
# (None: none; the view function may also refuse the request before any work).
View = Callable[[TokenizedLike, bool], MapQuery | None]


# What a pass is remembered by: (text, text_b, target).
PassKey = tuple[str, str | None, Target | None]


@dataclass(frozen=True)
class PassOptions:
    """What a pass keeps besides every layer's q/k.

    ``view``: the first stack's rows -> the view of it gathered while the pass
    runs (None: none; any view is rebuilt afterwards from the kept q/k);
    ``values``: each layer's v; ``averages_up_to``: each self-attention
    layer's full (T, T) head average, for the rollout, when its stack has at
    most this many tokens; ``hidden_states``: each layer's output (T, C);
    ``watch``: layer (0-based) -> what also reads each block of the first
    stack's weights as the pass makes them (r0, c0, (H, n, w)): an analysis
    summing over every map (the head scores) in the same pass.  A pass found
    in the cache serves these options without having run ``watch``: the
    analysis then reads the kept q/k (cheaper than a new forward).  ``device_pooling``:
    the view gathered on a GPU by ``gpu_pooled``'s kernel where it fits
    (``LongPass.device_pooling``).
    """

    view: View | None = None
    values: bool = False
    averages_up_to: int = 0
    hidden_states: bool = False
    watch: Callable[[int], BlockSink] | None = None
    device_pooling: bool = False

    def served_by(self, found: ModelPass) -> bool:
        """Whether a pass already made (``found``) holds everything these options ask for."""
        first = found.stacks[0]
        averages = len(first.tokens) > self.averages_up_to or bool(first.averages)
        # q/k left on a GPU (``device_pooling``) serve the overview and its zooms only:
        # every other reader expects them on the CPU.
        on_gpu = bool(first.layers) and first.layers[0].query.device.type != "cpu"
        return (
            (not self.values or first.values_kept)
            and (averages or not first.layers)
            and (not self.hidden_states or bool(first.hidden_states))
            and (self.device_pooling or not on_gpu)
        )

    def merged(self, found: ModelPass | None) -> PassOptions:
        """These options and whatever ``found`` kept (so a new pass serves both)."""
        if found is None:
            return self
        first = found.stacks[0]
        return PassOptions(
            self.view,
            self.values or first.values_kept,
            max(self.averages_up_to, len(first.tokens) if first.averages else 0),
            self.hidden_states or bool(first.hidden_states),
            self.watch,
            self.device_pooling,
        )

    def long_pass(
        self,
        layers: int,
        report_layers: bool,
        rows: TokenizedLike,
        view: bool = True,
        first_is_sink: bool = True,
        head_outputs: Callable[[int], torch.Tensor] | None = None,
    ) -> LongPass:
        """A ``LongPass`` of ``layers`` layers of a stack whose rows are ``rows``, keeping
        what these options ask for (``view`` False: not the first stack: no view gathered
        during the pass, no ``watch``; ``head_outputs``: layer -> its (H, D_v, C) output
        slices, for a value-weighted view)."""
        query = self.view(rows, first_is_sink) if self.view is not None and view else None
        return LongPass(
            query,
            layers,
            report_layers=report_layers,
            full_averages=len(rows.tokens) <= self.averages_up_to,
            keep_values=self.values,
            head_outputs=head_outputs,
            watch=self.watch if view else None,
            device_pooling=self.device_pooling,
        )


NO_OPTIONS = PassOptions()  # every layer's q/k, nothing else


@dataclass(frozen=True)
class KeptStack(OfTokenized):
    """One stack of one forward pass.

    ``tokenized``: its query tokens (rows); ``key_tokens``: its key tokens
    (columns; the same for self-attention); ``layers``: per layer what rebuilds
    its maps; ``query``/``grids``: the view gathered during the pass (None/()
    when none); ``averages``: per layer the full (T, S) head average when kept;
    ``hidden_states``: L + 1 (T, C) tensors when kept (as transformers gives
    them); ``token_type_ids``: segment of each row token; ``first_is_sink``:
    whether "hide special" hides the first token too (a decoder's attention
    sink; an encoder-decoder's stacks have none).
    """

    name: StackName
    tokenized: TokenizedLike
    key_tokens: TokenizedLike
    layers: tuple[KeptLayer, ...]
    token_type_ids: tuple[int, ...]
    query: MapQuery | None = None
    grids: tuple[MapGrid, ...] = ()
    averages: tuple[torch.Tensor, ...] = ()
    hidden_states: tuple[torch.Tensor, ...] = ()
    first_is_sink: bool = True

    @property
    def num_heads(self) -> int:
        return self.layers[0].num_heads if self.layers else 0

    @property
    def values_kept(self) -> bool:
        return all(layer.value is not None for layer in self.layers)

    @property
    def self_attention(self) -> bool:
        return self.name != "cross"

    def grid(
        self, layer: int, query: MapQuery, column_scale: torch.Tensor | None = None
    ) -> MapGrid:
        """Layer ``layer``'s (0-based) maps as ``query`` shows them: the grid gathered
        during the pass when it is that view (``gathered``), else rebuilt from the kept
        q/k (``column_scale`` (H, S): value_norm's, see ``KeptLayer.gather``)."""
        found = self.gathered(layer, query)
        if found is not None and (column_scale is None or query.measure == "value_norm"):
            return found
        kept = self.layers[layer]
        grid = MapGrid(query, kept.num_heads, len(self.tokens), len(self.key_tokens.tokens))
        return kept.gather(grid, column_scale=column_scale)

    def gathered(self, layer: int, query: MapQuery) -> MapGrid | None:
        """Layer ``layer``'s grid gathered during the pass when it shows ``query``'s cells
        (its measure included), else None."""
        if (
            self.query is not None
            and self.grids
            and self.query.same_cells(query)
            and (self.query.average or not query.average)
        ):
            return self.grids[layer]
        return None

    @cached_property
    def rollout(self) -> torch.Tensor | None:
        """(L, T, T) attention rollout of the kept full head averages (None: not kept)."""
        if not self.layers:  # a model without attention layers: no rollout step either
            return torch.zeros(0, len(self.tokens), len(self.tokens))
        if not self.averages or not self.self_attention:
            return None
        return attention_rollout([a[None] for a in self.averages])

    @property
    def nbytes(self) -> int:
        held = {id(t): t for layer in self.layers for t in kept_tensors(layer)}  # masks shared
        tensors = [*held.values(), *self.averages, *self.hidden_states]
        grids = sum(g.nbytes for g in self.grids)
        return grids + sum(t.numel() * t.element_size() for t in tensors)


@dataclass(frozen=True)
class ModelPass:
    """One forward pass of a model on a text (and a target): its stacks, first the one whose
    tokens are the text (an encoder-decoder's encoder)."""

    stacks: tuple[KeptStack, ...]

    @property
    def names(self) -> tuple[StackName, ...]:
        return tuple(s.name for s in self.stacks)

    def stack(self, name: str | None = None) -> KeptStack:
        """The stack called ``name`` (None: the first); a ``SpecError`` on ``stack`` naming
        the ones this model has when it has none of that name."""
        if name is None:
            return self.stacks[0]
        for found in self.stacks:
            if found.name == name:
                return found
        have = ", ".join(repr(n) for n in self.names)
        raise SpecError(f"stack {name!r} does not exist; this model has {have}", field="stack")

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.stacks)


class StackedModel(Protocol):
    """What every loaded model answers: ``forward_stacks`` (see the module doc), and what
    it can be asked (``capabilities``)."""

    @property
    def name(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def capabilities(self) -> Capabilities: ...

    def forward_stacks(
        self,
        text: str,
        *,
        text_b: str | None = None,
        target: Target | None = None,
        options: PassOptions = NO_OPTIONS,
    ) -> ModelPass: ...

    def head_outputs(self, stack: str, layer: int) -> torch.Tensor:
        """Each head's slice W_O^h of that layer's output projection, (H, D_v, C)."""
        ...

    def stack_trace(
        self,
        text: str,
        layer: int,
        *,
        text_b: str | None = None,
        target: Target | None = None,
        stack: str | None = None,
        blocked: BlockedPass | None = None,
    ) -> StackTrace:
        """Every tensor of attention layer ``layer`` (0-based) of ``stack`` (None: the first).
        ``blocked``: every attention call of the pass goes to this pass (``context_pass.
        ContextPass``: no map held, the traced layer's steps the context only)."""
        ...


def cached_pass(
    cache: ResultCache[PassKey, ModelPass],
    key: PassKey,
    options: PassOptions,
    run: Callable[[PassOptions], ModelPass],
) -> ModelPass:
    """A recent pass of ``key`` (text, text_b, target) that serves ``options``, or
    ``run``'s new one (keeping what the old one kept too), remembered in ``cache``."""
    found = cache.get(key)
    if found is not None and options.served_by(found):
        return found
    made = run(options.merged(found))
    cache.put(key, made)
    return made
