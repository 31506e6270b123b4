"""List the functions longer than a limit: the browser's (lines from header to closing
brace) and Python's (body lines, its docstring left out).

    python scripts/long_functions.py [--limit 45] [files or folders ...]   # default: static/js
    python scripts/long_functions.py --limit 50 app attention_core

For JavaScript, a small scanner, not a parser: it skips comments, strings, template
literals and regular expression literals, matches braces, and calls a brace a function
body when it follows ``function name(...)``, a method header ``name(...)`` or an arrow
``=>``.  For Python, ``ast``: a function's lines run from its first statement after the
docstring to its last line; a nested function is named ``outer.inner``.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

KEYWORDS = {"if", "for", "while", "switch", "catch", "with", "return", "typeof", "await"}
REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^") | {""}
WORD_BEFORE_REGEX = {"return", "typeof", "case", "of", "in", "delete", "void", "yield", "await"}


@dataclass(frozen=True)
class Function:
    path: str
    name: str
    first: int
    last: int

    @property
    def lines(self) -> int:
        return self.last - self.first + 1


def _code_mask(text: str) -> str:
    """The text with comments, strings, templates and regexes blanked (newlines kept)."""
    out = list(text)
    i, n = 0, len(text)
    stack: list[str] = []  # "t" = inside a template, "{" = a brace inside ${...}

    def blank(a: int, b: int) -> None:
        for j in range(a, min(b, n)):
            if out[j] != "\n":
                out[j] = " "

    def template_from(i: int) -> int:
        """Scan template text from i (after ` or }); returns index after its end or after ${."""
        j = i
        while j < n:
            c = text[j]
            if c == "\\":
                j += 2
            elif c == "`":
                blank(i, j)
                stack.pop()
                return j + 1
            elif c == "$" and j + 1 < n and text[j + 1] == "{":
                blank(i, j)
                stack.append("{")
                return j + 2
            else:
                j += 1
        blank(i, n)
        return n

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        elif c == "`":
            stack.append("t")
            i = template_from(i + 1)
        elif c == "{" and stack:
            stack.append("{")
            i += 1
        elif c == "}" and stack and stack[-1] == "{":
            stack.pop()
            if stack and stack[-1] == "t":
                i = template_from(i + 1)
            else:
                i += 1
        elif c == "/" and _regex_can_start(text, i):
            j, in_class = i + 1, False
            while j < n and text[j] != "\n":
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == "[":
                    in_class = True
                elif text[j] == "]":
                    in_class = False
                elif text[j] == "/" and not in_class:
                    break
                j += 1
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _regex_can_start(text: str, i: int) -> bool:
    j = i - 1
    while j >= 0 and text[j] in " \t\r\n":
        j -= 1
    prev = text[j] if j >= 0 else ""
    if prev in REGEX_AFTER:
        return True
    m = re.search(r"(\w+)$", text[: j + 1])
    return bool(m and m.group(1) in WORD_BEFORE_REGEX)


def _matching(code: str, close: int, open_c: str, close_c: str) -> int:
    depth = 0
    for j in range(close, -1, -1):
        if code[j] == close_c:
            depth += 1
        elif code[j] == open_c:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _function_name(code: str, brace: int) -> str | None:
    """The name of the function whose body opens at brace, or None when it is no function."""
    head = code[:brace].rstrip()
    if head.endswith("=>"):
        before = head[:-2].rstrip()
        if before.endswith(")"):
            before = before[: _matching(code, len(before) - 1, "(", ")")].rstrip()
        else:
            before = re.sub(r"[\w$]+$", "", before).rstrip()
        before = re.sub(r"async$", "", before).rstrip()
        m = re.search(r"([\w$.]+)\s*[:=]$", before)
        return m.group(1) if m else "(arrow)"
    if not head.endswith(")"):
        return None
    open_p = _matching(code, len(head) - 1, "(", ")")
    before = code[:open_p].rstrip()
    m = re.search(r"function\s*\*?\s*([\w$]*)$", before)
    if m:
        if m.group(1):
            return m.group(1)
        outer = re.search(r"([\w$.]+)\s*[:=]\s*(async\s+)?function\s*\*?$", before)
        return outer.group(1) if outer else "(function)"
    m = re.search(r"([\w$]+)$", before)
    if m and m.group(1) not in KEYWORDS and not re.search(r"\.\s*[\w$]+$", before):
        return m.group(1)
    return None


def functions(path: Path) -> list[Function]:
    text = path.read_text(encoding="utf-8")
    code = _code_mask(text)
    found: list[Function] = []
    opens: list[int] = []
    for i, c in enumerate(code):
        if c == "{":
            opens.append(i)
        elif c == "}" and opens:
            start = opens.pop()
            name = _function_name(code, start)
            if name is not None:
                header = code.rfind("\n", 0, start) + 1
                first = code.count("\n", 0, header) + 1
                found.append(Function(str(path), name, first, code.count("\n", 0, i) + 1))
    return sorted(found, key=lambda f: f.first)


def _body_span(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    """The first and last line of a function's body, its docstring left out."""
    body = node.body
    if ast.get_docstring(node, clean=False) is not None and len(body) > 1:
        body = body[1:]
    return body[0].lineno, body[-1].end_lineno or body[-1].lineno


def python_functions(path: Path) -> list[Function]:
    """Every function and method in a Python file, named by its qualified path."""
    found: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                found.append(Function(str(path), name, *_body_span(child)))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), "")
    return sorted(found, key=lambda f: f.first)


def any_functions(path: Path) -> list[Function]:
    return python_functions(path) if path.suffix == ".py" else functions(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["static/js"])
    parser.add_argument("--limit", type=int, default=45)
    args = parser.parse_args(argv)
    files: list[Path] = []
    for p in map(Path, args.paths):
        files.extend(sorted([*p.glob("*.js"), *p.rglob("*.py")]) if p.is_dir() else [p])
    long = [f for path in files for f in any_functions(path) if f.lines > args.limit]
    for f in sorted(long, key=lambda f: -f.lines):
        print(f"{f.lines:5d}  {f.path}:{f.first}  {f.name}")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
