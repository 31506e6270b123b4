"""Every attention layer of a transformers model, computed by ``attention_with_steps`` and kept.

transformers dispatches each attention layer of nearly every family through
``AttentionInterface`` (the layer's query, key and value after its own work:
q/k norms, RoPE, partial rotary; the mask; the family's extras as keyword
arguments) and builds masks through ``AttentionMaskInterface``.  ``register``
puts ``core_attention`` and ``boolean_mask`` there under ``ATTENTION_NAME``;
a model loaded with ``attn_implementation=ATTENTION_NAME`` then runs every
attention through the core.  A forward pass that wants more than the output
hands its attention calls an ``AttentionRun`` as a keyword of the model's
forward (``handing``): its ``Capture`` keeps each call as a ``CapturedCall``
tagged with its ``Site`` (stack and layer); its ``blocked`` pass computes them
block by block.  transformers passes the forward's keywords down to the
attention function; the modules those keywords never reach (an adapter's,
``adapters``; a family's whose layers drop them) get the run from a pre-hook
of theirs held for the call.  Nothing is held between calls or shared by
threads: two requests running one model at once each reach their own run.

Without the mask function transformers hands such a model no mask at all
(``None``) and a decoder silently attends to the future: ``boolean_mask``
materializes the causal / sliding-window / padding mask as booleans (True =
may attend), which is what ``attention_with_steps`` takes; only a decoder's
pass without full maps describes a plain causal mask instead of building it
(``described_mask``: the call is then ``is_causal``).  A family
that adds an additive term of its own to the mask (DeepSeek-V4 concatenates
its compressor's 0 / -inf block bias, cast to the mask's dtype: on booleans
-inf would read True, may attend) is loaded under ``ADDITIVE_NAME`` instead,
with transformers' additive float mask, which ``as_allowed`` reads back.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

import torch
from torch import nn
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.masking_utils import eager_mask, sdpa_mask

from ...attention import AttentionSteps, attention_with_steps
from ...blocked_attention import AttentionCall, BiasRule, ScoreBias
from ...errors import SpecError
from ...progress import report
from ..maps.blocked_pass import BlockedPass
from .described_mask import causal_call, mask_arguments

# The name our attention and mask functions are registered under.
ATTENTION_NAME = "attention_viz"
# The forward keyword that carries a pass's ``AttentionRun`` to the attention function.
RUN_KEYWORD = "attention_viz_run"
# Ours with transformers' additive float masks (0 / the dtype's minimum), for families
# that add terms of their own to the mask.
ADDITIVE_NAME = "attention_viz_additive"

Stack = Literal["encoder", "decoder", "cross"]
Kind = Literal["encoder", "decoder", "encoder-decoder"]
STACKS: tuple[Stack, ...] = ("encoder", "decoder", "cross")

# Module names of cross-attention layers (BART/Marian/Whisper, T5, BERT-as-decoder, others).
CROSS_ATTENTION_NAMES = frozenset(
    {"encoder_attn", "EncDecAttention", "crossattention", "cross_attn", "cross_attention"}
)
_INDEX = re.compile(r"^\d+$")


class CaptureFailed(SpecError):
    """A model's attention could not be captured as it must be (a layer missing, its
    forward failing): the model is refused with this reason from then on."""

    kind = "model_unsupported"


@dataclass(frozen=True)
class Site:
    """Where an attention call happened: its stack, its 0-based layer, its module's path."""

    stack: Stack
    layer: int
    module: str


@dataclass(frozen=True)
class CapturedCall:
    """One attention call.  Shapes (B, H query heads, H_kv kv heads, T queries, S keys, D):
    query (B, H, T, D); key, value (B, H_kv, S, D), as the attention received them
    (after RoPE, q/k norms); ``steps``: every step, (B, H, T, S) scores and weights,
    (B, H, T, D) context.  ``x``: the attention module's input (B, T, C) when hooked.
    """

    site: Site
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    steps: AttentionSteps
    x: torch.Tensor | None = None

    @property
    def weights(self) -> torch.Tensor:
        return self.steps.attn_weights


