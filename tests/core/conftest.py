"""Shared helpers for the core tests: compare tensors with numbers as a tutorial printed them."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
import torch

_NUMBER = re.compile(r"-?\d+\.\d+(?:e[+-]\d+)?")


def parse_printed(text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The numbers in ``text`` (as PyTorch printed them) and half a unit in each one's last digit.

    Returns two flat float64 tensors: the values and their per-entry tolerances.
    """
    tokens = _NUMBER.findall(text)
    assert tokens, f"no numbers in {text!r}"
    values = [float(t) for t in tokens]
    half_units = [float(Decimal(5).scaleb(Decimal(t).as_tuple().exponent - 1)) for t in tokens]
    return torch.tensor(values, dtype=torch.float64), torch.tensor(half_units, dtype=torch.float64)


def assert_printed(actual: torch.Tensor, text: str) -> None:
    """``actual`` rounds to ``text``: atol is half a unit in each number's last printed digit.

    Numbers printed with different precision (PyTorch's scientific notation) are
    checked group by group, each with its own atol.
    """
    expected, atols = parse_printed(text)
    flat = actual.detach().to(torch.float64).reshape(-1)
    assert flat.numel() == expected.numel(), (
        f"{flat.numel()} values computed, {expected.numel()} printed"
    )
    for atol in torch.unique(atols).tolist():
        group = atols == atol
        torch.testing.assert_close(flat[group], expected[group], atol=atol, rtol=0)


@pytest.fixture(name="assert_printed")
def assert_printed_fixture():
    """The :func:`assert_printed` helper, as a fixture (test modules do not import conftest)."""
    return assert_printed
