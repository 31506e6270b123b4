"""The one Jinja environment of the HTML pages, with the helpers base.html uses."""

from __future__ import annotations

from fastapi import Request
from fastapi.templating import Jinja2Templates

from . import paths, plotly_bundle
from .static_files import import_map, module_graph, versioned_url


def plotly_url(request: Request) -> str:
    """The Plotly bundle's versioned URL (``routes.assets`` serves it)."""
    return request.url_for("plotly_versioned", name=plotly_bundle.current().name).path


templates = Jinja2Templates(directory=paths.TEMPLATES_DIR)
templates.env.globals["plotly_url"] = plotly_url
templates.env.globals["module_graph"] = module_graph
templates.env.globals["import_map"] = import_map
templates.env.globals["versioned_url"] = versioned_url
