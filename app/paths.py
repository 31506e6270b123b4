"""Filesystem locations, resolved from this file (never from the working directory).

In a checkout (and an editable install, and the Docker image) ``static/`` and
``templates/`` sit beside ``app/``; an installed wheel has them inside the package
(``attention_viz/static``, ``attention_viz/templates``: see setup.py).
"""

from pathlib import Path

import plotly
import swagger_ui_bundle

PACKAGE_DIR = Path(__file__).resolve().parent


def _pages_root(package: Path) -> Path:
    """Where ``static/`` and ``templates/`` are: inside the installed package, else beside it."""
    return package if (package / "static").is_dir() else package.parent


PROJECT_ROOT = _pages_root(PACKAGE_DIR)
STATIC_DIR = PROJECT_ROOT / "static"
TEMPLATES_DIR = PROJECT_ROOT / "templates"
# Third-party files kept in the repository (see app/plotly_bundle.py).
VENDOR_DIR = PACKAGE_DIR / "vendor"
# The plotly Python package's full Plotly.js bundle: the fallback.
PLOTLY_PACKAGE_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
SWAGGER_UI_DIR = Path(str(swagger_ui_bundle.swagger_ui_path))
