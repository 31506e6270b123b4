"""A normalization with its divisor frozen at the forward's value: an affine map.

LayerNorm is ``G ⊙ (x − mean x) / s(x) + β``; RMSNorm (Llama, Qwen3's q/k
norms, Gemma's ``1 + w``) is ``G ⊙ x / s(x)``.  With ``s`` frozen at the
value the forward pass computed for each position, the norm is linear in
``x`` plus the constant ``β``: a sum of residual-stream components goes
through it as the sum of each component's image, the standard "frozen
LayerNorm" linearization.  ``G``, ``β`` and ``s`` are read off the module
itself (its outputs on a few probe inputs and the forward's own output), so
any implementation of either kind works; ``frozen`` checks the result
reproduces the module's output.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import SpecError

_PROBE = 1e3  # a probe input this large makes eps negligible (eps / probe² < 1e-11)
_TINY = 1e-6  # one this small is as good as 0 (probe² / eps < 1e-5 for eps ≥ 1e-7)


@dataclass(frozen=True)
class FrozenNorm:
    """``apply(r) = gain ⊙ center(r)`` per position; ``shift`` the constant β (or zeros).

    gain (P, C): G / s at each of the P positions it was frozen at.
    """

    gain: torch.Tensor
    shift: torch.Tensor
    centered: bool

    def apply(self, parts: torch.Tensor) -> torch.Tensor:
        """parts (..., P, C) components at the P positions -> their linear images."""
        if self.centered:
            parts = parts - parts.mean(dim=-1, keepdim=True)
        return parts * self.gain

    def adjoint(self, reads: torch.Tensor) -> torch.Tensor:
        """reads (..., P, C) -> w with ⟨apply(x), reads⟩ = ⟨x, w⟩ per position (centering
        is its own adjoint): a readout through the norm, without any component's image."""
        out = reads * self.gain
        return out - out.mean(dim=-1, keepdim=True) if self.centered else out


# Norms named LayerNorm that are RMSNorms (no centring, no shift): T5's and its kin's.
RMS_LAYER_NORMS = frozenset({"T5LayerNorm", "MT5LayerNorm", "UMT5LayerNorm", "LongT5LayerNorm"})


def is_layer_norm(module: nn.Module) -> bool:
    name = type(module).__name__
    if name in RMS_LAYER_NORMS:
        return False
    return isinstance(module, nn.LayerNorm) or ("LayerNorm" in name and "RMS" not in name)


def frozen(module: nn.Module, x: torch.Tensor) -> FrozenNorm:
    """The norm ``module`` frozen at its inputs ``x`` (P, C) (a ``SpecError`` if it is
    neither a LayerNorm nor an RMSNorm: its output is then not reproduced)."""
    with torch.no_grad():
        x = x.float()
        C = x.shape[-1]
        centered = is_layer_norm(module)
        y = module(x).float()  # (P, C)
        shift = module(torch.zeros(1, C)).float()[0] if centered else torch.zeros(C)
        probe = torch.ones(C)
        if centered:
            probe[1::2] = -1.0  # mean 0 (C even), variance 1
            probe -= probe.mean()
            probe /= probe.pow(2).mean().sqrt()
        G = (module(_PROBE * probe[None]).float()[0] - shift) * probe / probe.pow(2)
        centered_x = x - x.mean(-1, keepdim=True) if centered else x
        scaled = G * centered_x  # (P, C): s · (y − β)
        target = y - shift
        s = (scaled * target).sum(-1) / target.pow(2).sum(-1).clamp_min(1e-30)  # (P,)
        silent = target.pow(2).sum(-1) < 1e-30  # a zero input (OLMo 2's first token): the
        if bool(silent.any()):  # divisor is the norm's at 0, read off a tiny probe
            tiny = _TINY * probe
            out = module(tiny[None]).float()[0] - shift
            s[silent] = float((G * tiny * out).sum() / out.pow(2).sum().clamp_min(1e-30))
        norm = FrozenNorm(G / s[:, None], shift, centered)
        if not torch.allclose(norm.apply(x) + shift, y, rtol=1e-3, atol=1e-4):
            raise SpecError(
                f"{type(module).__name__} is neither a LayerNorm nor an RMSNorm; "
                "its divisor cannot be frozen",
                field="model",
            )
        return norm
