"""Every file or folder of the repository that the README or docs/ name in code exists."""

from __future__ import annotations

import re

from tests.docs.commands import DOCUMENTS, ROOT

TOP = "app|attention_core|static|templates|tests|bench|scripts|devtools|deploy|docs|\\.ci"
PATH = re.compile(rf"`((?:{TOP})/[^`\s]*)`")
PLACEHOLDER = re.compile(r"[*<>{}\u2026]")


def test_every_path_named_in_the_docs_exists() -> None:
    named = [
        (document.name, match.group(1))
        for document in DOCUMENTS
        for match in PATH.finditer(document.read_text(encoding="utf-8"))
        if not PLACEHOLDER.search(match.group(1))
    ]
    assert len(named) > 50
    missing = [(where, path) for where, path in named if not (ROOT / path.rstrip("/")).exists()]
    assert missing == []


DOTTED = re.compile(r"`((?:attention_core|app)(?:\.[A-Za-z_]\w*)+)`")


def resolves(name: str) -> bool:
    """``name`` is a module, or an attribute reached from the longest importable prefix."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_module_named_in_the_docs_imports() -> None:
    named = {m.group(1) for d in DOCUMENTS for m in DOTTED.finditer(d.read_text(encoding="utf-8"))}
    assert "attention_core.progress" in named
    assert sorted(n for n in named if not resolves(n)) == []
