"""The training loop: its events, reproducibility, learning, and the runs it saves."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from attention_core.errors import SpecError
from attention_core.models import GPT2
from attention_core.training import (
    TRAINING_PRESETS,
    Done,
    Progress,
    Sample,
    Snapshot,
    Start,
    TrainConfig,
    default_text,
    learning_rate_at,
    make_corpus,
    new_run_name,
    preset_config,
    prune_runs,
    save_run,
    train,
)
from attention_core.training.batches import estimate_loss, get_batch

torch.set_num_threads(1)

TINY = {"n_embd": 16, "block_size": 16, "batch_size": 8, "eval_iters": 4}


def tiny(architecture: str = "gpt", **overrides: object) -> TrainConfig:
    return preset_config(
        architecture, {**TINY, "n_layer": 1, "max_steps": 10, "eval_every": 5, **overrides}
    )


def losses(events: list) -> list[tuple[float | None, float | None]]:
    return [(e.train_loss, e.val_loss) for e in events if isinstance(e, Progress)]


def test_events_come_in_order_with_what_they_promise() -> None:
    config = tiny(n_head=2, max_steps=10, eval_every=5, snapshot_every=4, sample_chars=12)
    events = list(train(config))
    start, done = events[0], events[-1]
    assert isinstance(start, Start) and isinstance(done, Done)
    assert start.probe_tokens == tuple(config.probe) and len(config.probe) == 16
    assert start.vocab_size == len(set(default_text())) + 1
    assert start.parameters == start.trainable_parameters  # nothing fixed in a gpt
    progress = [e for e in events if isinstance(e, Progress)]
    assert [p.step for p in progress] == list(range(11))
    assert [p.step for p in progress if p.val_loss is not None] == [0, 5, 10]
    assert progress[0].train_loss is None and all(p.train_loss for p in progress[1:])
    assert progress[-1].eta_s == 0.0 and progress[5].tokens_per_s > 0
    snapshots = [e for e in events if isinstance(e, Snapshot)]
    assert [s.step for s in snapshots] == [0, 4, 8, 10]
    for snapshot in snapshots:
        (weights,) = snapshot.attentions
        assert weights.shape == (2, 16, 16)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 16))
        assert bool((weights.triu(1) == 0).all())
    samples = [e for e in events if isinstance(e, Sample)]
    assert [s.step for s in samples] == [0, 5, 10]
    assert all(len(s.text) == 12 and "<unk>" not in s.text for s in samples)
    assert done.val_loss == progress[-1].val_loss
    assert done.untrained_val_loss == progress[0].val_loss
    assert done.directory is None


def test_same_seed_and_config_give_the_same_losses_bit_for_bit() -> None:
    config = tiny(dropout=0.2, max_steps=8, eval_every=4)
    first = losses(list(train(config)))
    # A reader drawing random numbers between events must not change the run.
    second = []
    for event in train(config):
        torch.rand(100)
        second.append(event)
    assert first == losses(second)
    assert first != losses(list(train(tiny(dropout=0.2, max_steps=8, eval_every=4, seed=7))))


def test_fifty_steps_lower_the_val_loss_below_the_untrained_models() -> None:
    done = list(train(tiny(max_steps=50, eval_every=50, sample_chars=0)))[-1]
    assert isinstance(done, Done)
    assert done.val_loss < done.untrained_val_loss - 0.5


def test_batches_are_windows_and_their_next_characters() -> None:
    data = torch.arange(100)
    x, y = get_batch(data, block_size=7, batch_size=5, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 7)
    torch.testing.assert_close(y, x + 1)
    assert bool((x[:, 1:] == x[:, :-1] + 1).all()) and int(y.max()) <= 99


def test_loss_estimates_use_the_same_windows_each_time() -> None:
    config = tiny()
    corpus = make_corpus(default_text(), config.block_size)
    torch.manual_seed(0)
    from attention_core.training import build_model

    model = build_model(config, corpus.vocabulary.size).model.train()
    a = estimate_loss(model, corpus.val, 16, 8, 3, seed=5)
    b = estimate_loss(model, corpus.val, 16, 8, 3, seed=5)
    assert a == b and model.training  # and the mode is restored


def test_learning_rate_warms_up_then_decays_to_a_tenth() -> None:
    config = tiny(max_steps=100, warmup_steps=10, learning_rate=1e-2)
    assert learning_rate_at(0, config) == pytest.approx(1e-2 / 11)
    assert learning_rate_at(10, config) == pytest.approx(1e-2)
    assert learning_rate_at(100, config) == pytest.approx(1e-3)
    assert learning_rate_at(55, config) == pytest.approx(5.5e-3)


def test_a_saved_run_is_a_checkpoint_with_its_tokenizer_and_story(tmp_path: Path) -> None:
    config = tiny(max_steps=6, eval_every=3)
    events = list(train(config, save_to=tmp_path / "run", run_info={"name": "run"}))
    done = events[-1]
    assert isinstance(done, Done) and done.directory == str(tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "training.json",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no temporary directory left
    training = json.loads((tmp_path / "run" / "training.json").read_text())
    assert training["val_loss"] == done.val_loss and training["steps"] == 6
    assert [h["step"] for h in training["history"]] == [0, 3, 6]
    assert training["name"] == "run" and training["config"]["n_layer"] == 1
    # The model page's tokenizer and our model agree on the probe.
    tokenizer = Tokenizer.from_file(str(tmp_path / "run" / "tokenizer.json"))
    model = GPT2.from_pretrained(tmp_path / "run")
    ids = torch.tensor([tokenizer.encode(config.probe).ids])
    with torch.inference_mode():
        attentions = model(ids, output_attentions=True).attentions
    snapshot = [e for e in events if isinstance(e, Snapshot)][-1]
    torch.testing.assert_close(attentions[0][0], snapshot.attentions[0], rtol=0, atol=1e-6)


def test_save_run_refuses_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(SpecError, match="exists and is not a training run"):
        save_run(tmp_path / "notes", None, None, {})  # type: ignore[arg-type]
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"


def test_prune_keeps_the_newest_runs_and_nothing_else_is_touched(tmp_path: Path) -> None:
    for i in range(5):
        run = tmp_path / f"run-{i}"
        run.mkdir()
        (run / "training.json").write_text(json.dumps({"format": "attention-viz training run"}))
        os.utime(run, (1000 + i, 1000 + i))
    (tmp_path / "my-model").mkdir()  # not a run: never pruned
    stale = tmp_path / ".run-9.partial-1-abc"
    stale.mkdir()
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    removed = prune_runs(tmp_path, keep=2)
    assert sorted(p.name for p in removed) == ["run-0", "run-1", "run-2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my-model", "run-3", "run-4"]


def test_run_names_sort_by_time_and_are_unique() -> None:
    a = new_run_name("multi_head", now=0)
    assert a.startswith("multi-head-19700101-000000-") and len(a) == len("multi-head-") + 22
    assert new_run_name("gpt", now=0) != new_run_name("gpt", now=0)


def test_gpt_beats_bigram_on_the_default_corpus_within_the_default_budget() -> None:
    """The presets as shipped, the gpt rung given 150 of its 500 steps (CI time; the whole
    budget's figures are bench/bench_train.py's ``budget``): its val loss ends far under the
    bigram rung's after that rung's whole budget, and under the count bigram's line."""
    quiet = {"eval_every": 0, "snapshot_every": 0, "sample_chars": 0}
    gpt = list(train(preset_config("gpt", {**quiet, "max_steps": 150})))[-1]
    bigram = list(train(preset_config("bigram", quiet)))[-1]
    assert isinstance(gpt, Done) and isinstance(bigram, Done)
    assert bigram.step == TRAINING_PRESETS["bigram"].max_steps == 500
    assert bigram.val_loss > bigram.baseline_val_loss - 0.02  # a bigram cannot beat the counts
    assert gpt.val_loss < gpt.baseline_val_loss - 0.5
    assert gpt.val_loss < bigram.val_loss - 0.5
