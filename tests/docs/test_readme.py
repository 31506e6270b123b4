"""The README is one screen that points into docs/, and every link in it resolves."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_is_one_screen() -> None:
    assert len(README.splitlines()) <= 60


def test_every_local_link_of_the_readme_exists() -> None:
    targets = [t for t in LINK.findall(README) if "://" not in t]
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert missing == []


def test_the_readme_links_every_page_of_the_docs_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = [next(iter(entry.values())) for entry in config["nav"]]
    linked = {t.removeprefix("docs/") for t in LINK.findall(README)}
    assert sorted(set(pages) - linked - {"index.md"}) == []
    assert sorted(p.name for p in (ROOT / "docs").glob("*.md")) == sorted(pages)
