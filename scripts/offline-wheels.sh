#!/usr/bin/env bash
# The app's Python packages as wheels in .whl/, for a GPU machine with no network whose
# image already has torch, triton, tokenizers, safetensors, huggingface_hub and numpy
# (a CUDA image for Python 3.12).  There, from the repository's root:
#     . .whl/setup.sh && python3 bench/bench_gpu_big.py --root /tmp/bigckpt --record
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
for package in fastapi starlette pydantic pydantic_core pydantic-settings python-dotenv orjson \
    annotated-types typing-inspection python-multipart plotly transformers typing_extensions anyio \
    opentelemetry-api httpx2 httpcore2 truststore idna regex swagger-ui-bundle-v2; do
  version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('$package'))")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl "$package==$version"
done
cat > .whl/setup.sh <<'SETUP'
# Sourced on the GPU machine: the wheels unpacked (no pip needed), then an import check.
mkdir -p /tmp/site && for w in .whl/*.whl; do python3 -m zipfile -e "$w" /tmp/site; done
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
python3 -c "import torch, transformers, triton, fastapi; from fastapi.testclient import TestClient; from app.main import create_app; print(torch.__version__, transformers.__version__, triton.__version__)"
SETUP
du -sh .whl
