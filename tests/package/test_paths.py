"""app/paths.py finds the pages' files beside the package (a checkout, an editable install,
Docker) or inside it (the installed wheel)."""

from __future__ import annotations

from pathlib import Path

from app.paths import STATIC_DIR, TEMPLATES_DIR, _pages_root


def test_the_checkout_has_them_beside_app():
    root = Path(__file__).resolve().parents[2]
    assert STATIC_DIR == root / "static" and TEMPLATES_DIR == root / "templates"


def test_an_installed_package_has_them_inside(tmp_path: Path):
    package = tmp_path / "site-packages" / "attention_viz"
    (package / "static").mkdir(parents=True)
    assert _pages_root(package) == package
    checkout = tmp_path / "checkout" / "app"
    checkout.mkdir(parents=True)
    assert _pages_root(checkout) == checkout.parent
