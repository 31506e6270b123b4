"""What every decoder family's language model shares, written once.

A family (``gpt2.GPT2``, ``llama.Llama``) builds its body under its own
checkpoint names, embeds its tokens its own way (``embed``) and says where its
blocks, final norm and token embedding are.  ``DecoderLM`` owns the rest: the
language-modelling head and its tie to the embedding, the cache, the forward
pass after the embeddings (``stack.run_blocks``), and checkpoints: loading
(memory-mapped, checked name by name against the model) and saving in
transformers' layout.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar, Unpack, cast

import torch
import torch.nn.functional as F
from torch import nn

from ...attention import AttentionSteps, attention_with_steps
from ...blocked_attention import AttentionCall
from ..checkpoints.files import matched_state, read_config, write_checkpoint
from ..checkpoints.safetensors_io import load_checkpoint_tensors
from ..checkpoints.weight_dtype import compute_in_float32, held_state
from ..maps.blocked_pass import BlockedPass
from .kv_cache import KVCache
from .outputs import DecoderOutput
from .protocols import DecoderConfig, ForwardOptions, Wanted
from .stack import first_position, run_blocks

# A config.json's activation names, as transformers maps them.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu_new": lambda t: F.gelu(t, approximate="tanh"),
    "gelu_pytorch_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "gelu_fast": lambda t: F.gelu(t, approximate="tanh"),
    "gelu": F.gelu,
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


def decoder_mask(num_new: int, num_keys: int) -> tuple[torch.Tensor | None, bool]:
    """(attn_mask, is_causal) for ``num_new`` queries placed after the cached keys.

    Query i sits at position ``num_keys - num_new + i`` and may attend to keys
    up to that position.  Without a cache the plain top-left causal mask does it.
    """
    if num_new == num_keys:
        return None, True
    if num_new == 1:
        return None, False  # the newest position may attend to every key
    allowed = torch.ones(num_new, num_keys, dtype=torch.bool).tril(num_keys - num_new)
    return allowed, False


class DecoderSelfAttention(nn.Module):
    """What every decoder family's attention module shares: its sizes and the call itself.

    A family's module projects q, k and v its own way (GPT-2: one fused
    ``c_attn``; Llama: three projections and RoPE) and hands them to ``attend``,
    which masks causally behind any cached keys and runs ``attention_with_steps``
    (dropout only while training), or hands it to the forward pass's ``blocked`` pass
    when it was given one (a long input, no map, every full map in blocks).
    """

    def __init__(
        self,
        layer_idx: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        scale: float,
        dropout: float,
    ) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.scale = scale
        self.dropout = dropout

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocked: BlockedPass | None
    ) -> AttentionSteps:
        """Shapes: q (B, H, T, D), k and v (B, H_kv, S, D), S >= T (the cache first).
        Every step is float32, whatever dtype the layer runs in (``weight_dtype``).
        ``blocked``: the forward pass's blocked pass, if it was given one."""
        q, k, v = q.float(), k.float(), v.float()
        attn_mask, is_causal = decoder_mask(q.shape[-2], k.shape[-2])
        grouped = self.num_kv_heads < self.num_heads
        if blocked is not None:  # a long input, no map, or every map kept: block by block
            call = AttentionCall(q, k, v, attn_mask, is_causal, self.scale, grouped)
            return blocked.steps(self.layer_idx, call)
        return attention_with_steps(
            q,
            k,
            v,
            attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
            scale=self.scale,
            enable_gqa=grouped,
        )


