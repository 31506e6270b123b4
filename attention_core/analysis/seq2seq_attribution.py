"""Which heads of an encoder-decoder matter, in one pass: attribution patching on all three
stacks.

The loss is the decoder's: the mean over the target's tokens of
``−log p(target token i | source, target tokens before i)`` (what ablation's
``loss_before`` is, ``seq2seq_heads``).  One forward (no map held: each
attention's context block by block, ``ContextPass``) with a zero-valued leaf
added to every attention's context just before its output projection (the
encoder's self-attention, the decoder's and the cross-attention), and one
backward from the loss give every head's gradient there; a head's estimate
is ``g · (z_ablated − z)`` summed over its positions (``attribution``'s, zero
or mean ablation: the mean over the stack's own rows, as ablation's).

``exact`` is ``seq2seq_heads.each_head_effects`` of one stack with the same
loss; ``confirm_top`` ablates that stack's heads of the largest |estimate|,
each alone.  AtP*'s softmax recomputation is written for one-stack models and
is refused here with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from ..errors import SpecError
from ..models.base.capabilities import STACK_NAMES, StackName
from ..models.base.out_projections import head_slices
from ..models.hf.seq2seq import EncoderDecoder
from ..models.maps.context_pass import ContextPass
from .ablation import ABLATION_MODES
from .access import editing
from .attribution import (
    GRADIENT_BLOCK_CELLS,
    MAX_CONFIRM,
    METHODS,
    head_estimates,
    loss_and_gradient,
    top_heads,
)
from .frozen_norm import frozen
from .seq2seq_heads import (
    Seq2SeqText,
    each_head_effects,
    heads_effects,
    out_projection,
    seq2seq_forward,
    unembed,
)
from .seq2seq_streams import FINAL, SUBLAYERS, known, norm_module, pre_norm


@dataclass(frozen=True)
class StackAttribution:
    """Every stack's (L, H) ``estimates`` from one pass; for the chosen ``stack``, ``exact``
    (with method ``exact``) and ``confirmed`` (layer, head, exact Δloss), 0-based."""

    method: str
    mode: str
    loss: float
    stack: StackName
    estimates: Mapping[StackName, torch.Tensor]
    exact: torch.Tensor | None = None
    confirmed: tuple[tuple[int, int, float], ...] = ()
    direct: torch.Tensor | None = None  # the chosen stack's direct logit attribution

    @property
    def estimate(self) -> torch.Tensor:
        return self.estimates[self.stack]


@dataclass(frozen=True)
class Gradients:
    """One forward and backward: the loss, per (stack, layer) the contexts and their
    gradients (rows, H, D), and the decoder stream's norms' inputs (T, C) by (layer,
    sublayer) (``seq2seq_streams.norm_module``'s; none for a family of an unknown kind)."""

    loss: float
    contexts: Mapping[tuple[StackName, int], torch.Tensor]
    grads: Mapping[tuple[StackName, int], torch.Tensor]
    norm_inputs: Mapping[tuple[int, int], torch.Tensor]


def _decoder_norms(model: EncoderDecoder) -> list[tuple[tuple[int, int], nn.Module]]:
    """The norms a decoder head's output passes on its way to the logits, in order:
    post-norm, every sublayer's; pre-norm, the final one; none for an unknown kind."""
    if not known(model):
        return []
    if pre_norm(model):
        layers = model.layers_of("decoder")
        return [((layers, FINAL), norm_module(model, "decoder", 0, FINAL))]
    return [
        ((n, i), norm_module(model, "decoder", n, i))
        for n in range(model.layers_of("decoder"))
        for i in range(len(SUBLAYERS["decoder"]))
    ]


def gradient_pass(model: EncoderDecoder, text: Seq2SeqText) -> Gradients:
    """Every attention's context and the loss's gradient there, from one forward (no map
    held: each context fused or in blocks of rows) and one backward."""
    keys = list(model.layer_modules)
    projections = [out_projection(model, stack, layer) for stack, layer in keys]
    H = model.info().heads
    contexts: dict[tuple[StackName, int], torch.Tensor] = {}
    leaves: dict[tuple[StackName, int], torch.Tensor] = {}

    def edit(index: int, context: torch.Tensor) -> torch.Tensor:
        contexts[keys[index]] = context.detach()[0].float()
        leaf = torch.zeros_like(context, requires_grad=True)
        leaves[keys[index]] = leaf
        return context + leaf

    norms = _decoder_norms(model)
    norm_inputs: dict[tuple[int, int], torch.Tensor] = {}

    def keep(index: int, x: torch.Tensor) -> torch.Tensor:
        norm_inputs[norms[index][0]] = x.detach()[0].float()
        return x

    with torch.inference_mode(False), torch.enable_grad():
        hooks = editing(projections, [module for _, module in norms], edit, keep)
        blocked = ContextPass(GRADIENT_BLOCK_CELLS)
        out = seq2seq_forward(model, text, hooks=hooks, blocked=blocked)
        final = out.decoder_hidden_states[-1]  # after the final norm where there is one
        labels = text.labels
        rows = torch.arange(len(labels))
        loss, at_final = loss_and_gradient(partial(unembed, model), rows, labels, final.detach())
        found = torch.autograd.grad(
            final, [leaves[key] for key in keys], grad_outputs=at_final, allow_unused=True
        )
    grads = {
        key: (torch.zeros_like(contexts[key]) if g is None else g.detach()[0].float())
        for key, g in zip(keys, found, strict=True)
    }

    def per_head(x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], H, -1)

    return Gradients(
        loss,
        {key: per_head(z) for key, z in contexts.items()},
        {key: per_head(g) for key, g in grads.items()},
        norm_inputs,
    )


