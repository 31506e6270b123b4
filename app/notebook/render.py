"""A view as one self-contained HTML output: a page in an ``<iframe srcdoc>``.

The page holds everything: the stylesheets, the modules (``bundle.py``), and the data
as JSON in a ``<script type="application/json">`` block, which the script parses
(never pasted into code). Nothing is loaded from a server or a CDN.

Why a frame (``srcdoc``) rather than the page's elements injected into the notebook:
the pages' stylesheet styles ``body``, ``main``, ``h1``, buttons…, and their modules keep
page-wide state (one plot registry per document, one ``import.meta``); inside its own
document each view keeps the notebook's styles intact and cannot collide with another
view, whatever ids both use. The frame is same-origin (``srcdoc`` without a sandbox),
so the page sets the frame's height to fit its content. It renders in Jupyter,
JupyterLab, VS Code and Colab, and in a notebook exported to HTML and opened offline.
"""

from __future__ import annotations

import html
import uuid
from pathlib import Path
from typing import Any

import orjson

from .bundle import bundle, stylesheet

ENTRY = "notebook.js"
STYLESHEETS = ("app.css", "model.css", "why.css", "notebook.css")
# Room the frame takes before its page has measured itself.
INITIAL_HEIGHT = 640


def data_block(payload: dict[str, Any]) -> str:
    """The payload as JSON safe inside ``<script>``: ``<``, ``>`` and ``&`` escaped
    (``\\u003c``...), as Jinja's ``tojson`` does for the app's pages."""
    text = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _inline(text: str, tag: str) -> str:
    """Text for an inline ``<script>``/``<style>``, which must not close its own element."""
    if f"</{tag}" in text.lower():
        raise ValueError(f"inline {tag} text contains </{tag}")
    return text


def page(payload: dict[str, Any]) -> str:
    """The view's whole page, as a standalone HTML document."""
    title = html.escape(str(payload.get("title", "attention-viz")))
    css = _inline(stylesheet(*STYLESHEETS), "style")
    script = _inline(bundle(ENTRY), "script")
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{title} · attention-viz</title><style>{css}</style></head>"
        "<body data-page='notebook'><main></main>"
        f"<script type='application/json' id='view-data'>{data_block(payload)}</script>"
        f"<script type='module'>{script}</script></body></html>"
    )


def frame(document: str, view_id: str, title: str) -> str:
    """The page in an ``<iframe srcdoc>`` with an id of its own."""
    return (
        f'<iframe id="{view_id}" class="attention-viz-view" title="{html.escape(title)}" '
        f'style="width: 100%; height: {INITIAL_HEIGHT}px; border: 0; display: block" '
        f'srcdoc="{html.escape(document, quote=True)}"></iframe>'
    )


class NotebookView:
    """A rendered view. ``data``: the HTML output (as ``IPython.display.HTML.data``, so
    bertviz's ``html_action="return"`` habits work); ``page``: the standalone document."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        self.id = f"attention-viz-{uuid.uuid4().hex[:12]}"
        self.page = page(payload)
        self.data = frame(self.page, self.id, str(payload.get("title", "attention-viz")))

    def _repr_html_(self) -> str:
        return self.data

    def save(self, path: str | Path) -> Path:
        """Write the standalone page (opens in any browser, offline)."""
        target = Path(path)
        target.write_text(self.page, encoding="utf-8")
        return target

    def __repr__(self) -> str:
        return f"<attention-viz view {self.payload.get('view')}: {self.payload.get('title')}>"


def deliver(view: NotebookView, html_action: str) -> NotebookView | None:
    """bertviz's ``html_action``: ``"view"`` displays the view, ``"return"`` returns it."""
    if html_action == "return":
        return view
    if html_action != "view":
        raise ValueError(f"html_action must be 'view' or 'return'; found {html_action!r}")
    try:
        from IPython.display import display
    except ImportError as exc:  # pragma: no cover - IPython comes with every notebook
        raise RuntimeError(
            "html_action='view' shows the view in a notebook (IPython); use "
            "html_action='return' and .save(path) elsewhere"
        ) from exc
    display(view)  # type: ignore[no-untyped-call]  # its _repr_html_
    return None
