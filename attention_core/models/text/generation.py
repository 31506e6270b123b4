"""Text generation, written once for every decoder family (gpt-fast's ``generate.py`` shape).

``prefill`` runs the prompt through the model, filling the ``KVCache``; then
``decode_one_token`` feeds one token at a time, reading every earlier position
from the cache.  ``sample`` is a pure function of the logits, ``temperature``,
``top_k`` and a ``torch.Generator`` seeded per request: temperature 0 is
greedy (argmax, as transformers' ``do_sample=False``).

With ``capture_attentions`` every forward's weights are stitched into one
(H, T, T) map per layer over the whole sequence, prompt and generated tokens
alike: the prefill fills the prompt's rows, each decode step one more row.  The
last generated token is fed once more (its logits unused) so that its row,
what it attends to, is there too.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Unpack

import torch

from ...errors import MODEL_CONTEXT, LimitExceeded, SpecError
from ...progress import muted, report
from ..base.kv_cache import KVCache
from ..base.protocols import CausalLM
from ..base.writing import Sampling as Sampling
from ..base.writing import StopReason as StopReason
from ..maps.blocked_pass import BlockedPass


def sampling_values(sampling: Sampling) -> tuple[float, int | None, int | None]:
    """(temperature, top_k, seed) of ``sampling``, the defaults filled in."""
    return sampling.get("temperature", 0.0), sampling.get("top_k"), sampling.get("seed")


def sample(
    logits: torch.Tensor,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> int:
    """The next token id from one position's logits.  Shapes: logits (V,) -> int.

    ``temperature <= 0``: the argmax (greedy).  Otherwise softmax(logits /
    temperature) over the ``top_k`` most likely tokens (all if None), sampled
    with ``generator``.
    """
    logits = logits.cpu()  # the sampler's generator is a CPU one, whatever ran the model
    if temperature <= 0.0:
        return int(torch.argmax(logits))
    scaled = logits.float() / temperature
    if top_k is not None:
        if top_k < 1:
            raise SpecError(f"top_k is {top_k}; it must be at least 1", field="top_k")
        kth = torch.topk(scaled, min(top_k, scaled.shape[-1])).values[-1]
        scaled = torch.where(scaled < kth, float("-inf"), scaled)
    probs = torch.softmax(scaled, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


class AttentionRecorder:
    """Stitches each forward's weights into one (L, H, T, T) tensor over the whole sequence.

    A forward over positions [start, start + t) gives per layer (1, H, t, S)
    with S = start + t keys; those become rows start..start+t-1, columns 0..S-1.
    The cells above the diagonal stay 0 (masked: never attended).
    """

    def __init__(self, num_layers: int, num_heads: int, max_length: int) -> None:
        self.maps = torch.zeros(num_layers, num_heads, max_length, max_length)
        self.length = 0

    def record(self, attentions: Sequence[torch.Tensor]) -> None:
        if not attentions:
            return
        t, keys = attentions[0].shape[-2:]
        start = keys - t
        for layer, weights in enumerate(attentions):
            self.maps[layer, :, start:keys, :keys] = weights[0]  # (H, t, S)
        self.length = keys

    def layers(self, length: int) -> tuple[torch.Tensor, ...]:
        """Per layer (H, length, length), contiguous."""
        return tuple(m[:, :length, :length].contiguous() for m in self.maps)


def _feed(
    model: CausalLM,
    input_ids: torch.Tensor,
    cache: KVCache,
    recorder: AttentionRecorder | None,
    num_logits: int = 1,
    blocked: BlockedPass | None = None,
) -> torch.Tensor:
    out = model(
        input_ids,
        cache=cache,
        num_logits=num_logits,
        output_attentions=recorder is not None,
        blocked=blocked,
    )
    if recorder is not None:
        recorder.record(out.attentions)
    return out.logits


def prefill(
    model: CausalLM,
    input_ids: torch.Tensor,
    cache: KVCache,
    recorder: AttentionRecorder | None,
    blocked: BlockedPass | None = None,
) -> torch.Tensor:
    """Run the prompt (1, P) into an empty ``cache``; the last position's logits (V,)."""
    return _feed(model, input_ids, cache, recorder, blocked=blocked)[0, -1]


