"""Rotary position embeddings (RoPE) as transformers' Llama family computes them.

Split-half layout (transformers' ``rotate_half``): dimension ``i`` of a head
is paired with ``i + D/2``, and the pair is rotated by ``position * inv_freq[i]``.
Meta's and gpt-fast's interleaved form pairs ``2i`` with ``2i + 1`` instead and
needs permuted q/k weights; Hugging Face checkpoints are already in this layout.

The scalings are transformers' ``rope_type`` values; each changes only the
inverse frequencies (and, for ``yarn``, a factor on cos and sin):

- ``linear``: every frequency divided by ``factor``;
- ``dynamic`` (NTK): a larger base once the sequence outgrows
  ``max_position_embeddings``, recomputed from the sequence's length;
- ``llama3``: low frequencies divided by ``factor``, high ones kept, a smooth
  ramp between;
- ``yarn``: a ramp between interpolated and original frequencies, and cos/sin
  multiplied by an attention factor.

The arithmetic follows ``transformers.modeling_rope_utils`` operation for
operation (float32 tensors where it uses them), so the angles agree bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ...errors import SpecError

SCALING_TYPES = ("linear", "dynamic", "yarn", "llama3")
DEFAULT_THETA = 10_000.0


def _number(params: Mapping[str, Any], key: str, default: float | None = None) -> float | None:
    """``params[key]`` as a float (``default`` when absent, None when null)."""
    value = params.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"rope_scaling {key} is {value!r}; it must be a number", field="model")
    return float(value)


def _float(params: Mapping[str, Any], key: str, default: float) -> float:
    value = _number(params, key, default)
    if value is None:
        raise SpecError(f"rope_scaling {key} is null; it must be a number", field="model")
    return value


def _scaling_params(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The config's ``rope_scaling`` (transformers 4) or ``rope_parameters`` (5): one object."""
    params = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    if not isinstance(params, Mapping):
        raise SpecError(f"rope_scaling is {params!r}; it must be an object", field="model")
    if any(isinstance(v, Mapping) for v in params.values()):
        raise SpecError(
            "rope parameters that differ per layer type are not supported", field="model"
        )
    return params


def _check_partial(partial: float | None) -> None:
    if partial is not None and partial != 1.0:
        raise SpecError(
            f"partial_rotary_factor {partial} is not supported: this family rotates "
            "every dimension of a head",
            field="model",
        )


# The keys each scaling needs in its rope_scaling object.
_REQUIRED = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
}


def _check_scaling_keys(params: Mapping[str, Any], rope_type: str) -> None:
    if rope_type not in SCALING_TYPES:
        raise SpecError(
            f"rope_scaling type {rope_type!r} is not supported "
            f"(supported: {', '.join(SCALING_TYPES)})",
            field="model",
        )
    missing = [key for key in _REQUIRED[rope_type] if key not in params]
    if missing:
        raise SpecError(
            f"rope_scaling of type {rope_type!r} needs {', '.join(missing)}", field="model"
        )


def _original_positions(
    raw: Mapping[str, Any], params: Mapping[str, Any], rope_type: str, max_positions: int
) -> int | None:
    """The pre-training length ``yarn`` and ``llama3`` scale from (None for the others)."""
    if rope_type not in ("yarn", "llama3"):
        return None
    # transformers: a top-level value wins, then the dict's, then max_position_embeddings.
    value = raw.get("original_max_position_embeddings")
    if value is None:
        value = params.get("original_max_position_embeddings", max_positions)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(
            f"rope_scaling original_max_position_embeddings is {value!r}; "
            "it must be a positive integer",
            field="model",
        )
    return value


