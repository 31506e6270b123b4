"""``attention-viz train``: the installed command trains, shows its progress, and saves the
same checkpoint the library's loop saves for the same settings; bad input exits 2 naming it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from app import cli
from app.train_cli import ProgressBar
from attention_core.training import preset_config, train

SIZES = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16"]
SIZES += ["--batch-size", "8", "--max-steps", "12", "--eval-every", "6", "--eval-iters", "4"]
CONFIG = {
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "block_size": 16,
    "batch_size": 8,
    "max_steps": 12,
    "eval_every": 6,
    "eval_iters": 4,
}
BANK_TEXT = "Kim rowed the boat to the bank. Lee counted the cash at the bank. " * 20


def test_the_command_saves_what_the_loop_saves_with_a_progress_line(tmp_path: Path) -> None:
    """The console script as installed, on a text file: its checkpoint is the library's, bit for
    bit, and stderr (not a terminal here) has one line per evaluation."""
    text_file = tmp_path / "banks.txt"
    text_file.write_text(BANK_TEXT, encoding="utf-8")
    script = Path(sys.executable).with_name("attention-viz")
    result = subprocess.run(
        [str(script), "train", "--text", str(text_file), "--architecture", "gpt", *SIZES,
         "--out", str(tmp_path / "cli-run")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("training gpt: ") and "bigram baseline val loss" in lines[0]
    assert [line.split()[1] for line in lines[1:]] == ["0/12", "6/12", "12/12"]
    assert "ETA 0s" in lines[-1] and "val " in lines[-1]
    assert result.stdout.startswith(f"{tmp_path / 'cli-run'}: val loss ")

    torch.set_num_threads(1)  # what the command uses by default (--threads 1)
    config = preset_config("gpt", CONFIG, BANK_TEXT)
    list(train(config, BANK_TEXT, save_to=tmp_path / "lib-run"))
    cli_weights = load_file(tmp_path / "cli-run" / "model.safetensors")
    lib_weights = load_file(tmp_path / "lib-run" / "model.safetensors")
    assert cli_weights.keys() == lib_weights.keys()
    for name, tensor in lib_weights.items():
        assert torch.equal(cli_weights[name], tensor), name
    cli_story = json.loads((tmp_path / "cli-run" / "training.json").read_text())
    lib_story = json.loads((tmp_path / "lib-run" / "training.json").read_text())
    assert cli_story["history"] == lib_story["history"]
    assert cli_story["text_source"] == str(text_file)


def test_on_a_terminal_the_bar_redraws_one_line() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    bar = ProgressBar(screen)
    bar.update(0, 8, None, 2.5, 10.0)
    bar.update(4, 8, 2.1, None, 65.0)
    bar.update(8, 8, 1.9, 1.8, 0.0)
    frames = screen.getvalue().split("\r")[1:]
    assert frames[0] == "[" + "-" * 24 + "] 0/8  val 2.5000  ETA 10s\x1b[K"
    assert (
        frames[1] == "[" + "#" * 12 + "-" * 12 + "] 4/8  loss 2.1000  val 2.5000  ETA 1m05s\x1b[K"
    )
    assert frames[2] == "[" + "#" * 24 + "] 8/8  loss 1.9000  val 1.8000  ETA 0s\x1b[K\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-steps", "0"], "max_steps is 0; it must be at least 1"),
        (["--n-embd", "30", "--n-head", "4"], "n_embd (30) is not a multiple of n_head (4)"),
        (["--text", "{latin1}"], "cannot read --text"),
        (["--text", "{short}"], "text is 20 characters; with block_size 64 it must be at least"),
        (["--text", "{missing}"], "cannot read --text"),
    ],
)
def test_bad_input_exits_2_naming_it(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "latin1.txt").write_bytes("la rivière ".encode("latin-1") * 30)
    (tmp_path / "short.txt").write_text("x" * 20)
    files = {name: str(tmp_path / f"{name}.txt") for name in ("latin1", "short", "missing")}
    argv = [arg.format(**files) for arg in argv]
    assert cli.main(["train", *argv, "--out", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_an_unknown_architecture_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--architecture", "transformer", "--out", "x"])
    assert exit_.value.code == 2
    assert "argument --architecture: invalid choice: 'transformer'" in capsys.readouterr().err