class FamilyConfig(DecoderConfig, Protocol):
    """A family's config dataclass: the common sizes, and what loading and saving need."""

    @property
    def tie_word_embeddings(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...


ConfigT = TypeVar("ConfigT", bound=FamilyConfig)


class DecoderLM(nn.Module, Generic[ConfigT]):
    """A decoder with its language-modelling head; a family subclass supplies its body.

    A subclass's ``__init__`` calls ``super().__init__(config)``, assigns its
    body (so its keys come first, as in transformers' files), then
    ``add_head()``.
    """

    # The family's config dataclass; its ``from_dict`` reads a ``config.json`` dict.
    config_class: ClassVar[type[Any]]
    # Dotted names in the module tree: the token embedding (the tied head's weight), the
    # ``nn.ModuleList`` of blocks (each returns ``(x, steps, trace)``, see ``stack``),
    # and the final norm.
    embedding_name: ClassVar[str]
    blocks_name: ClassVar[str]
    final_norm_name: ClassVar[str]
    # Tensors some checkpoints store that carry no weights (buffers of older code).
    ignored_suffixes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: ConfigT) -> None:
        super().__init__()
        self.config = config

    def add_head(self) -> None:
        c = self.config
        self.lm_head = nn.Linear(c.hidden_size, c.vocabulary_size, bias=False)
        self.tie_weights()
        # Looked up once (a tuple is not registered as a submodule: the keys stay the same).
        blocks = cast(nn.ModuleList, self.get_submodule(self.blocks_name))
        self._stack = (tuple(blocks), self.get_submodule(self.final_norm_name))

    # --- what a family supplies -------------------------------------------------------

    @abstractmethod
    def embed(
        self, input_ids: torch.Tensor, start: int, cache: KVCache | None
    ) -> tuple[torch.Tensor, tuple[object, ...]]:
        """(x (B, T, C), the arguments every block takes before ``want_trace``) for
        ``input_ids`` (B, T) placed at positions ``start ..``."""

    @staticmethod
    def checkpoint_name(key: str) -> str:
        """This model's name for a checkpoint's tensor ``key`` (the same by default)."""
        return key

    # --- shared -----------------------------------------------------------------------

    def embedding(self) -> nn.Embedding:
        return cast(nn.Embedding, self.get_submodule(self.embedding_name))

    @property
    def blocks(self) -> tuple[nn.Module, ...]:
        return self._stack[0]

    @property
    def final_norm(self) -> nn.Module:
        return self._stack[1]

    def tie_weights(self) -> None:
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.embedding().weight

    def new_cache(self, batch: int = 1, max_length: int | None = None) -> KVCache:
        """A cache for ``max_length`` positions (default: the whole context, which for a
        long-context model is large: pass the length generation will reach)."""
        c = self.config
        return KVCache(
            c.num_layers, batch, c.num_kv_heads, max_length or c.max_positions, c.head_dim
        )

    def forward(self, input_ids: torch.Tensor, **options: Unpack[ForwardOptions]) -> DecoderOutput:
        """Logits for ``input_ids`` (B, T), placed after the ``cache``'s positions if given
        (see ``protocols.ForwardOptions``)."""
        cache = options.get("cache")
        start = first_position(cache, input_ids.shape[1], self.config.max_positions)
        return self.decode(input_ids, start, cache, Wanted.of(options))

    def decode(
        self, input_ids: torch.Tensor, start: int, cache: KVCache | None, wanted: Wanted
    ) -> DecoderOutput:
        """The forward pass once the first position is known (a family may step in here)."""
        x, block_args = self.embed(input_ids, start, cache)
        return run_blocks(
            x,
            self.blocks,
            block_args,
            self.final_norm,
            self.lm_head,
            cache=cache,
            num_logits=wanted.num_logits,
            output_attentions=wanted.output_attentions,
            output_hidden_states=wanted.output_hidden_states,
            trace_layer=wanted.trace_layer,
            blocked=wanted.blocked,
            maps_only=wanted.maps_only,
        )

    # --- checkpoints ------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, directory: Path) -> Self:
        """Load a checkpoint directory (config.json + safetensors) for inference.

        The weights stay memory-mapped in their stored dtype; 16-bit ones are read as
        float32 layer by layer as the model runs (``weight_dtype.compute_in_float32``).
        """
        config = cast(ConfigT, cls.config_class.from_dict(read_config(directory)))
        with torch.device("meta"):
            model = cls(config)
        state = model._checkpoint_state(directory)
        model.load_state_dict(state, strict=True, assign=True)
        model.tie_weights()
        compute_in_float32(model)
        return model.eval().requires_grad_(False)

    def save_pretrained(self, directory: Path, metadata: Mapping[str, str] | None = None) -> None:
        """Write ``config.json`` and ``model.safetensors`` in transformers' layout."""
        state = held_state(self)
        if self.config.tie_word_embeddings:
            state.pop("lm_head.weight")  # transformers re-ties it on load
        write_checkpoint(directory, state, self.config.to_dict(), metadata)

    def _checkpoint_state(self, directory: Path) -> dict[str, torch.Tensor]:
        expected = set(self.state_dict())
        state: dict[str, torch.Tensor] = {}
        for key, tensor in load_checkpoint_tensors(directory).items():
            name = self.checkpoint_name(key)
            if name.endswith(self.ignored_suffixes) and name not in expected:
                continue
            state[name] = tensor
        if self.config.tie_word_embeddings:
            # As transformers: a tied head is the embedding, whatever the file holds.
            embedding = state.get(f"{self.embedding_name}.weight", torch.empty(0))
            state["lm_head.weight"] = embedding
        return matched_state(directory, self, state)
