"""The commands the README and docs/ show, read out of their fenced blocks.

A ```bash block is split into commands: continuation lines joined, comments dropped
(``shlex`` with ``comments=True``), ``&&`` chains split. A ```json block right after
a ```bash block is the answer that block's command prints. A ```python block is an
example that runs as a script; code shown but not meant to run is fenced ```py.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    where: str  # file:line
    language: str
    text: str
    answer: str | None  # the ```json block right after, if any


@dataclass(frozen=True)
class Command:
    where: str
    words: tuple[str, ...]
    answer: str | None

    @property
    def program(self) -> str:
        """The program's name (``.venv/bin/pip`` → ``pip``)."""
        return self.words[0].rsplit("/", 1)[-1]


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = list(FENCE.finditer(text))
    result = []
    for i, match in enumerate(found):
        after = found[i + 1] if i + 1 < len(found) else None
        between = text[match.end() : after.start()] if after else ""
        shown = after is not None and after.group(1) == "json" and not between.strip()
        answer = after.group(2) if after is not None and shown else None
        line = text.count("\n", 0, match.start()) + 1
        where = f"{path.relative_to(ROOT)}:{line}"
        result.append(Block(where, match.group(1), match.group(2), answer))
    return result


def commands() -> list[Command]:
    """Every command of every ```bash block of the README and docs/."""
    found = []
    for path in DOCUMENTS:
        for block in blocks(path):
            if block.language != "bash":
                continue
            joined = block.text.replace("\\\n", " ")
            for line in joined.splitlines():
                words = shlex.split(line, comments=True)
                while words:
                    end = words.index("&&") if "&&" in words else len(words)
                    found.append(Command(block.where, tuple(words[:end]), block.answer))
                    words = words[end + 1 :]
    return found


def python_blocks() -> list[Block]:
    return [b for path in DOCUMENTS for b in blocks(path) if b.language == "python"]


INLINE = re.compile(r"`((?:PYTHONPATH=\$PWD )?\.venv/bin/[a-z-]+ [^`]*)`")


def inline_commands() -> list[tuple[str, str]]:
    """Commands in inline code of the README, docs/ and bench/README.md: (where, command)."""
    found = []
    for path in [*DOCUMENTS, ROOT / "bench/README.md"]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in INLINE.finditer(line):
                found.append((f"{path.relative_to(ROOT)}:{number}", match.group(1)))
    return found
