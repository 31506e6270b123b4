"""Which directories install as which packages (the metadata is in pyproject.toml).

The checkout keeps its layout (``app/``, ``static/``, ``templates/``, ``attention_core/``
at the top); the wheel installs the web app and the notebook API as ``attention_viz``
(from ``app/``), with the pages' files inside it, so that site-packages gets no
top-level ``app``. ``attention_core`` installs under its own name: it is specific
enough not to collide, the app imports it absolutely, and it never imports the app.
"""

from setuptools import find_namespace_packages, setup

PACKAGE = "attention_viz"
SKIP = ["*.__pycache__", "app.vendor"]

app_packages = [
    PACKAGE + name.removeprefix("app")
    for name in find_namespace_packages(include=["app", "app.*"], exclude=SKIP)
]
core_packages = find_namespace_packages(include=["attention_core*"], exclude=SKIP)

setup(
    packages=[*app_packages, f"{PACKAGE}.static", f"{PACKAGE}.templates", *core_packages],
    package_dir={
        PACKAGE: "app",
        f"{PACKAGE}.static": "static",
        f"{PACKAGE}.templates": "templates",
    },
)
