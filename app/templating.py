"""The one Jinja environment of the HTML pages, with the helpers base.html uses."""

from __future__ import annotations

from fastapi.templating import Jinja2Templates

from . import paths
from .routes.assets import plotly_url
from .static_files import import_map, module_graph, versioned_url

templates = Jinja2Templates(directory=paths.TEMPLATES_DIR)
templates.env.globals["plotly_url"] = plotly_url
templates.env.globals["module_graph"] = module_graph
templates.env.globals["import_map"] = import_map
templates.env.globals["versioned_url"] = versioned_url
