"""MkDocs hooks (mkdocs.yml ``hooks``): the API reference, written from the code at build time.

``api-reference.md``'s ``<!-- openapi -->`` becomes the app's OpenAPI document as
Markdown (devtools/openapi_markdown.py), and the document itself is added to the site
as ``openapi.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # mkdocs runs from .venv/bin: the checkout's packages
    sys.path.insert(0, str(ROOT))

from app.main import create_app  # noqa: E402
from devtools.openapi_markdown import reference  # noqa: E402

OPENAPI_MARK = "<!-- openapi -->"


def _document() -> dict[str, Any]:
    document: dict[str, Any] = create_app().openapi()
    return document


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if OPENAPI_MARK in markdown:
        markdown = markdown.replace(OPENAPI_MARK, reference(_document()))
    return markdown


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    content = json.dumps(_document(), indent=1)
    files.append(File.generated(config, "openapi.json", content=content))
    return files