@dataclass(frozen=True)
class RopeConfig:
    """``rope_theta`` and the ``rope_scaling`` of a config, checked.

    ``original_max_positions`` is the pre-training length ``yarn`` and
    ``llama3`` scale from (None for the other kinds).
    """

    theta: float = DEFAULT_THETA
    rope_type: str = "default"
    factor: float = 1.0
    original_max_positions: int | None = None
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    attention_factor: float | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True

    def __post_init__(self) -> None:
        if self.rope_type != "default" and self.rope_type not in SCALING_TYPES:
            raise SpecError(
                f"rope_scaling type {self.rope_type!r} is not supported "
                f"(supported: {', '.join(SCALING_TYPES)})",
                field="model",
            )
        if not self.theta > 0:
            raise SpecError(f"rope_theta is {self.theta}; it must be positive", field="model")
        if not self.factor > 0:
            raise SpecError(
                f"rope_scaling factor is {self.factor}; it must be positive", field="model"
            )
        if self.rope_type == "llama3" and not self.high_freq_factor > self.low_freq_factor:
            raise SpecError(
                f"rope_scaling high_freq_factor ({self.high_freq_factor}) must exceed "
                f"low_freq_factor ({self.low_freq_factor})",
                field="model",
            )

    @property
    def scaled(self) -> bool:
        return self.rope_type != "default"

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], max_position_embeddings: int) -> RopeConfig:
        """From a ``config.json``: transformers 4's ``rope_theta`` + ``rope_scaling`` or 5's
        ``rope_parameters``, read with transformers' precedence (``rope_scaling`` first,
        then values inside the dict, then top-level ones)."""
        params = _scaling_params(raw)
        rope_type = str(params.get("rope_type", params.get("type", "default")))
        theta = _number(params, "rope_theta", _number(raw, "rope_theta", DEFAULT_THETA))
        _check_partial(
            _number(params, "partial_rotary_factor", _number(raw, "partial_rotary_factor"))
        )
        if rope_type == "default":
            return cls(theta=theta or DEFAULT_THETA)
        _check_scaling_keys(params, rope_type)
        original = _original_positions(raw, params, rope_type, max_position_embeddings)
        factor = _number(params, "factor")
        if factor is None and rope_type == "yarn" and original is not None:
            factor = max_position_embeddings / original  # transformers' fallback
        if factor is None:
            raise SpecError(f"rope_scaling of type {rope_type!r} needs a factor", field="model")
        truncate = params.get("truncate", True)
        return cls(
            theta=theta or DEFAULT_THETA,
            rope_type=rope_type,
            factor=factor,
            original_max_positions=original,
            low_freq_factor=_float(params, "low_freq_factor", 1.0),
            high_freq_factor=_float(params, "high_freq_factor", 4.0),
            attention_factor=_number(params, "attention_factor"),
            # transformers reads these with ``or``: 0 and None both mean the default.
            beta_fast=_number(params, "beta_fast") or 32.0,
            beta_slow=_number(params, "beta_slow") or 1.0,
            mscale=_number(params, "mscale"),
            mscale_all_dim=_number(params, "mscale_all_dim"),
            truncate=bool(truncate),
        )

    def to_dict(self) -> dict[str, Any]:
        """``rope_theta`` and ``rope_scaling`` as a ``config.json`` holds them (read by
        transformers 4 and 5 alike)."""
        if not self.scaled:
            return {"rope_theta": self.theta, "rope_scaling": None}
        scaling: dict[str, Any] = {"rope_type": self.rope_type, "factor": self.factor}
        if self.rope_type in ("yarn", "llama3"):
            scaling["original_max_position_embeddings"] = self.original_max_positions
        if self.rope_type == "llama3":
            scaling["low_freq_factor"] = self.low_freq_factor
            scaling["high_freq_factor"] = self.high_freq_factor
        if self.rope_type == "yarn":
            scaling.update(beta_fast=self.beta_fast, beta_slow=self.beta_slow)
            scaling["truncate"] = self.truncate
            for key in ("attention_factor", "mscale", "mscale_all_dim"):
                if getattr(self, key) is not None:
                    scaling[key] = getattr(self, key)
        return {"rope_theta": self.theta, "rope_scaling": scaling}

    def context_length(self, max_position_embeddings: int) -> int:
        """The longest sequence the scaling was configured for.

        transformers: "a factor of x will enable the model to handle sequences
        of length x * original maximum pre-trained length".  The original length
        is ``original_max_position_embeddings`` for yarn and llama3 (Llama 3.1:
        8192 x 8 = 65536 < its 131072, which stays), ``max_position_embeddings``
        for linear and dynamic (dynamic NTK only changes anything beyond it).
        """
        if not self.scaled:
            return max_position_embeddings
        original = self.original_max_positions or max_position_embeddings
        return max(max_position_embeddings, int(self.factor * original))