def decode_one_token(
    model: CausalLM,
    token: int,
    cache: KVCache,
    recorder: AttentionRecorder | None,
    blocked: BlockedPass | None = None,
) -> torch.Tensor:
    """Feed one token after the cached positions; its logits (V,)."""
    tokens = torch.tensor([[token]])  # (1, 1)
    return _feed(model, tokens, cache, recorder, blocked=blocked)[0, -1]


@dataclass(frozen=True)
class Generation:
    """A prompt and what followed it.

    ``layer_attentions``: per layer (H, T, T) over T = prompt + generated tokens
    (empty unless captured); rows sum to 1, the upper triangle is 0 (masked).
    ``seed``: the sampler's seed (drawn at random when none was given), so the
    same request gives the same tokens again; None when greedy (nothing random).
    """

    prompt_ids: tuple[int, ...]
    new_ids: tuple[int, ...]
    stop_reason: StopReason
    seed: int | None
    layer_attentions: tuple[torch.Tensor, ...] = ()

    @property
    def ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.new_ids


def sampler_seed(temperature: float, seed: int | None) -> tuple[int | None, torch.Generator | None]:
    """The seed to report and the CPU generator to sample with.

    Greedy (``temperature`` 0) takes the argmax each time: no sampler, seed None
    (a seed that played no part is not reported).  Sampling uses ``seed``, or
    one drawn at random so the answer can be reproduced.
    """
    if temperature <= 0.0:
        return None, None
    seed = secrets.randbits(31) if seed is None else seed
    return seed, torch.Generator(device="cpu").manual_seed(seed)


def generate(
    model: CausalLM,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    *,
    eos_token_ids: Collection[int] = (),
    capture_attentions: bool = True,
    blocked: BlockedPass | None = None,
    **sampling: Unpack[Sampling],
) -> Generation:
    """Up to ``max_new_tokens`` tokens after ``prompt_ids``, stopping after an EOS token.

    Greedy with ``temperature`` 0 (the default; ``seed`` is then ignored and
    returned as None); otherwise sampled with a ``torch.Generator`` seeded with
    ``seed``.  The prompt and every generated
    position must fit in the model's context.  ``blocked``: every forward pass's
    attention goes to this pass (``ForwardOptions``).
    """
    temperature, top_k, seed = sampling_values(sampling)
    if not prompt_ids:
        raise SpecError("the prompt has no tokens", field="prompt")
    if max_new_tokens < 1:
        raise SpecError(
            f"max_new_tokens is {max_new_tokens}; it must be at least 1", field="max_new_tokens"
        )
    context = model.config.max_positions
    total = len(prompt_ids) + max_new_tokens
    if total > context:
        raise LimitExceeded(
            f"the prompt ({len(prompt_ids)} tokens) and max_new_tokens ({max_new_tokens}) "
            f"make {total} positions; this model reads at most {context}",
            field="max_new_tokens",
            limit=context,
            found=total,
            setting=MODEL_CONTEXT,
            extra={"prompt_tokens": len(prompt_ids), "max_new_tokens": max_new_tokens},
        )
    seed, generator = sampler_seed(temperature, seed)
    cache = model.new_cache(batch=1, max_length=total)
    c = model.config
    recorder = AttentionRecorder(c.num_layers, c.num_heads, total) if capture_attentions else None
    new_ids: list[int] = []
    stop: StopReason = "max_new_tokens"
    with torch.inference_mode():
        logits = prefill(model, torch.tensor([list(prompt_ids)]), cache, recorder, blocked)
        while True:
            token = sample(logits, temperature, top_k, generator)
            new_ids.append(token)
            if token in eos_token_ids:
                stop = "eos"
            if stop == "eos" or len(new_ids) == max_new_tokens:
                if recorder is not None:  # the last token's own row; no logits needed
                    with muted():
                        last = torch.tensor([[token]])
                        _feed(model, last, cache, recorder, num_logits=0, blocked=blocked)
                report("generate", len(new_ids), max_new_tokens)
                break
            report("generate", len(new_ids), max_new_tokens)
            with muted():  # a token is the unit: its forward's layers are not reported
                logits = decode_one_token(model, token, cache, recorder, blocked)
    length = len(prompt_ids) + len(new_ids)
    return Generation(
        prompt_ids=tuple(prompt_ids),
        new_ids=tuple(new_ids),
        stop_reason=stop,
        seed=seed,
        layer_attentions=recorder.layers(length) if recorder is not None else (),
    )
