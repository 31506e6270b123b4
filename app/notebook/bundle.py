"""The pages' ES modules as one inline script, for a view with no server behind it.

A notebook output cannot load ``static/js/*.js`` (there is no server, and an import map
cannot be added to a notebook's page), so the entry module and everything it imports
statically are joined into one ``<script type="module">``: each module becomes a
function that returns its exports, called once, in dependency order. The rewriting is
the little the project's modules need (their habits: ``import { a, b as c } from
"./x.js"``, ``export function|const|class``, ``export { a }``); a construct it does not
know raises ``BundleError`` rather than producing a broken script. Exports are copied
when the module has run, so a module must not reassign an exported binding later (none
does: state is read through functions such as ``getWeightRange``).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from ..paths import STATIC_DIR

JS_DIR = STATIC_DIR / "js"
CSS_DIR = STATIC_DIR / "css"

_IMPORT = re.compile(
    r"""^import\s*\{(?P<names>[^}]*)\}\s*from\s*["']\./(?P<path>[\w./-]+\.js)["'];?[ \t]*$""",
    re.MULTILINE,
)
_SIDE_IMPORT = re.compile(r"""^import\s*["']\./[\w./-]+\.js["'];?""", re.MULTILINE)
_OTHER_IMPORT = re.compile(r"^import\b(?!\s*\()", re.MULTILINE)
_EXPORT_DECLARATION = re.compile(
    r"^export\s+((?:async\s+)?function\*?|const|let|class)\s+([\w$]+)", re.MULTILINE
)
_EXPORT_LIST = re.compile(r"^export\s*\{(?P<names>[^}]*)\};?[ \t]*$", re.MULTILINE)
_OTHER_EXPORT = re.compile(r"^export\b", re.MULTILINE)


class BundleError(ValueError):
    """A module uses a form of import or export the bundler does not rewrite."""


def _pairs(names: str) -> list[tuple[str, str]]:
    """``a, b as c`` -> [("a", "a"), ("b", "c")] (exported name, local name)."""
    pairs = []
    for item in names.split(","):
        parts = item.split()
        if not parts:
            continue
        if len(parts) == 3 and parts[1] == "as":
            pairs.append((parts[0], parts[2]))
        elif len(parts) == 1:
            pairs.append((parts[0], parts[0]))
        else:
            raise BundleError(f"cannot read the import/export list {names!r}")
    return pairs


def _module_name(importer: str, spec: str) -> str:
    """``./x.js`` imported from ``js/<importer>`` -> ``x.js`` (a path under js/)."""
    return (Path(importer).parent / spec).as_posix().removeprefix("./")


def _rewrite(name: str, source: str) -> tuple[str, list[str]]:
    """A module's body as plain statements, and the modules it imports (in order)."""
    imports: list[str] = []

    def imported(match: re.Match[str]) -> str:
        module = _module_name(name, match["path"])
        imports.append(module)
        fields = ", ".join(
            f"{exported}: {local}" if exported != local else local
            for exported, local in _pairs(match["names"])
        )
        return f"const {{ {fields} }} = __modules[{json.dumps(module)}];"

    body = _IMPORT.sub(imported, source)
    if _SIDE_IMPORT.search(body) or _OTHER_IMPORT.search(body):
        raise BundleError(f"{name}: an import the bundler does not rewrite")
    exports: list[tuple[str, str]] = []

    def declared(match: re.Match[str]) -> str:
        exports.append((match[2], match[2]))
        return f"{match[1]} {match[2]}"

    body = _EXPORT_DECLARATION.sub(declared, body)

    def listed(match: re.Match[str]) -> str:
        exports.extend((local, exported) for local, exported in _pairs(match["names"]))
        return ""

    body = _EXPORT_LIST.sub(listed, body)
    if _OTHER_EXPORT.search(body):
        raise BundleError(f"{name}: an export the bundler does not rewrite")
    fields = ", ".join(f"{exported}: {local}" for local, exported in exports)
    wrapped = f"__modules[{json.dumps(name)}] = (() => {{\n{body}\nreturn {{ {fields} }};\n}})();\n"
    return wrapped, imports


@cache
def bundle(entry: str) -> str:
    """``static/js/<entry>`` and its static imports as one module script's text."""
    rewritten: dict[str, tuple[str, list[str]]] = {}
    order: list[str] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in stack:
            raise BundleError(f"import cycle: {' -> '.join((*stack, name))}")
        if name in rewritten:
            return
        path = JS_DIR / name
        if not path.is_file():
            raise BundleError(f"no module static/js/{name}")
        rewritten[name] = _rewrite(name, path.read_text(encoding="utf-8"))
        for child in rewritten[name][1]:
            visit(child, (*stack, name))
        order.append(name)  # after everything it imports

    visit(entry, ())
    parts = ["const __modules = {};\n", *(rewritten[name][0] for name in order)]
    return "".join(parts)


@cache
def stylesheet(*names: str) -> str:
    """``static/css/<name>`` files, joined."""
    return "\n".join((CSS_DIR / name).read_text(encoding="utf-8") for name in names)