def site_of(path: str, kind: Kind, layer_idx: int | None = None) -> Site:
    """The site of the attention module at ``path`` (``model.layers.3.self_attn``).

    The layer is the first number in the path (``encoder.block.2.layer.1.EncDecAttention``
    is layer 2), else the module's ``layer_idx``, else 0.  The stack: ``cross`` for a
    cross-attention module; in an encoder-decoder ``decoder`` when a part of the path
    starts with "decoder", else ``encoder``; otherwise the model's own kind.
    """
    parts = path.split(".")
    numbers = [int(p) for p in parts if _INDEX.match(p)]
    layer = numbers[0] if numbers else (layer_idx if layer_idx is not None else 0)
    stack: Stack
    if any(p in CROSS_ATTENTION_NAMES for p in parts):
        stack = "cross"
    elif kind == "encoder-decoder":
        stack = "decoder" if any(p.startswith("decoder") for p in parts) else "encoder"
    else:
        stack = kind
    return Site(stack, layer, path)


def attention_sites(model: nn.Module, kind: Kind) -> dict[int, Site]:
    """``id(module) -> Site`` for every submodule of ``model`` (only attention ones are asked)."""
    return {
        id(module): site_of(name, kind, getattr(module, "layer_idx", None))
        for name, module in model.named_modules()
    }


@dataclass
class Capture:
    """What one forward pass's attention calls computed, in call order.

    ``keep(site)`` says whether a call's q, k, v and every step are kept
    (True) or only its weights (False: the scores are dropped as soon as the
    call returns, as in a forward without capture).  ``inputs``: each kept
    site's attention input, filled by ``hook_inputs``.
    """

    sites: Mapping[int, Site]
    keep: Callable[[Site], bool] = lambda site: True
    calls: list[CapturedCall] = field(default_factory=list)
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    progress: Mapping[Stack, tuple[int, int]] = field(default_factory=dict)
    per_call: bool = False
    counts: dict[Stack, int] = field(default_factory=dict)

    def record(
        self,
        module: nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        steps: AttentionSteps,
    ) -> None:
        site = self.sites.get(id(module)) or site_of(
            type(module).__name__, "decoder", getattr(module, "layer_idx", None)
        )
        if self.per_call:
            site = replace(site, layer=self.counts.get(site.stack, 0))
            self.counts[site.stack] = site.layer + 1
        if not self.keep(site):
            steps = _weights_only(steps)
        self.calls.append(
            CapturedCall(site, query, key, value, steps, self.inputs.get(site.module))
        )
        self.report(site)

    def report(self, site: Site) -> None:
        """``report("forward", done, total)`` after a layer's attention of a stack in
        ``progress`` (stack -> (layers before it, its layers); total: all of theirs)."""
        if site.stack not in self.progress:
            return
        before, _ = self.progress[site.stack]
        total = sum(layers for _, layers in self.progress.values())
        report("forward", before + site.layer + 1, total)

    def stack(self, stack: Stack) -> list[CapturedCall]:
        """The calls of one stack, by layer (a layer called twice keeps its last call)."""
        by_layer = {c.site.layer: c for c in self.calls if c.site.stack == stack}
        return [by_layer[layer] for layer in sorted(by_layer)]

    def weights(self, stack: Stack) -> tuple[torch.Tensor, ...]:
        """Per layer (B, H, T, S) weights of one stack."""
        return tuple(c.weights for c in self.stack(stack))

    def call(self, stack: Stack, layer: int) -> CapturedCall:
        for captured in self.stack(stack):
            if captured.site.layer == layer:
                return captured
        raise LookupError(f"no {stack} attention call at layer {layer} was captured")


def _weights_only(steps: AttentionSteps) -> AttentionSteps:
    """``steps`` without its score tensors and context: the weights (and sinks' share) stay."""
    empty = steps.attn_weights.new_empty(0)
    return replace(
        steps,
        attn_scores=empty,
        scaled_scores=empty,
        masked_scores=empty,
        context_vec=empty,
        allowed=None,
        biased_scores=None,
        capped_scores=None,
    )


@dataclass(frozen=True)
class AttentionRun:
    """What one forward pass hands each of its attention calls (``core_attention``): the
    ``Capture`` that keeps them and the ``blocked`` pass that computes them (None: not
    asked).  It travels as the forward keyword ``RUN_KEYWORD`` (see ``handing``)."""

    capture: Capture | None = None
    blocked: BlockedPass | None = None


