"""Filesystem locations, resolved from this file (never from the working directory)."""

from pathlib import Path

import plotly
import swagger_ui_bundle

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STATIC_DIR = PROJECT_ROOT / "static"
TEMPLATES_DIR = PROJECT_ROOT / "templates"
# Third-party files kept in the repository (see app/plotly_bundle.py).
VENDOR_DIR = Path(__file__).resolve().parent / "vendor"
# The plotly Python package's full Plotly.js bundle: the fallback.
PLOTLY_PACKAGE_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
SWAGGER_UI_DIR = Path(str(swagger_ui_bundle.swagger_ui_path))
