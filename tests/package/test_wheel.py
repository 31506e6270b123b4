"""The wheel: what it holds, and installed into a fresh venv, the app it serves from any
working directory (issue 23)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
import zipfile
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from app.version import __version__
from devtools.server import launch, stop_server
from devtools.wheel import ROOT, clean_env

pytestmark = pytest.mark.slow


def _files(directory: str, pattern: str = "*") -> set[str]:
    return {
        p.relative_to(ROOT / directory).as_posix()
        for p in (ROOT / directory).rglob(pattern)
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_wheel_installs_app_as_attention_viz_with_the_pages_files(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    tops = {n.split("/")[0] for n in names}
    dist_info = f"attention_viz-{__version__}.dist-info"
    assert tops == {"attention_viz", "attention_core", dist_info}
    for py in _files("app", "*.py"):
        assert f"attention_viz/{py}" in names
    for name in _files("app/vendor"):
        assert f"attention_viz/vendor/{name}" in names
    for name in _files("static"):
        assert f"attention_viz/static/{name}" in names
    for name in _files("templates"):
        assert f"attention_viz/templates/{name}" in names
    for name in _files("attention_core"):
        assert f"attention_core/{name}" in names


def _run(installed, *args: str) -> str:
    done = subprocess.run(
        [*args], cwd=installed.outside, env=clean_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_version_comes_from_one_place(installed):
    out = _run(installed, str(installed.bin / "attention-viz"), "--version")
    assert out.strip() == f"attention-viz {__version__}"


def test_the_import_name_is_attention_viz_and_there_is_no_top_level_app(installed):
    code = """
import importlib.util, json, sys
import attention_viz, attention_core
print(json.dumps({
    "viz": attention_viz.__file__, "core": attention_core.__file__,
    "app": importlib.util.find_spec("app") is not None,
    "version": attention_viz.__version__,
    "api": [callable(getattr(attention_viz, n)) for n in (
        "head_view", "model_view", "show", "explore", "figure", "create_app",  # ours
        "run", "attention_with_steps", "get_preset")],  # attention_core's
}))
"""
    found = json.loads(_run(installed, str(installed.python), "-c", code))
    venv = str(installed.python.parent.parent)
    assert found["viz"].startswith(venv) and found["core"].startswith(venv)
    assert found["app"] is False
    assert found["version"] == __version__
    assert all(found["api"])
    # `from attention_viz import *` gives the notebook API, create_app and the core's names.
    star = (
        "from attention_viz import *; print(head_view.__name__, create_app.__name__, run.__name__)"
    )
    assert _run(installed, str(installed.python), "-c", star).split() == [
        "head_view",
        "create_app",
        "run",
    ]


class _Refs(HTMLParser):
    """Every URL a page names: scripts, stylesheets, preloads, links, Plotly's, the import map's."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.assets: list[str] = []
        self._import_map = False
        self.import_map = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("script", "img") and a.get("src"):
            self.assets.append(a["src"])
        if tag == "link" and a.get("href") and not a["href"].startswith("data:"):
            self.assets.append(a["href"])
        if a.get("data-plotly-src"):
            self.assets.append(a["data-plotly-src"])
        self._import_map = tag == "script" and a.get("type") == "importmap"

    def handle_data(self, data):
        if self._import_map:
            self.import_map += data

    def handle_endtag(self, tag):
        self._import_map = False


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read()


def test_the_installed_app_serves_every_page_and_asset_from_elsewhere(installed):
    url, process = launch(
        [str(installed.bin / "attention-viz"), "serve", "--host", "127.0.0.1"],
        env={"PYTHONPATH": ""},
        cwd=installed.outside,
    )
    try:
        status, body = _get(url + "/")
        home = _Refs()
        home.feed(body.decode())
        pages = sorted({h for h in home.links if h.startswith("/")} | {"/"})
        assert {"/", "/compare", "/lessons", "/model", "/train", "/docs"} <= set(pages)
        assets: set[str] = set()
        for path in pages:
            status, body = _get(url + path)
            assert status == 200, path
            refs = _Refs()
            refs.feed(body.decode())
            if refs.import_map:
                assets |= set(json.loads(refs.import_map)["imports"].values())
            page_assets = {urljoin(path, a) for a in refs.assets}
            assert page_assets, f"{path} names no script or stylesheet"
            assets |= page_assets
        local = sorted(a for a in assets if not urlsplit(a).netloc)
        assert any("/static/js/model.js" in a for a in local)
        for asset in local:
            status, body = _get(url + asset)
            assert status == 200 and body, asset
        # The shipped checkpoint is in the wheel: the registry lists it.
        status, body = _get(url + "/api/models")
        assert "tiny-bank-gpt" in [m["name"] for m in json.loads(body)["models"]]
    finally:
        stop_server(process)
