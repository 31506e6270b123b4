"""Every command in the README's and docs/' ```bash blocks, checked as written.

Each command is run, or, where running it here makes no sense (a server that never
exits, a 2-minute training run, a container build, pip installing into a fresh
venv), checked against what it names: the CLI's own parser takes its arguments,
the extras and packages exist, the scripts exist. curl commands run against a live
server, and an answer the docs show (a ```json block after the command) must equal
the server's. A command of a kind this file does not know fails: add its check.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from devtools.server import start_server, stop_server
from tests.docs.commands import ROOT, Command, commands, inline_commands, python_blocks

ENTRY_POINT = Path(sys.executable).parent / "attention-viz"
# Commands that only print: run for real.
RUN = {("presets",), ("run",), ("--version",)}
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
ELIDED = "\u2026elided\u2026"  # what `{...}` in a shown answer stands for


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    runs = tmp_path_factory.mktemp("runs")
    url, process = start_server({"ATTENTION_VIZ_RUNS_DIR": str(runs)})
    try:
        yield url.removeprefix("http://")
    finally:
        stop_server(process)


def check_attention_viz(command: Command, request: pytest.FixtureRequest) -> None:
    from app.cli import build_parser

    args = command.words[1:]
    if args == ("--version",):
        result = subprocess.run([ENTRY_POINT, *args], capture_output=True, text=True, check=True)
        assert result.stdout.strip().endswith(metadata.version("attention-viz"))
        return
    parsed = build_parser().parse_args(list(args))  # an unknown option exits: a failure
    if args[:1] in {r[:1] for r in RUN}:
        result = subprocess.run([ENTRY_POINT, *args], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip()
    if args[:1] == ("train",) and "builtin" in str(parsed.out):
        recorded = json.loads((ROOT / parsed.out / "training.json").read_text())["config"]
        assert (parsed.max_steps, parsed.seed) == (recorded["max_steps"], recorded["seed"])


def check_pip(command: Command, request: pytest.FixtureRequest) -> None:
    args = list(command.words[1:])
    if args[:2] == ["install", "-e"]:
        extras = args[2].removeprefix(".[").removesuffix("]").split(",")
        assert set(extras) <= set(PYPROJECT["project"]["optional-dependencies"])
    elif args[:2] == ["install", "--no-deps"]:
        metadata.version(args[2])  # installed by scripts/test.sh exactly so
    elif args[:1] == ["install"]:
        wheel = f"attention_viz-{metadata.version('attention-viz')}-py3-none-any.whl"
        assert fnmatch.fnmatch(f"dist/{wheel}", args[1])
    else:  # the wheel tests build it with these arguments (devtools/wheel.py)
        assert args == ["wheel", "--no-deps", "-w", "dist", "."]
        assert '"wheel", "--no-deps"' in (ROOT / "devtools/wheel.py").read_text()


def check_python3(command: Command, request: pytest.FixtureRequest) -> None:
    assert command.words == ("python3", "-m", "venv", ".venv")


def check_bash(command: Command, request: pytest.FixtureRequest) -> None:
    assert command.words == ("bash", "scripts/test.sh")  # what CI runs: .ci/run
    assert "bash scripts/test.sh" in (ROOT / ".ci/run").read_text()


def check_docker(command: Command, request: pytest.FixtureRequest) -> None:
    """The image is built and run as shown by scripts/docker-smoke.sh in CI."""
    assert (ROOT / "Dockerfile").is_file()
    assert command.words[1] in ("build", "run") and "attention-viz" in command.words
    smoke = (ROOT / "scripts/docker-smoke.sh").read_text()
    if command.words[1] == "run":
        assert "--read-only" in command.words and "read-only" in smoke
        assert "--tmpfs" in command.words and "/tmp" in smoke


def check_curl(command: Command, request: pytest.FixtureRequest) -> None:
    host = request.getfixturevalue("server")
    tmp = request.getfixturevalue("tmp_path")
    words = [w.replace("localhost:8000", host) for w in command.words]
    if any(w.startswith("file=@") for w in words):
        corpus = ROOT / "attention_core/training/data/bank_stories.txt"
        (tmp / "my.txt").write_text(corpus.read_text(encoding="utf-8")[:20000])
    if "-N" in words:
        stream_until_progress(words, tmp)
        return
    result = subprocess.run(words, cwd=tmp, capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stderr) == (0, "")
    answer = json.loads(result.stdout)
    if command.answer is not None:
        shown = json.loads(command.answer.replace("{...}", json.dumps(ELIDED)))
        assert_shown(shown, answer)


def stream_until_progress(words: list[str], cwd: Path) -> None:
    """A training stream: its start and first progress event, then the connection closed."""
    process = subprocess.Popen(words, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    events = []
    try:
        for line in process.stdout:
            if line.startswith(b"event: "):
                events.append(line.decode().split()[1])
                if events[-1] in ("progress", "error"):
                    break
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert events[:1] == ["start"] and events[-1] == "progress"
    assert process.stderr.read() == b""  # -s: no progress meter mixed into the events


def assert_shown(shown: Any, answer: Any, path: str = "$") -> None:
    """``answer`` is what the docs show: the same keys, the same values (floats to 1e-7)."""
    if shown == ELIDED:
        return
    if isinstance(shown, dict):
        assert isinstance(answer, dict) and list(shown) == list(answer), path
        for key in shown:
            assert_shown(shown[key], answer[key], f"{path}.{key}")
    elif isinstance(shown, list):
        assert isinstance(answer, list) and len(shown) == len(answer), path
        for i, (a, b) in enumerate(zip(shown, answer, strict=True)):
            assert_shown(a, b, f"{path}[{i}]")
    elif isinstance(shown, float):
        assert isinstance(answer, float) and math.isclose(shown, answer, rel_tol=1e-7), path
    else:
        assert shown == answer, path


CHECKS: dict[str, Callable[[Command, pytest.FixtureRequest], None]] = {
    "attention-viz": check_attention_viz,
    "pip": check_pip,
    "python3": check_python3,
    "bash": check_bash,
    "docker": check_docker,
    "curl": check_curl,
}
COMMANDS = commands()


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.where} {c.program}" for c in COMMANDS])
def test_command(command: Command, request: pytest.FixtureRequest) -> None:
    assert command.program in CHECKS, f"{command.where}: no check for {command.words}"
    CHECKS[command.program](command, request)


def test_the_answers_shown_are_checked() -> None:
    assert any(c.answer is not None and c.program == "curl" for c in COMMANDS)


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b.where)
def test_python_example_runs(block: Any, tmp_path: Path) -> None:
    """A notebook example run as a script, in the venv the docs tell to make."""
    script = tmp_path / "example.py"
    script.write_text(block.text)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run(
        [sys.executable, script], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    if "write_html(" in block.text:
        assert (tmp_path / "map.html").stat().st_size > 1000


INLINE = inline_commands()


@pytest.mark.parametrize(("where", "text"), INLINE, ids=[w for w, _ in INLINE])
def test_inline_command_names_what_exists(where: str, text: str) -> None:
    """A command quoted in the prose runs a program the venv has, a script that exists,
    with options that script defines (its argparse strings) or a real CLI sub-command."""
    from app.cli import build_parser

    words = text.removeprefix("PYTHONPATH=$PWD ").split()
    program = Path(sys.executable).parent / words[0].removeprefix(".venv/bin/")
    assert program.exists(), f"{where}: {words[0]} is not installed by scripts/test.sh"
    if program.name.startswith("python"):
        script = ROOT / words[1]
        assert script.is_file(), f"{where}: {words[1]} does not exist"
        source = script.read_text(encoding="utf-8")
        options = {w.strip("[]").split("=")[0] for w in words[2:] if w.lstrip("[").startswith("--")}
        missing = sorted(o for o in options if f'"{o}"' not in source)
        assert missing == [], f"{where}: {words[1]} has no option {missing}"
    elif program.name == "attention-viz":
        (subcommands,) = [a for a in build_parser()._actions if a.choices]
        assert words[1] in subcommands.choices or words[1].startswith("-"), where


def test_the_inline_commands_are_found() -> None:
    assert any("bench/bench_api.py" in text for _, text in INLINE)
