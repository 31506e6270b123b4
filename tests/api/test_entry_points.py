"""FastAPI's usual commands serve the app: ``uvicorn app.main:app`` and ``fastapi run app/main.py``.

Each is started as a real process on a free port (devtools.server.launch waits
for /healthz), then answers the health probe and the flagship API call.
Importing ``app.main`` builds the module-level ``app`` and must stay cheap:
no model loaded, no data file read.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import httpx
import pytest

from attention_core.presets import RIVER
from devtools.server import ROOT, launch, python_executable, stop_server
from tests import reference_values as ref
from tests.printed import assert_printed

SCRIPTS = Path(python_executable()).parent  # the venv's console scripts
COMMANDS = {
    "uvicorn": [str(SCRIPTS / "uvicorn"), "app.main:app", "--host", "127.0.0.1"],
    "fastapi run": [str(SCRIPTS / "fastapi"), "run", "app/main.py", "--host", "127.0.0.1"],
}
BANK_RAW = {"tokens": list(RIVER), "embedding": {"kind": "vocabulary"}, "scale": "none"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_serves_the_app(name):
    url, process = launch(COMMANDS[name])
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            health = http.get("/healthz")
            assert (health.status_code, health.text) == (200, "ok")
            response = http.post("/api/attention", json=BANK_RAW)
            assert response.status_code == 200, response.text
            assert_printed(response.json()["output"], ref.SEED_004_OUTPUTS["bank-raw"][0])
    finally:
        stop_server(process)


# Runs in a fresh interpreter: records every file opened while ``app.main`` is imported.
IMPORT_PROBE = textwrap.dedent(
    """
    import json, os, sys

    opened = []
    sys.addaudithook(
        lambda event, args: opened.append(os.fsdecode(args[0]))
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike))
        else None
    )
    import app.main

    opened_by_import = sorted(set(opened))
    print(json.dumps({
        "app": [c.__name__ for c in type(app.main.app).__mro__],
        "encoder": hasattr(app.main.app.state, "encoder"),
        "paths": sorted(app.main.app.openapi()["paths"]),
        "opened": opened_by_import,
    }))
    """
)
CODE_SUFFIXES = (".py", ".pyc", ".so")
BIG_BYTES = 100_000


def test_importing_app_main_builds_the_app_without_loading_data():
    result = subprocess.run(
        [python_executable(), "-c", IMPORT_PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    probe = json.loads(result.stdout.splitlines()[-1])
    assert "FastAPI" in probe["app"]  # FastAPI or a subclass (app.security.SecuredFastAPI)
    assert {"/healthz", "/api/attention", "/api/model/attention"} <= set(probe["paths"])
    assert probe["encoder"] is False  # the model loads in the lifespan or on first use
    data_files = [
        path
        for path in probe["opened"]
        if Path(path).is_file() and not path.endswith(CODE_SUFFIXES) and ".dist-info" not in path
    ]
    big = [path for path in data_files if Path(path).stat().st_size > BIG_BYTES]
    assert big == [], f"importing app.main read large files: {big}"
    assert not [p for p in probe["opened"] if p.endswith(".safetensors")]