def inverse_frequencies(
    rope: RopeConfig, head_dim: int, max_position_embeddings: int, seq_len: int
) -> tuple[torch.Tensor, float]:
    """(head_dim // 2,) float32 inverse frequencies, and the factor on cos and sin.

    ``seq_len`` (the position after the last one rotated) matters only to
    ``dynamic``, whose base grows with it past ``max_position_embeddings``.
    """
    dim = head_dim
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim  # (D/2,)
    if rope.rope_type == "dynamic" and seq_len > max_position_embeddings:
        # transformers computes this base from a tensor ``seq_len``: in float32.
        length = torch.tensor(seq_len)
        grown = rope.factor * length / max_position_embeddings - (rope.factor - 1)
        base = rope.theta * grown ** (dim / (dim - 2))
        return 1.0 / (base**exponents), 1.0
    if rope.rope_type == "dynamic":
        # At or below the original length: the base computed at init (python floats).
        ratio = rope.factor * max_position_embeddings / max_position_embeddings - (rope.factor - 1)
        return 1.0 / ((rope.theta * ratio ** (dim / (dim - 2))) ** exponents), 1.0
    inv_freq = 1.0 / (rope.theta**exponents)
    if rope.rope_type == "linear":
        return inv_freq / rope.factor, 1.0
    if rope.rope_type == "llama3":
        return _llama3(rope, inv_freq), 1.0
    if rope.rope_type == "yarn":
        return _yarn(rope, dim, max_position_embeddings)
    return inv_freq, 1.0


def _llama3(rope: RopeConfig, inv_freq: torch.Tensor) -> torch.Tensor:
    old_context = rope.original_max_positions or 1
    low_freq_wavelen = old_context / rope.low_freq_factor
    high_freq_wavelen = old_context / rope.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # Long wavelengths: divided by factor; short ones kept; a smooth ramp between.
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / rope.factor, inv_freq)
    smooth = (old_context / wavelen - rope.low_freq_factor) / (
        rope.high_freq_factor - rope.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def _yarn(rope: RopeConfig, dim: int, max_position_embeddings: int) -> tuple[torch.Tensor, float]:
    base, factor = rope.theta, rope.factor
    original = rope.original_max_positions or max_position_embeddings

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = rope.attention_factor
    if attention_factor is None:
        if rope.mscale and rope.mscale_all_dim:
            attention_factor = mscale(factor, rope.mscale) / mscale(factor, rope.mscale_all_dim)
        else:
            attention_factor = mscale(factor)

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero in the ramp
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)  # (D/2,)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (factor * pos_freqs)
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    keep = 1 - ramp  # 1 where the original frequency is kept (extrapolated)
    return interpolation * (1 - keep) + extrapolation * keep, float(attention_factor)


def rope_angles(
    inv_freq: torch.Tensor, start: int, end: int, attention_scaling: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for positions ``start .. end - 1``, each (end - start, D).

    Shapes: inv_freq (D/2,); the halves repeat (``cat(freqs, freqs)``) to pair
    dimension i with i + D/2, as ``rotate_half`` does.
    """
    positions = torch.arange(start, end).float()  # (T,)
    freqs = positions[:, None] * inv_freq[None, :]  # (T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, D)
    return emb.cos() * attention_scaling, emb.sin() * attention_scaling


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., D) -> (..., D): the second half negated, moved in front of the first."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, H, T, D) queries or keys by (T, D) angles."""
    return x * cos + rotate_half(x) * sin
