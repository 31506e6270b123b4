"""Compare computed numbers with numbers as a tutorial printed them (see tests/reference_values.py).

The tolerance of each number is half a unit in its last printed digit:
"0.949" allows ±0.0005, "-2.1800e-03" allows ±0.000000005.
"""

from __future__ import annotations

import re
from decimal import Decimal

import torch

_NUMBER = re.compile(r"-?\d+\.\d+(?:e[+-]\d+)?")

# JSON lists (the API's answers), a tensor (the library's), or one number.
Numbers = torch.Tensor | list[object] | float


def parse_printed(text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The numbers in ``text`` (as PyTorch printed them) and half a unit in each one's last digit.

    Returns two flat float64 tensors: the values and their per-entry tolerances.
    """
    tokens = _NUMBER.findall(text)
    assert tokens, f"no numbers in {text!r}"
    values = [float(t) for t in tokens]
    half_units = [float(Decimal(5).scaleb(Decimal(t).as_tuple().exponent - 1)) for t in tokens]
    return torch.tensor(values, dtype=torch.float64), torch.tensor(half_units, dtype=torch.float64)


def assert_printed(actual: Numbers, text: str) -> None:
    """Every number of ``actual`` rounds to ``text``: within half a unit in its last printed digit.

    NaN never matches. ``actual`` is flattened in row-major order, as printed.
    """
    expected, atols = parse_printed(text)
    if isinstance(actual, torch.Tensor):
        got = actual.detach().to(torch.float64).reshape(-1)
    else:
        got = torch.tensor(actual, dtype=torch.float64).reshape(-1)
    assert got.numel() == expected.numel(), (
        f"{got.numel()} values computed, {expected.numel()} printed"
    )
    bad = ~((got - expected).abs() <= atols)  # a NaN difference is never <= atol
    assert not bool(bad.any()), (
        f"differs at flat indices {bad.nonzero().flatten().tolist()}: "
        f"{got[bad].tolist()} vs printed {expected[bad].tolist()} (± {atols[bad].tolist()})"
    )
