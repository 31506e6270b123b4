"""``tests.requires.require``: a missing package fails under CI and skips elsewhere."""

from __future__ import annotations

import pytest

from tests.requires import require

MISSING = "attention_viz_no_such_package_xyz"


def test_an_installed_package_is_returned() -> None:
    assert require("json").dumps([1]) == "[1]"


def test_a_missing_package_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=MISSING):
        require(MISSING)


def test_a_missing_package_skips_on_a_developer_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        require(MISSING)
