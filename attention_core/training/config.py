"""What a training run is: an architecture on the tutorials' ladder and nanoGPT's hyperparameters.

The ladder (each step one idea more than the last, each a configuration of
the same GPT-2 class, see ``architectures.py``):

1. ``bigram``: the next character from this one alone.
2. ``average``: each position averages the ones before it (the tutorials' ``tril``).
3. ``single_head``: one learned self-attention head.
4. ``multi_head``: several heads side by side.
5. ``gpt``: ``n_layer`` full blocks (attention + MLP), as nanoGPT.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import EMPTY_INPUT, HEADS_INDIVISIBLE, LimitExceeded, SpecError

ARCHITECTURES: dict[str, str] = {
    "bigram": "Bigram: the next character from this one alone (no attention)",
    "average": "Averaging the past: uniform causal weights, the tutorials' tril",
    "single_head": "One self-attention head that learns where to look",
    "multi_head": "Several heads side by side in one layer",
    "gpt": "GPT: blocks of multi-head attention and an MLP, as nanoGPT",
}

# Ends on the space after "bank": its row of attention is where a trained head looks back
# at "boat", the word that decides the next letter (b/n/o/u for the river, a/f/t/w for money).
DEFAULT_PROBE = "Kim rowed the boat, then went to the bank "

# What each rung of the ladder fixes, whatever its settings say (the /train page
# shows these values, greyed out, from this table).
FIXED_SETTINGS: dict[str, dict[str, int]] = {
    "bigram": {"n_layer": 0, "n_head": 1},
    "average": {"n_layer": 1, "n_head": 1},
    "single_head": {"n_layer": 1, "n_head": 1},
    "multi_head": {"n_layer": 1},
    "gpt": {},
}


@dataclass(frozen=True)
class TrainConfig:
    """One run's settings, with nanoGPT's names; checked on creation (``SpecError``).

    ``n_layer``/``n_head`` are what the architecture uses: ``bigram`` has no
    layers, ``average`` and ``single_head`` one layer of one head,
    ``multi_head`` one layer of ``n_head`` heads (``effective`` gives the
    sizes actually built).  ``probe`` is the text whose attention a snapshot
    records; ``eval_every``/``snapshot_every`` are in steps (0: only at the
    start and the end).
    """

    architecture: str = "gpt"
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    block_size: int = 64
    batch_size: int = 32
    max_steps: int = 500
    learning_rate: float = 3e-3
    min_learning_rate: float | None = None  # cosine decay ends here; None: learning_rate / 10
    warmup_steps: int = 20
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    dropout: float = 0.0
    seed: int = 1337
    eval_every: int = 50
    eval_iters: int = 20
    snapshot_every: int = 25
    sample_chars: int = 80
    sample_temperature: float = 0.8
    probe: str = DEFAULT_PROBE

    def __post_init__(self) -> None:
        self._check_shape()
        self._check_optimizer()
        self._check_probe()

    def _check_shape(self) -> None:
        """The architecture, the sizes and the step counts."""
        if self.architecture not in ARCHITECTURES:
            raise SpecError(
                f"architecture {self.architecture!r} is unknown; use one of "
                f"{', '.join(ARCHITECTURES)}",
                field="architecture",
            )
        for name in ("n_head", "n_embd", "block_size", "batch_size", "max_steps", "eval_iters"):
            _at_least(name, getattr(self, name), 1)
        for name in ("n_layer", "warmup_steps", "eval_every", "snapshot_every"):
            _at_least(name, getattr(self, name), 0)
        _at_least("sample_chars", self.sample_chars, 0)
        if self.architecture == "gpt":
            _at_least("n_layer", self.n_layer, 1)
        if self.n_embd % self.effective_heads:
            raise SpecError(
                f"n_embd ({self.n_embd}) is not a multiple of n_head ({self.effective_heads})",
                field="n_head",
                kind=HEADS_INDIVISIBLE,
                ctx={"width": self.n_embd, "heads": self.effective_heads},
            )

    def _check_optimizer(self) -> None:
        """The learning rates, dropout and AdamW's settings."""
        if not 0.0 < self.learning_rate <= 1.0:
            raise SpecError(
                f"learning_rate is {self.learning_rate}; it must be in (0, 1]",
                field="learning_rate",
            )
        if self.min_learning_rate is not None and not (
            0.0 <= self.min_learning_rate <= self.learning_rate
        ):
            raise SpecError(
                f"min_learning_rate is {self.min_learning_rate}; it must be in "
                f"[0, learning_rate = {self.learning_rate}]",
                field="min_learning_rate",
            )
        if not 0.0 <= self.dropout < 1.0:
            raise SpecError(f"dropout is {self.dropout}; it must be in [0, 1)", field="dropout")
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise SpecError(
                    f"{name} is {getattr(self, name)}; it must be in [0, 1)", field=name
                )
        for name in ("weight_decay", "grad_clip"):
            if not 0.0 <= getattr(self, name) <= 1e3:
                raise SpecError(
                    f"{name} is {getattr(self, name)}; it must be in [0, 1000]", field=name
                )

    def _check_probe(self) -> None:
        """The sampling temperature and the probe text."""
        if not 0.0 < self.sample_temperature <= 10.0:
            raise SpecError(
                f"sample_temperature is {self.sample_temperature}; it must be in (0, 10]",
                field="sample_temperature",
            )
        if not self.probe:
            raise SpecError(
                "probe is empty; give a few characters of text", field="probe", kind=EMPTY_INPUT
            )
        if len(self.probe) > self.block_size:
            raise LimitExceeded(
                f"probe is {len(self.probe)} characters; the model reads at most block_size = "
                f"{self.block_size}",
                field="probe",
                limit=self.block_size,
                found=len(self.probe),
                setting="block_size",
            )

    @property
    def effective_layers(self) -> int:
        return FIXED_SETTINGS[self.architecture].get("n_layer", self.n_layer)

    @property
    def effective_heads(self) -> int:
        return FIXED_SETTINGS[self.architecture].get("n_head", self.n_head)

    @property
    def final_learning_rate(self) -> float:
        if self.min_learning_rate is not None:
            return self.min_learning_rate
        return self.learning_rate / 10

    def effective(self) -> TrainConfig:
        """This config with ``n_layer``/``n_head`` set to what the architecture builds."""
        return replace(self, n_layer=self.effective_layers, n_head=self.effective_heads)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise SpecError(f"unknown training setting(s): {', '.join(unknown)}", field=unknown[0])
        return cls(**raw)