@contextmanager
def handing(run: AttentionRun, handed: Sequence[nn.Module] = ()) -> Iterator[dict[str, Any]]:
    """The keywords that hand ``run`` to one forward pass of a model: give them to its
    forward, which passes them down to the attention function.

    ``handed``: the model's attention modules that keywords do not reach, each then
    handed ``run`` by a pre-hook of its own for the block (removed at its end), when
    called by this thread (the modules are shared: another thread's forward through
    them is left alone); the keywords are then empty (some forwards refuse them).  They
    are an adapted family's modules (``adapters.adapted_modules``) or those of a family
    whose layers do not pass their keywords on (``keyword_modules``): either way every
    attention module of the model.
    """
    keywords: dict[str, Any] = {} if handed else {RUN_KEYWORD: run}
    handles = [
        module.register_forward_pre_hook(_hand_to(threading.get_ident(), run), with_kwargs=True)
        for module in handed
    ]
    try:
        yield keywords
    finally:
        for handle in handles:
            handle.remove()


def _hand_to(owner: int, run: AttentionRun) -> Callable[..., Any]:
    def hand(
        _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        # kwargs None: torch called a hook removed meanwhile the plain way (not ours then).
        if kwargs is None or threading.get_ident() != owner:
            return None
        return args, {**kwargs, RUN_KEYWORD: run}

    return hand


def keyword_modules(model: nn.Module) -> tuple[nn.Module, ...]:
    """The modules of ``model`` that may call the attention function themselves: their
    class's name holds "attention" or "attn" and their forward takes any keyword."""
    found = []
    for module in model.modules():
        name = type(module).__name__.lower()
        if "attention" not in name and "attn" not in name:
            continue
        try:
            parameters = inspect.signature(module.forward).parameters.values()
        except (TypeError, ValueError):  # no signature to read: not one of them
            continue
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            found.append(module)
    return tuple(found)


def carried(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``AttentionRun`` keyword among a module's ``kwargs`` (an adapter passes it on)."""
    return {RUN_KEYWORD: kwargs[RUN_KEYWORD]} if RUN_KEYWORD in kwargs else {}


@contextmanager
def capturing(
    sites: Mapping[int, Site],
    keep: Callable[[Site], bool] = lambda site: True,
    hook_inputs: Mapping[str, nn.Module] | None = None,
    progress: Mapping[Stack, tuple[int, int]] | None = None,
    per_call: bool = False,
) -> Iterator[Capture]:
    """A ``Capture`` for one forward pass, which must be handed it (``handing``).

    ``hook_inputs``: module path -> attention module whose input (its
    ``hidden_states``) is kept as the call's ``x`` (the first positional
    argument, or the ``hidden_states`` or ``query`` keyword; (B, T, C), a
    ``time_first`` module's turned so), by a pre-hook held for the block.  The
    hooks sit on shared modules, so each keeps only what this thread's forward
    passes give it.  ``progress``: stack -> (layers counted before it, its
    layers): each of its layers' attention calls reports ``forward`` progress
    (``attention_core.progress``) and so may raise ``Cancelled``.  ``per_call``:
    see ``Capture``.
    """
    capture = Capture(sites, keep, progress=progress or {}, per_call=per_call)
    owner = threading.get_ident()
    handles = []
    for path, module in (hook_inputs or {}).items():

        def grab(
            _module: nn.Module,
            args: tuple[Any, ...],
            kwargs: dict[str, Any] | None = None,
            path: str = path,
        ) -> None:
            if kwargs is None or threading.get_ident() != owner:  # another thread's forward
                return
            x = args[0] if args else kwargs.get("hidden_states", kwargs.get("query"))
            if isinstance(x, torch.Tensor):  # (B, T, C); an adapter's time-first one turned
                capture.inputs[path] = x.transpose(0, 1) if time_first(_module) else x

        handles.append(module.register_forward_pre_hook(grab, with_kwargs=True))
    try:
        yield capture
    finally:
        for handle in handles:
            handle.remove()


def time_first(module: nn.Module) -> bool:
    """Whether the module's input is (T, B, C) (marked by ``adapters.install_adapters``)."""
    return bool(getattr(module, "time_first", False))


def as_allowed(
    mask: torch.Tensor | None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """A transformers mask as (boolean allowed, additive bias or None).

    Boolean masks (ours) pass through.  An additive float mask (0 where allowed,
    a very negative number or -inf where not) becomes booleans; any other value
    it holds (a bias folded into the mask) comes back as the bias.
    """
    if mask is None or mask.dtype == torch.bool:
        return mask, None
    allowed = mask > torch.finfo(mask.dtype).min / 2
    rest = torch.where(allowed, mask, torch.zeros((), dtype=mask.dtype))
    return allowed, (rest if bool(rest.any()) else None)


def _score_bias(
    position_bias: ScoreBias | None, mask_bias: torch.Tensor | None, whole: bool
) -> ScoreBias | None:
    """The call's score bias: ``position_bias`` (T5's; a ``BiasRule`` kept a rule for a
    blocked call, made whole for a ``whole`` one) plus an additive mask's terms."""
    bias = position_bias
    if isinstance(bias, BiasRule) and (whole or mask_bias is not None):
        bias = bias.full()
    if mask_bias is None:
        return bias
    return mask_bias if bias is None else cast(torch.Tensor, bias) + mask_bias


def core_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    position_bias: ScoreBias | None = None,
    s_aux: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' attention signature over ``attention_with_steps``.

    Shapes: query (B, H, T, D), key and value (B, H_kv, S, D), the mask (B, 1,
    T, S) -> (output (B, T, H, D), weights (B, H, T, S)), as transformers'
    eager attention returns them.  ``position_bias`` (T5) is the score bias,
    ``softcap`` (Gemma 2) caps the scores, ``s_aux`` (gpt-oss) are the sinks;
    the other keywords (``sliding_window``, ``is_causal``...) are already in
    the mask.  The forward's ``AttentionRun`` (the keyword ``RUN_KEYWORD``), when it
    was handed one: its ``blocked`` pass computes the call block by block (a long
    pass returns no weights: None, as SDPA's), its ``capture`` keeps it.  Every step is
    float32 whatever the model's dtype; the output comes back in the query's dtype.
    """
    run: AttentionRun = kwargs.get(RUN_KEYWORD) or AttentionRun()
    held = query.dtype
    causal = causal_call(attention_mask, int(query.shape[-2]))  # ``described_mask``
    query, key, value = query.float(), key.float(), value.float()
    allowed, mask_bias = as_allowed(attention_mask)
    blocked = run.blocked  # a long input, no map, or every map kept: block by block
    bias = _score_bias(position_bias, mask_bias, whole=blocked is None)
    if blocked is not None:
        layer = getattr(module, "layer_idx", None)
        call = AttentionCall(
            query,
            key,
            value,
            allowed,
            causal,
            scaling,
            key.shape[-3] != query.shape[-3],
            bias,
            softcap,
            s_aux,
        )
        steps = blocked.steps(layer if isinstance(layer, int) else None, call, module)
    else:
        steps = attention_with_steps(
            query,
            key,
            value,
            attn_mask=allowed,
            is_causal=causal,
            dropout_p=dropout if module.training else 0.0,
            scale=scaling,
            enable_gqa=key.shape[-3] != query.shape[-3],
            score_bias=cast(torch.Tensor | None, bias),  # whole (``_score_bias``)
            softcap=softcap,
            sinks=s_aux,
        )
    if run.capture is not None:
        run.capture.record(module, query, key, value, steps)
    output = steps.context_vec.transpose(1, 2).contiguous().to(held)  # (B, T, H, D)
    kept = steps.attn_weights.numel() > 0 or steps.context_vec.numel() == 0
    return output, steps.attn_weights if kept else None  # a long pass keeps no weights


def boolean_mask(**kwargs: Any) -> torch.Tensor | None:
    """transformers' mask builder, materialized as booleans (True = may attend).

    A causal or sliding-window mask is never skipped (SDPA's ``is_causal``
    shortcut would reach us as ``None``), except inside ``described_mask.describing``
    (a decoder's pass without full maps), where a plain causal one is (and then a
    bidirectional one never is); a full bidirectional mask without padding may be
    otherwise (``None``: every key allowed).
    """
    kwargs.pop("dtype", None)
    kwargs.pop("config", None)
    arguments, described = mask_arguments(kwargs)
    mask: torch.Tensor | None = sdpa_mask(**arguments)
    if mask is None and described is not None:
        described.causal = True
    return mask


def register(name: str = ATTENTION_NAME, *, with_mask: bool = True) -> str:
    """Register ``core_attention`` (and ``boolean_mask`` unless told not) under ``name``;
    under ``ATTENTION_NAME`` also ``ADDITIVE_NAME``, with transformers' additive masks."""
    masks: dict[str, Callable[..., torch.Tensor | None]] = {name: boolean_mask}
    if name == ATTENTION_NAME:
        masks[ADDITIVE_NAME] = eager_mask
    for registered, mask in masks.items():
        AttentionInterface.register(registered, core_attention)
        if with_mask:
            AttentionMaskInterface.register(registered, mask)
    return name
