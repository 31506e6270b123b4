"""Which heads matter, in one pass: every head's ablation effect on a loss, estimated.

The loss is a decoder's next-token loss over the text, or ``−log p(token)``
at one position (``Target``).  A head's ablation replaces its context vector
(just before the output projection) by 0 or by its mean over the text's
positions, as ``ablation`` does; its effect is the change in the loss.

- ``attribution_patching``: ``g · (z_ablated − z)``, the gradient at the
  head's context times the change, for every head from one forward and one
  backward pass (a zero-valued leaf added to each layer's context carries
  the gradient).
- ``atp_star`` (Kramár et al., 2024): attribution patching with the
  attention softmax of every later layer recomputed for the change the head's
  ablation makes to that layer's queries and keys (norms frozen at the
  forward's values), instead of linearized through it: the estimate adds,
  per later layer, ``Σ (A_new − A − dA) ⊙ ∂L/∂A``, where ``dA`` is the
  softmax's linear response (already inside the gradient) and ``∂L/∂A =
  g V^T`` (values held).  So a head whose removal moves a saturated softmax
  far is no longer scored by the softmax's slope at the clean point.
  Cancellation between such first-hop terms and the rest of the gradient is
  kept exact per later layer; effects through two attention hops stay linear.
  AtP*'s GradDrop (Kramár et al. 2024, §3.2, Eq. 11) is ``graddrop``: for each
  layer ℓ, the estimate again with no gradient through layer ℓ's residual write
  (its attention and MLP output: ``do(ℓ's output ← its clean value)``), and per
  head ``(1/(L−1)) Σ_{ℓ=1..L} |estimate with ℓ dropped|``.  A head's own layer
  gives 0 and a layer before it changes nothing, so only the L − 1 layers after
  the first need a pass, a backward from layer ℓ's input (given the clean
  gradient at layer ℓ + 1's: the skip connection alone) through the layers
  before it, on the one forward; a head whose effect takes one path scores |estimate|,
  one whose paths cancel in the estimate scores more.  The paper ranks heads by
  this unsigned score (here: ``confirm_top`` with atp_star); ``cancelled`` lists
  the heads whose score is well above |estimate| (their estimate may be a
  cancellation, not a small effect).
- ``direct``: direct logit attribution, each head's output at the scored
  position(s) through the final norm, frozen, onto the unembedding of the
  scored token (the text's mean over positions for the next-token loss).

``exact`` is ``ablation.each_head_effects`` with the same loss.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from ..attention import attention_with_steps
from ..errors import SpecError
from ..models.maps.context_pass import ContextPass
from .ablation import ABLATION_MODES, check_heads, check_length, each_head_effects, masked_edit
from .access import DecoderHeadModel, HeadModel
from .frozen_norm import frozen
from .qk_decomposition import layer_paths
from .residual_parts import output_bias, post_norm

Method = Literal["attribution_patching", "atp_star", "exact"]
METHODS: tuple[str, ...] = ("attribution_patching", "atp_star", "exact")
Target = tuple[int, int] | None  # (position, token id): −log p(token | text up to position)
MAX_CONFIRM = 16  # heads one request may have ablated exactly, each alone
# Score cells (sources × heads × T²) AtP* recomputes per batch of sources.
STAR_BATCH_CELLS = 1 << 23
# Scores per block of the gradient pass's attention (every head) where a layer is blocked (a
# mask tensor, bias, soft-cap or sinks; a causal or unmasked layer is torch's fused kernel,
# its backward too): small enough that a causal map's blocks skip most of its masked half
# (GPT-2 small, T = 1,024: 85 rows a block).
GRADIENT_BLOCK_CELLS = 1 << 20


CANCELLED_RATIO = 2.0  # GradDrop score over |estimate| that marks a head as cancelled
CANCELLED_FLOOR = 0.1  # ... among scores at least this fraction of the largest


def star_cost(num_layers: int, num_heads: int, length: int) -> int:
    """What AtP* costs in attention cells: its softmax recomputation (for every head, each
    later layer's H × T² scores) and GradDrop's L − 1 more passes, each counted as a forward
    and a backward (three forwards of L × H × T² cells): an upper bound, as each is a
    backward from layer ℓ through the ℓ layers before it, on the one forward."""
    softmax = num_layers * (num_layers - 1) // 2 * num_heads * num_heads * length * length
    passes = (num_layers - 1) * 3 * num_layers * num_heads * length * length
    return softmax + passes


@dataclass(frozen=True)
class Attribution:
    """(L, H) grids: ``estimate`` Δloss by ``method``; ``exact`` Δloss (with ``exact`` only);
    ``direct`` the logit each head writes onto the scored token(s); ``loss`` the clean loss."""

    method: str
    mode: str
    loss: float
    estimate: torch.Tensor
    exact: torch.Tensor | None
    direct: torch.Tensor
    target: Target = None
    confirmed: tuple[tuple[int, int, float], ...] = ()  # (layer, head, exact Δloss), 0-based
    graddrop: torch.Tensor | None = None  # atp_star's GradDrop score, (L, H), unsigned
    cancelled: tuple[tuple[int, int], ...] = ()  # (layer, head), 0-based: see the module doc


@dataclass(frozen=True)
class Pass:
    """One forward and backward: per layer the context (T, H, D), its gradient and the
    block's input (T, C); the final norm's input (T, C)."""

    loss: float
    contexts: list[torch.Tensor]
    grads: list[torch.Tensor]
    inputs: list[torch.Tensor]
    final_input: torch.Tensor
    # GradDrop: per layer ℓ ≥ 1, every layer's gradients with ℓ's write dropped
    dropped: tuple[list[torch.Tensor], ...] = ()


def decoder_heads(heads: HeadModel, model_name: str) -> DecoderHeadModel:
    """A loss needs a language-model head: encoders are refused, with the reason."""
    if not isinstance(heads, DecoderHeadModel):
        raise SpecError(
            f"{model_name} is an encoder without a masked-language-model head (the app loads "
            "its encoder only): it has no token probabilities for a loss to attribute",
            field="model",
        )
    return heads


def own_token(heads: DecoderHeadModel, ids: Sequence[int], position: int) -> int:
    """The model's own most likely next token at ``position``."""
    with torch.no_grad():
        final = heads.run(torch.tensor([list(ids)])).hidden[-1]
        return int(heads.unembed(final[0, position]).argmax())


def check_target(
    heads: DecoderHeadModel, length: int, target: tuple[int, int | None] | None
) -> None:
    if target is None:
        return
    position, token = target
    if not 0 <= position < length:
        raise SpecError(
            f"target.position is {position}; the text has {length} tokens (0 to {length - 1})",
            field="target.position",
        )
    if token is not None and not 0 <= token < heads.vocabulary_size:
        raise SpecError(
            f"target.token is id {token}; the vocabulary has {heads.vocabulary_size} ids",
            field="target.token",
        )


def loss_of(
    heads: DecoderHeadModel, ids: torch.Tensor, target: Target
) -> Callable[[torch.Tensor], torch.Tensor]:
    """final-normed states (B, T, C) -> (B,) losses: the mean next-token loss, or
    −log p(target token) at the target position."""

    def loss(final: torch.Tensor) -> torch.Tensor:
        if target is None:
            B, T, C = final.shape
            flat = final[:, :-1].reshape(B * (T - 1), C)  # 2-D: one matrix product, not B
            logits = heads.unembed(flat).float()  # (B (T-1), V)
            nll = F.cross_entropy(logits, ids[1:].expand(B, T - 1).reshape(-1), reduction="none")
            return nll.view(B, T - 1).mean(-1)
        position, token = target
        logits = heads.unembed(final[:, position]).float()  # (B, V)
        return -F.log_softmax(logits, dim=-1)[:, token]

    return loss


def scored(ids: Sequence[int], target: Target) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss's rows and the token scored at each: every next token, or the target."""
    if target is None:
        return torch.arange(len(ids) - 1), torch.tensor(list(ids[1:]))
    return torch.tensor([target[0]]), torch.tensor([target[1]])


def loss_and_gradient(
    unembed: Callable[[torch.Tensor], torch.Tensor],
    rows: torch.Tensor,
    tokens: torch.Tensor,
    final: torch.Tensor,
) -> tuple[float, torch.Tensor]:
    """The mean of −log p(``tokens``) at ``rows`` of the final-normed states (1, T, C)
    (``unembed``: states to logits) and its gradient there: (p − onehot) / rows at the
    logits (by hand: no log-softmax backward), then back through the unembedding by
    autograd."""
    picked = torch.arange(len(rows))
    with torch.inference_mode(False), torch.enable_grad():
        x = final[0, rows].detach().requires_grad_(True)
        logits = unembed(x).float()  # (R, V)
        with torch.no_grad():
            logp = torch.log_softmax(logits, dim=-1)
            loss = -float(logp[picked, tokens].mean())
            slope = logp.exp_()
            slope[picked, tokens] -= 1.0
            slope /= len(rows)
        (at_rows,) = torch.autograd.grad(logits, x, grad_outputs=slope)
    out = torch.zeros_like(final)
    out[0, rows] = at_rows.to(out.dtype)
    return loss, out


def gradient_pass(
    heads: DecoderHeadModel, ids: Sequence[int], target: Target, graddrop: bool = False
) -> Pass:
    """One forward and one backward pass: contexts, their gradients, block inputs.  With
    ``graddrop``, also each layer ℓ ≥ 1's GradDrop gradients from the same forward: with no
    gradient through ℓ's write, the gradient at ℓ's input is the clean one at ℓ + 1's (the
    skip connection alone), backpropagated from there to the layers before ℓ; ℓ's own
    contexts get none, the layers after ℓ keep theirs."""
    L = heads.num_layers
    tensor = torch.tensor([list(ids)])
    with torch.inference_mode(False), torch.enable_grad():
        run = _forward(heads, tensor)
        states = run.states
        loss, at_final = loss_and_gradient(heads.unembed, *scored(ids, target), states.detach())
        ends = [run.live[n] for n in range(1, L)] + [run.final_input.live] if graddrop else []
        found = torch.autograd.grad(
            states,
            [*run.leaves, *ends],
            grad_outputs=at_final,
            allow_unused=True,
            retain_graph=graddrop,
        )
        grads = _filled(found[:L], run.leaves)
        dropped = _dropped(run, found, grads) if graddrop else []
    shape = (len(ids), heads.num_heads, heads.head_dim)
    return Pass(
        loss,
        [run.contexts[n].view(shape) for n in range(L)],
        _per_head(grads, shape),
        [run.live[n].detach()[0].float() for n in range(L)],
        run.final_input.kept[0],
        tuple(_per_head(gs, shape) for gs in dropped),
    )


@dataclass(frozen=True)
class _Forward:
    """A gradient pass's forward: per layer a zero leaf (1, T, H·D) added to its context
    (the context's gradient is the leaf's), the context (T, H·D, float, detached) and the
    block's input as computed; the final norm's input; the last hidden states (1, T, C)."""

    leaves: list[torch.Tensor]
    contexts: dict[int, torch.Tensor]
    live: dict[int, torch.Tensor]
    final_input: _final_input
    states: torch.Tensor


def _forward(heads: DecoderHeadModel, tensor: torch.Tensor) -> _Forward:
    """The forward over ids ``tensor`` (1, T), each context fused or in blocks (no map);
    run with gradients enabled."""
    T = tensor.shape[1]
    width = heads.num_heads * heads.head_dim
    leaves = [torch.zeros(1, T, width, requires_grad=True) for _ in range(heads.num_layers)]
    contexts: dict[int, torch.Tensor] = {}
    live: dict[int, torch.Tensor] = {}

    def edit(n: int, context: torch.Tensor) -> torch.Tensor:
        contexts[n] = context.detach()[0].float()
        return context + leaves[n]

    def keep(n: int, x: torch.Tensor) -> torch.Tensor:
        live[n] = x
        return x

    with heads.editing(edit, keep), _final_input(heads) as final_input:
        final = heads.decoder.model(
            tensor,
            num_logits=0,
            output_hidden_states=True,
            blocked=ContextPass(GRADIENT_BLOCK_CELLS),  # no map: fused, or in blocks
        )
    return _Forward(leaves, contexts, live, final_input, final.hidden_states[-1])


def _dropped(
    run: _Forward, found: Sequence[torch.Tensor | None], grads: list[torch.Tensor]
) -> list[list[torch.Tensor]]:
    """GradDrop's gradients per layer ℓ ≥ 1: the clean gradient at ℓ + 1's input (``found``
    past the leaves') taken back from ℓ's input to the layers before ℓ, zeros at ℓ, the clean
    ``grads`` after it."""
    leaves, live = run.leaves, run.live
    L = len(leaves)
    dropped = []
    for layer in range(1, L):  # G at ℓ + 1's input, from ℓ's input
        at_next = found[L + layer - 1 + 1] if layer + 1 < L else found[-1]
        assert at_next is not None
        before = torch.autograd.grad(
            live[layer],
            leaves[:layer],
            grad_outputs=at_next,
            retain_graph=True,
            allow_unused=True,
        )
        dropped.append(
            [
                *_filled(before, leaves[:layer]),
                torch.zeros_like(leaves[layer]),
                *grads[layer + 1 :],
            ]
        )
    return dropped


def _per_head(gs: list[torch.Tensor], shape: tuple[int, int, int]) -> list[torch.Tensor]:
    """Gradients (1, T, H·D) as (T, H, D), float."""
    return [g[0].float().view(shape) for g in gs]


def _filled(
    found: Sequence[torch.Tensor | None], like: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """Gradients with zeros where none reached (a leaf no path from the loss meets)."""
    return [torch.zeros_like(x) if g is None else g for g, x in zip(found, like, strict=True)]


class _final_input:
    """Within the block, this thread's final-norm input is kept (a forward pre-hook): its
    value (``kept``, float, detached) and the tensor itself (``live``)."""

    def __init__(self, heads: DecoderHeadModel) -> None:
        self.module = heads.final_norm
        self.kept: list[torch.Tensor] = []
        self.live = torch.empty(0)
        self.thread = threading.get_ident()

    def __enter__(self) -> _final_input:
        def grab(_m: object, args: tuple[torch.Tensor, ...]) -> None:
            if threading.get_ident() == self.thread:
                self.kept.insert(0, args[0].detach()[0].float())
                self.live = args[0]

        self.handle = self.module.register_forward_pre_hook(grab)
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()


def context_change(context: torch.Tensor, mode: str) -> torch.Tensor:
    """z_ablated − z for every head, (T, H, D)."""
    if mode == "zero":
        return -context
    return context.mean(dim=0, keepdim=True) - context


def patching_estimate(
    run: Pass, mode: str, grads: list[torch.Tensor] | None = None
) -> torch.Tensor:
    """(L, H): Σ over positions and dims of g · (z_ablated − z) (g: ``grads``, or the run's)."""
    return head_estimates(run.contexts, run.grads if grads is None else grads, mode)


def head_estimates(
    contexts: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], mode: str
) -> torch.Tensor:
    """(L, H) from each layer's contexts and their gradients (T, H, D): attribution
    patching's g · (z_ablated − z), summed over positions and dims."""
    return torch.stack(
        [
            (g * context_change(z, mode)).sum(dim=(0, 2))
            for z, g in zip(contexts, grads, strict=True)
        ]
    )


def graddrop_score(estimate: torch.Tensor, dropped: torch.Tensor) -> torch.Tensor:
    """(L, H): (1/(L−1)) Σ_ℓ |estimate with layer ℓ's write dropped| (Kramár et al. 2024,
    §3.2).  ``dropped[ℓ − 1]`` is the estimate with layer ℓ ≥ 1 dropped; for a head in
    layer n, layers ℓ < n leave it as ``estimate`` and ℓ = n makes it 0.  One layer: there
    is no other path, the score is |estimate|."""
    L = estimate.shape[0]
    if L == 1:
        return estimate.abs()
    out = torch.zeros_like(estimate)
    for n in range(L):
        out[n] = n * estimate[n].abs() + dropped[n:, n].abs().sum(0)
    return out / (L - 1)


def cancelled_heads(estimate: torch.Tensor, score: torch.Tensor) -> tuple[tuple[int, int], ...]:
    """The heads whose GradDrop score is well above |estimate| (``CANCELLED_RATIO``) and not
    negligible (``CANCELLED_FLOOR`` of the largest): paths through different later layers
    cancel in their estimate, so a small estimate there does not mean a small effect."""
    floor = CANCELLED_FLOOR * float(score.max()) if score.numel() else 0.0
    hits = (score > CANCELLED_RATIO * estimate.abs()) & (score >= floor) & (score > 0)
    return tuple((int(n), int(h)) for n, h in hits.nonzero().tolist())


def written(
    heads: DecoderHeadModel, layer: int, context: torch.Tensor, change: torch.Tensor
) -> torch.Tensor:
    """(H, T, C): each head's ``change`` (T, H, D) to its context as a change to the residual
    stream: through the output projection, and the post-attention norm (OLMo 2) frozen at
    the layer's clean output."""
    W = heads.out_weights(layer).float()
    out = torch.einsum("thd,hdc->htc", change, W)
    norm = post_norm(heads, layer)
    if norm is None:
        return out
    total = torch.einsum("thd,hdc->tc", context, W) + output_bias(
        heads.projections[layer], W.shape[-1]
    )
    return frozen(norm, total).apply(out)


def star_correction(
    heads: DecoderHeadModel, run: Pass, mode: str, grads: Sequence[list[torch.Tensor]]
) -> torch.Tensor:
    """(G, L, H): AtP*'s softmax term, Σ over later layers of Σ (A_new − A − dA) ⊙ g V^T, for
    each of the G gradient sets ``grads`` (per layer (T, H, D)) on ``run``'s forward."""
    L, H, T = heads.num_layers, heads.num_heads, len(run.inputs[0])
    out = torch.zeros(len(grads), L, H)
    positions = torch.arange(T)
    deltas = [written(heads, n, z, context_change(z, mode)) for n, z in enumerate(run.contexts)]
    for later in range(1, L):
        paths = layer_paths(heads, later, T)
        norms = paths.freeze(run.inputs[later])
        clean = paths.totals(run.inputs[later], positions)
        group = paths.num_heads // paths.num_kv_heads
        q = clean.q[0].transpose(0, 1)  # (H, T, D)
        k, v = (t[0].transpose(0, 1).repeat_interleave(group, 0) for t in (clean.k, clean.v))
        allowed = paths.allowed(T, heads.causal)  # a sliding window, or None
        mask = {
            "attn_mask": allowed,
            "is_causal": heads.causal and allowed is None,
            "scale": paths.scale,
            "softcap": paths.softcap,
        }
        base = attention_with_steps(q, k, v, **mask)  # type: ignore[arg-type]
        A = base.attn_weights  # (H, T, T)
        # Through a soft-cap the scores' change is scaled by its slope, 1 − tanh²(s / cap).
        slope = (
            1.0 if paths.softcap is None else 1 - (base.scaled_scores / paths.softcap).tanh() ** 2
        )
        grad_A = torch.stack(
            [g[later].transpose(0, 1) @ v.transpose(-1, -2) for g in grads]
        )  # (G, H, T, T)
        step = max(1, STAR_BATCH_CELLS // (H * T * T))
        for source in range(later):
            for first in range(0, H, step):
                delta = deltas[source][first : first + step]  # (S, T, C)
                moved = paths.project(delta, positions, norms)
                dq = moved.q.transpose(1, 2)  # (S, H, T, D)
                dk = moved.k.transpose(1, 2).repeat_interleave(group, 1)
                new = attention_with_steps(q + dq, k + dk, v, **mask)  # type: ignore[arg-type]
                dS = (dq @ k.transpose(-1, -2) + q @ dk.transpose(-1, -2)) * paths.scale * slope
                dA = A * (dS - (A * dS).sum(-1, keepdim=True))  # the softmax's linear response
                dA = torch.nan_to_num(dA)  # masked cells: A = 0 there
                rest = new.attn_weights - A - dA  # (S, H, T, T)
                term = torch.einsum("shij,ghij->gs", rest, grad_A)
                out[:, source, first : first + step] += term
    return out


def direct_attribution(
    heads: DecoderHeadModel, run: Pass, ids: Sequence[int], target: Target
) -> torch.Tensor:
    """(L, H): each head's output through the frozen final norm onto the scored token's
    unembedding (the mean over positions of the next token's, without a target)."""
    weight = heads.lm_head.weight
    assert isinstance(weight, torch.Tensor)
    W_U = weight.detach().float()  # (V, C)
    rows, tokens = scored(ids, target)
    norm = frozen(heads.final_norm, run.final_input[rows])
    reads = norm.adjoint(W_U[tokens])  # (R, C): ⟨norm(x), W_U[token]⟩ = ⟨x, reads⟩
    out = []
    for n, z in enumerate(run.contexts):
        W = heads.out_weights(n).float()
        at, post = reads, post_norm(heads, n)
        if post is not None:  # OLMo 2: the head's output goes through its frozen post-norm
            total = torch.einsum("rhd,hdc->rc", z[rows], W)
            at = frozen(post, total + output_bias(heads.projections[n], W.shape[-1])).adjoint(at)
        through = torch.einsum("rc,hdc->rhd", at, W)
        out.append((z[rows] * through).sum(dim=(0, 2)) / len(rows))
    return torch.stack(out)


def exact_effects(
    heads: DecoderHeadModel,
    ids: Sequence[int],
    pairs: Sequence[tuple[int, int]],
    mode: str,
    target: Target,
) -> torch.Tensor:
    """(k,): the exact Δloss of each (layer, head) pair ablated alone, in one batched pass."""
    check_heads(pairs, heads.num_layers, heads.num_heads)
    masks: dict[int, torch.Tensor] = {}
    for row, (layer, head) in enumerate(pairs, start=1):
        mask = masks.setdefault(
            layer, torch.zeros(len(pairs) + 1, heads.num_heads, dtype=torch.bool)
        )
        mask[row, head] = True
    batch = torch.tensor([list(ids)] * (len(pairs) + 1))
    with torch.no_grad():
        final = heads.run(batch, edit=masked_edit(masks, heads.num_heads, mode)).hidden[-1]
        losses = loss_of(heads, batch[0], target)(final)
    return losses[1:] - losses[0]


def top_heads(grid: torch.Tensor, count: int) -> list[tuple[int, int]]:
    """The ``count`` (layer, head) pairs of the largest |value|, largest first."""
    H = grid.shape[1]
    order = grid.flatten().abs().argsort(descending=True)[:count].tolist()
    return [divmod(int(i), H) for i in order]


def attribute(
    heads: HeadModel,
    ids: Sequence[int],
    method: str = "attribution_patching",
    mode: str = "zero",
    target: tuple[int, int | None] | None = None,
    model_name: str = "this model",
    confirm_top: int = 0,
) -> Attribution:
    """Every head's ablation effect on the loss by ``method`` (see the module doc); a
    target token of None is the model's own most likely one there.  ``confirm_top``: that
    many heads of the largest |estimate| are also ablated exactly, each alone."""
    decoder = decoder_heads(heads, model_name)
    if method not in METHODS:
        raise SpecError(f"method {method!r} is not one of {', '.join(METHODS)}", field="method")
    if mode not in ABLATION_MODES:
        raise SpecError(
            f"ablation {mode!r} is not one of {', '.join(ABLATION_MODES)}", field="ablation"
        )
    check_length(decoder, len(ids))
    check_target(decoder, len(ids), target)
    if not 0 <= confirm_top <= MAX_CONFIRM:
        raise SpecError(f"confirm_top is {confirm_top}; 0 to {MAX_CONFIRM}", field="confirm_top")
    scored: Target = None
    if target is not None:
        position, token = target
        scored = (position, own_token(decoder, ids, position) if token is None else token)
    return _attribute(decoder, ids, method, mode, scored, confirm_top)


def _attribute(
    decoder: DecoderHeadModel,
    ids: Sequence[int],
    method: str,
    mode: str,
    target: Target,
    confirm_top: int,
) -> Attribution:
    run = gradient_pass(decoder, ids, target, graddrop=method == "atp_star")
    score: torch.Tensor | None = None
    cancelled: tuple[tuple[int, int], ...] = ()
    with torch.no_grad():
        estimate = patching_estimate(run, mode)
        ranked = estimate
        if method == "atp_star":
            estimate, score = _atp_star(decoder, ids, target, mode, run)
            cancelled = cancelled_heads(estimate, score)
            ranked = score
        exact = None
        if method == "exact":
            losses = loss_of(decoder, torch.tensor(list(ids)), target)
            exact = each_head_effects(decoder, ids, mode, losses=losses)
        direct = direct_attribution(decoder, run, ids, target)
    pairs = top_heads(ranked, min(confirm_top, estimate.numel()))
    effects = exact_effects(decoder, ids, pairs, mode, target).tolist() if pairs else []
    confirmed = tuple(
        (layer, head, float(e)) for (layer, head), e in zip(pairs, effects, strict=True)
    )
    return Attribution(
        method, mode, run.loss, estimate, exact, direct, target, confirmed, score, cancelled
    )


def _atp_star(
    decoder: DecoderHeadModel, ids: Sequence[int], target: Target, mode: str, run: Pass
) -> tuple[torch.Tensor, torch.Tensor]:
    """AtP*'s estimate (attribution patching + the softmax term) and its GradDrop score, the
    same estimate with each layer's write dropped in turn (``graddrop_score``)."""
    star = star_correction(decoder, run, mode, [run.grads, *run.dropped])
    estimate = patching_estimate(run, mode) + star[0]
    variants = [patching_estimate(run, mode, grads) for grads in run.dropped]
    dropped_estimates = torch.stack(variants) + star[1:] if variants else star[1:]
    return estimate, graddrop_score(estimate, dropped_estimates)
