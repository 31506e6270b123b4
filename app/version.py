"""The project's version, written here only: pyproject.toml reads it (setuptools' ``attr``),
the app, the API schema and ``attention-viz --version`` show it. A module of its own, so
that reading it imports nothing (the CLI starts without torch)."""

__version__ = "0.1.0"
