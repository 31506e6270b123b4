"""Progress reports and cancellation (attention_core.progress), through a real forward pass."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from attention_core.models.families.gpt2 import GPT2
from attention_core.progress import Cancelled, report, reporting
from tests.models.checkpoints import make_gpt2


def test_report_outside_reporting_does_nothing() -> None:
    report("forward", 1, 2)  # no reporter: no call, no error


def test_forward_reports_each_layer_in_order(tmp_path: Path) -> None:
    model = GPT2.from_pretrained(make_gpt2(tmp_path / "gpt2", n_layer=3))
    seen: list[tuple[str, int, int]] = []
    with reporting(lambda stage, done, total: seen.append((stage, done, total))):
        model(torch.tensor([[1, 2, 3]]), num_logits=0)
    assert seen == [("forward", 1, 3), ("forward", 2, 3), ("forward", 3, 3)]


def test_a_set_event_stops_the_pass_at_the_next_layer(tmp_path: Path) -> None:
    model = GPT2.from_pretrained(make_gpt2(tmp_path / "gpt2", n_layer=3))
    cancelled = threading.Event()
    seen: list[int] = []

    def on_progress(stage: str, done: int, total: int) -> None:
        seen.append(done)
        if done == 1:
            cancelled.set()

    with reporting(on_progress, cancelled), pytest.raises(Cancelled, match="after 2 of 3"):
        model(torch.tensor([[1, 2, 3]]), num_logits=0)
    assert seen == [1]
