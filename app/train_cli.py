"""``attention-viz train``: the training loop in this process, with a progress bar on stderr.

The bar redraws one line on a terminal; when stderr is not a terminal (a
log, CI) it prints a plain line at every evaluation instead.  The result is a
checkpoint directory (``--out``) and a one-line summary on stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .terminal_bar import draw_bar

if TYPE_CHECKING:
    from attention_core.training import TrainConfig


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from attention_core.training import ARCHITECTURES

    train = sub.add_parser(
        "train",
        help="train a tiny GPT on characters and save it as a checkpoint",
        description="Train a model of the tutorials' ladder (bigram to GPT) on a text and save "
        "it as a Hugging Face GPT-2 checkpoint directory. Unset sizes come from the "
        "architecture's preset (see the /train page or GET /api/train/presets).",
    )
    train.add_argument("--out", type=Path, required=True, help="checkpoint directory to write")
    train.add_argument(
        "--text", type=Path, help="UTF-8 text file to train on (default: the shipped corpus)"
    )
    train.add_argument("--architecture", choices=list(ARCHITECTURES), default="gpt")
    for flag, kind in (
        ("--n-layer", int),
        ("--n-head", int),
        ("--n-embd", int),
        ("--block-size", int),
        ("--batch-size", int),
        ("--max-steps", int),
        ("--learning-rate", float),
        ("--dropout", float),
        ("--seed", int),
        ("--eval-every", int),
        ("--eval-iters", int),
    ):
        train.add_argument(flag, type=kind)
    train.add_argument("--probe", help="text whose attention is recorded (default: the preset's)")
    train.add_argument(
        "--threads", type=int, default=1, help="PyTorch threads (default 1: reproducible)"
    )
    train.add_argument("--quiet", action="store_true", help="no progress on stderr")
    train.set_defaults(func=run)


class ProgressBar:
    """Step, loss and ETA on one redrawn line (a TTY), or a plain line per evaluation."""

    def __init__(self, stream: TextIO, enabled: bool = True) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = stream.isatty()
        self.val_loss: float | None = None

    def update(
        self, step: int, total: int, loss: float | None, val: float | None, eta: float | None
    ) -> None:
        if not self.enabled:
            return
        if val is not None:
            self.val_loss = val
        parts = [f"{step}/{total}"]
        if loss is not None:
            parts.append(f"loss {loss:.4f}")
        if self.val_loss is not None:
            parts.append(f"val {self.val_loss:.4f}")
        if eta is not None:
            parts.append(f"ETA {format_seconds(eta)}")
        if self.tty:
            self.stream.write(f"\r{draw_bar(step, total)} " + "  ".join(parts) + "\x1b[K")
            if step == total:
                self.stream.write("\n")
        elif val is not None:
            self.stream.write("step " + "  ".join(parts) + "\n")
        self.stream.flush()


def format_seconds(seconds: float) -> str:
    seconds = max(int(round(seconds)), 0)
    minutes, secs = divmod(seconds, 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def run(args: argparse.Namespace) -> int:
    import torch

    from attention_core import SpecError

    torch.set_num_threads(args.threads)
    try:
        text, config = _text_and_config(args)
    except (OSError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"attention-viz train: cannot read --text {args.text}: {exc}\n")
        return 2
    except SpecError as exc:
        sys.stderr.write(f"attention-viz train: {exc.message}\n")
        return 2
    bar = ProgressBar(sys.stderr, enabled=not args.quiet)
    try:
        _train_showing_progress(args, config, text, bar)
    except SpecError as exc:
        if bar.tty and not args.quiet:
            sys.stderr.write("\n")
        sys.stderr.write(f"attention-viz train: {exc.message}\n")
        return 2
    return 0


def _text_and_config(args: argparse.Namespace) -> tuple[str | None, TrainConfig]:
    """The --text file's text (None: the shipped corpus) and the run's settings."""
    from attention_core.training import TRAINING_SETTINGS, preset_config

    given = {
        name: getattr(args, name)
        for name in TRAINING_SETTINGS
        if getattr(args, name, None) is not None  # the CLI has no flag for some
    }
    text = None if args.text is None else args.text.read_text(encoding="utf-8")
    return text, preset_config(args.architecture, given, text)


def _train_showing_progress(
    args: argparse.Namespace, config: TrainConfig, text: str | None, bar: ProgressBar
) -> None:
    """Train and save to --out: the start on stderr, the bar, the summary on stdout."""
    from attention_core.training import Done, Progress, Start, train

    run_info = {"name": args.out.name, "text_source": str(args.text or "shipped corpus")}
    started = time.perf_counter()
    for event in train(config, text, save_to=args.out, run_info=run_info):
        if isinstance(event, Start) and not args.quiet:
            sys.stderr.write(
                f"training {config.architecture}: {event.parameters} parameters, "
                f"vocabulary {event.vocab_size}, {event.train_chars} training characters; "
                f"bigram baseline val loss {event.baseline_val_loss:.4f}\n"
            )
        elif isinstance(event, Progress):
            bar.update(event.step, event.max_steps, event.train_loss, event.val_loss, event.eta_s)
        elif isinstance(event, Done):
            sys.stdout.write(
                f"{event.directory}: val loss {event.val_loss:.4f} (untrained "
                f"{event.untrained_val_loss:.4f}, bigram baseline "
                f"{event.baseline_val_loss:.4f}) after {event.step} steps, "
                f"{time.perf_counter() - started:.1f} s\n"
            )