def direct_attribution(
    model: EncoderDecoder, run: Gradients, text: Seq2SeqText, stack: StackName
) -> torch.Tensor | None:
    """(L, H) of a decoder-side ``stack``: each head's output through every later norm of
    the decoder stream, frozen (the later sublayers' writes held), onto the unembedding of
    the target's token at each position, the mean over positions (a logit).  None for the
    encoder's heads (they reach the logits only through the cross-attention) and for a
    family of an unknown kind."""
    norms = _decoder_norms(model)
    if stack == "encoder" or not norms:
        return None
    labels = text.labels
    R, picked = len(labels), torch.arange(len(labels))
    info = model.info()
    with torch.inference_mode(False), torch.enable_grad():
        x = torch.zeros(R, info.hidden, requires_grad=True)
        logits = unembed(model, x)
        (reads,) = torch.autograd.grad(logits[picked, labels].sum(), x)  # the linear readout
    at: dict[tuple[int, int], torch.Tensor] = {}
    for key, module in reversed(norms):  # back from the logits through each frozen norm
        reads = frozen(module, run.norm_inputs[key]).adjoint(reads)
        at[key] = reads
    index = SUBLAYERS["decoder"].index(stack)
    out = []
    for n in range(model.layers_of(stack)):
        W = head_slices(out_projection(model, stack, n), info.heads, info.head_dim).float()
        through = torch.einsum("rc,hdc->rhd", at.get((n, index), reads), W)
        out.append((run.contexts[(stack, n)] * through).sum(dim=(0, 2)) / R)
    return torch.stack(out)


def check_request(method: str, mode: str, confirm_top: int) -> None:
    """A ``SpecError`` naming ``method``, ``ablation`` or ``confirm_top`` when out of range."""
    if method == "atp_star":
        raise SpecError(
            "atp_star recomputes each later layer's softmax of one residual stream; an "
            "encoder-decoder's heads reach the loss through two streams and the "
            "cross-attention: use attribution_patching or exact",
            field="method",
        )
    if method not in METHODS:
        raise SpecError(f"method {method!r} is not one of {', '.join(METHODS)}", field="method")
    if mode not in ABLATION_MODES:
        raise SpecError(
            f"ablation {mode!r} is not one of {', '.join(ABLATION_MODES)}", field="ablation"
        )
    if not 0 <= confirm_top <= MAX_CONFIRM:
        raise SpecError(f"confirm_top is {confirm_top}; 0 to {MAX_CONFIRM}", field="confirm_top")


def seq2seq_attribute(
    model: EncoderDecoder,
    text: Seq2SeqText,
    stack: StackName,
    method: str = "attribution_patching",
    mode: str = "zero",
    confirm_top: int = 0,
) -> StackAttribution:
    """Every head's estimated Δloss, every stack (see the module doc); ``stack`` the one
    ``exact`` and ``confirm_top`` ablate."""
    check_request(method, mode, confirm_top)
    if not text.target.labels:
        raise SpecError("attribution scores the target's tokens: give target", field="target")
    run = gradient_pass(model, text)
    estimates: dict[StackName, torch.Tensor] = {}
    with torch.no_grad():
        for name in STACK_NAMES:
            layers = range(model.layers_of(name))
            estimates[name] = head_estimates(
                [run.contexts[(name, n)] for n in layers],
                [run.grads[(name, n)] for n in layers],
                mode,
            )
        exact = each_head_effects(model, text, stack, mode) if method == "exact" else None
        pairs = top_heads(estimates[stack], min(confirm_top, estimates[stack].numel()))
        effects = heads_effects(model, text, stack, pairs, mode).tolist() if pairs else []
        direct = direct_attribution(model, run, text, stack)
    confirmed = tuple((n, h, float(e)) for (n, h), e in zip(pairs, effects, strict=True))
    return StackAttribution(method, mode, run.loss, stack, estimates, exact, confirmed, direct)