def _at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise SpecError(f"{name} is {value}; it must be at least {low}", field=name)


# The page's presets: one per step of the ladder, sized to train in about a minute on 2 cores.
PRESETS: dict[str, TrainConfig] = {
    "bigram": TrainConfig(architecture="bigram", n_layer=0, n_head=1),
    "average": TrainConfig(architecture="average", n_layer=1, n_head=1),
    "single_head": TrainConfig(architecture="single_head", n_layer=1, n_head=1),
    "multi_head": TrainConfig(architecture="multi_head", n_layer=1, n_head=4),
    "gpt": TrainConfig(architecture="gpt", n_layer=2, n_head=4),
}


# The fields a run may set over its architecture's preset (API body, CLI flags).
SETTINGS = (
    "n_layer",
    "n_head",
    "n_embd",
    "block_size",
    "batch_size",
    "max_steps",
    "learning_rate",
    "dropout",
    "seed",
    "eval_every",
    "eval_iters",
    "snapshot_every",
    "sample_chars",
    "probe",
)


def preset_config(
    architecture: str, overrides: dict[str, Any], text: str | None = None
) -> TrainConfig:
    """The ``architecture``'s preset with ``overrides``; checked (``SpecError`` naming the field).

    Without a ``probe`` of its own the run probes the default sentence (the
    shipped corpus) or the start of the text's validation split, cut to
    ``block_size``.
    """
    if architecture not in PRESETS:
        TrainConfig(architecture=architecture)  # raises the error naming the choices
    preset = PRESETS[architecture]
    if "probe" not in overrides:
        from .corpus import default_probe

        block_size = int(overrides.get("block_size", preset.block_size))
        probe = DEFAULT_PROBE if text is None else default_probe(text, block_size)
        overrides = {**overrides, "probe": probe[:block_size]}
    return replace(preset, **overrides)
