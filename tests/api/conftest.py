"""Fixtures for the API tests: one in-process app behind FastAPI's TestClient."""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.main import create_app

_NUMBER = re.compile(r"-?\d+\.\d+(?:e[+-]\d+)?")


@pytest.fixture(scope="session")
def client() -> TestClient:
    with TestClient(create_app()) as c:
        yield c


def assert_printed(actual: object, text: str) -> None:
    """Every number of ``actual`` (JSON lists) rounds to ``text`` as a tutorial printed it.

    The tolerance is half a unit in each printed number's last digit.
    """
    printed = _NUMBER.findall(text)
    assert printed, f"no numbers in {text!r}"
    expected = np.array([float(t) for t in printed])
    atol = np.array([float(Decimal(5).scaleb(Decimal(t).as_tuple().exponent - 1)) for t in printed])
    got = np.asarray(actual, dtype=np.float64).reshape(-1)
    assert got.size == expected.size, f"{got.size} values returned, {expected.size} printed"
    bad = np.abs(got - expected) > atol + 1e-12
    assert not bad.any(), (
        f"differs at {np.flatnonzero(bad).tolist()}: {got[bad]} vs {expected[bad]}"
    )


@pytest.fixture(name="assert_printed")
def assert_printed_fixture():
    return assert_printed
