"""A loaded decoder checkpoint (any family): its model, its tokenizer, recent results.

What the API asks of a decoder, written once over the ``CausalLM`` protocol:
the maps of one text (every layer's attention, head averages, rollout), one
layer's full trace, and generation with the attention of the whole sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Unpack

import torch

from ...errors import PAIR_NEEDS_ENCODER
from ..base.device import running_on, to_cpu
from ..base.protocols import CausalLM
from ..base.result_cache import DEFAULT_CACHE_BYTES
from ..base.writing import Written
from ..checkpoints.files import CONFIG_FILE, GENERATION_CONFIG_FILE, read_json
from ..checkpoints.model_size import check_token_ids
from ..maps.context_pass import context_only
from ..maps.text_maps import MapFeatures
from .generation import Generation, Sampling, StopReason, generate
from .text_model_base import TextModelBase, checkpoint_tokenizer, refuse_pair, tokenizer_file
from .text_tokenizer import TextTokenizer, TokenizedText


@dataclass(frozen=True)
class GeneratedText(MapFeatures):
    """A prompt, what the model wrote after it, and the attention over all of it.

    ``layer_attentions``: per layer (H, T, T), T = prompt + generated tokens.
    """

    prompt: TokenizedText
    new_ids: tuple[int, ...]
    new_tokens: tuple[str, ...]  # the text each generated token adds
    new_special: tuple[bool, ...]
    text: str  # the generated tokens decoded together
    stop_reason: StopReason
    seed: int | None  # None: greedy
    layer_attentions: tuple[torch.Tensor, ...]
    layer_hidden_states: tuple[torch.Tensor, ...] = ()

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.prompt.tokens + self.new_tokens

    @property
    def special(self) -> tuple[bool, ...]:
        return self.prompt.special + self.new_special

    @property
    def token_type_ids(self) -> tuple[int, ...]:
        return (0,) * len(self.tokens)

    @property
    def generated(self) -> tuple[bool, ...]:
        return (False,) * len(self.prompt) + (True,) * len(self.new_ids)

    @property
    def sequence(self) -> TokenizedText:
        """The prompt and what was written as one input, the written ids as they are (so
        a pass over it has the generation's rows, not a new tokenization's)."""
        p, added = self.prompt, ((0, 0),) * len(self.new_ids)
        ids = p.input_ids + self.new_ids
        return TokenizedText(
            ids, self.tokens, p.pieces + self.new_tokens, self.special, p.offsets + added
        )


def eos_token_ids(directory: Path) -> frozenset[int]:
    """The ids that end generation: ``generation_config.json``'s, else ``config.json``'s."""
    for name in (GENERATION_CONFIG_FILE, CONFIG_FILE):
        path = directory / name
        if path.is_file():
            raw = read_json(path)
            check_token_ids(raw, name)  # a string or a nested list: a SpecError naming it
            value = raw.get("eos_token_id")
            if value is not None:
                values = value if isinstance(value, list) else [value]
                return frozenset(int(v) for v in values)
    return frozenset()


class Decoder(TextModelBase[CausalLM]):
    """A decoder-only checkpoint ready to answer: ``encode``, ``trace``, ``generate``.

    Thread safety: the model is in eval mode with frozen weights and each call
    makes its own cache, so several threads may use one ``Decoder`` at once.
    """

    causal = True

    def __init__(
        self,
        name: str,
        family: str,
        model: CausalLM,
        tokenizer: TextTokenizer,
        directory: Path,
        eos_ids: frozenset[int] = frozenset(),
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__(name, family, model, tokenizer, cache_bytes)
        self.directory = directory
        self.eos_ids = eos_ids

    @classmethod
    def from_dir(
        cls,
        directory: Path,
        load_model: Callable[[Path], CausalLM],
        family: str,
        name: str | None = None,
        max_tokens: int | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> Decoder:
        """``load_model(directory)`` (a family's ``from_pretrained``) plus ``tokenizer.json``.

        ``max_tokens`` may lower the tokens a text may have below the model's
        context (``max_positions``), never raise it.
        """
        tokenizer_path = tokenizer_file(directory)
        model = load_model(directory)
        tokenizer = checkpoint_tokenizer(tokenizer_path, model.config.max_positions, max_tokens)
        return cls(
            name or directory.name,
            family,
            model,
            tokenizer,
            directory,
            eos_token_ids(directory),
            cache_bytes,
        )

    def _refuse_pair(self, text_b: str | None) -> None:
        why = f"for encoders; {self.name} is a decoder: put the whole text in text"
        refuse_pair(text_b, why, PAIR_NEEDS_ENCODER)

    # --- generation ---------------------------------------------------------------------

    def generate(
        self,
        prompt: str,
        max_new_tokens: int,
        *,
        capture_attentions: bool = True,
        **sampling: Unpack[Sampling],
    ) -> GeneratedText:
        """Continue ``prompt``; see ``generation.generate``.  Stops after an EOS token."""
        tokenized = self.tokenize(prompt, field="prompt")
        # Without its maps, the prompt's pass holds none (each layer's context block by block).
        with running_on(self.device):
            result: Generation = to_cpu(
                generate(
                    self.model,
                    tokenized.input_ids,
                    max_new_tokens,
                    eos_token_ids=self.eos_ids,
                    capture_attentions=capture_attentions,
                    # Blocked, not fused: the same logits, so the same sample, with or without maps.
                    blocked=context_only(capture_attentions, fused=False),
                    **sampling,
                )
            )
        special_ids = self.tokenizer.special_ids
        return GeneratedText(
            prompt=tokenized,
            new_ids=result.new_ids,
            new_tokens=tuple(self.tokenizer.continuation(result.prompt_ids, result.new_ids)),
            new_special=tuple(i in special_ids for i in result.new_ids),
            text=self.tokenizer.decode(result.new_ids),
            stop_reason=result.stop_reason,
            seed=result.seed,
            layer_attentions=result.layer_attentions,
        )

    def write(self, prompt: str, max_new_tokens: int, **sampling: Unpack[Sampling]) -> Written:
        """The contract's generation: ``generate`` keeping no map; its pass reads the
        prompt's ids and the written ones as they are (the maps' rows are the generation's)."""
        result = self.generate(prompt, max_new_tokens, capture_attentions=False, **sampling)
        reread = partial(self.pass_of, result.sequence)
        return Written.of(result, len(result.prompt), result.generated, reread)


def decoder_loader(
    family: str, load_model: Callable[[Path], CausalLM]
) -> Callable[[Path, str, int, int], Decoder]:
    """``(directory, name, max_tokens, cache_bytes) -> Decoder`` for one family."""

    def load(directory: Path, name: str, max_tokens: int, cache_bytes: int) -> Decoder:
        return Decoder.from_dir(directory, load_model, family, name, max_tokens, cache_bytes)

    return load
