"""Head-type scores in a training run's snapshots: the definitions on the probe's maps,
induction through the model at that step, and the run's losses unchanged by them."""

from __future__ import annotations

import pytest
import torch

import attention_core.training.loop as loop
from attention_core.analysis import SCORE_NAMES, induction_score, text_scores
from attention_core.training import Progress, Snapshot, default_text, make_corpus, train
from tests.training.test_loop import losses, tiny

torch.set_num_threads(1)


def test_every_snapshot_carries_every_score_of_every_head() -> None:
    config = tiny(n_head=2, n_layer=2, max_steps=6, eval_every=3, snapshot_every=3)
    probe = make_corpus(default_text(), config.block_size).vocabulary.encode(config.probe)
    snapshots = [e for e in train(config) if isinstance(e, Snapshot)]
    assert [s.step for s in snapshots] == [0, 3, 6]
    for snapshot in snapshots:
        assert snapshot.scores is not None and tuple(snapshot.scores) == SCORE_NAMES
        expected = text_scores(snapshot.attentions, probe.tolist())
        for name, value in expected.items():
            assert torch.equal(snapshot.scores[name], value), name
        induction = snapshot.scores["induction"]
        assert induction.shape == (2, 2) and bool(((induction >= 0) & (induction <= 1)).all())
    # Training moves the heads: the scores differ between the first and last snapshot.
    assert not torch.equal(snapshots[0].scores["entropy"], snapshots[-1].scores["entropy"])  # type: ignore[index]


def test_induction_in_a_snapshot_is_the_definition_on_the_models_maps() -> None:
    from attention_core.analysis.snapshots import training_scores
    from attention_core.models import GPT2, GPT2Config

    torch.manual_seed(0)
    gpt = GPT2(GPT2Config(vocab_size=20, n_positions=16, n_embd=16, n_layer=2, n_head=2))
    gpt.init_weights()
    gpt.eval()  # no dropout in the reference either (training_scores evaluates in eval mode)
    probe = list(range(10))
    with torch.no_grad():
        maps = gpt(torch.tensor([probe]), output_attentions=True, num_logits=0).attentions
    scores = training_scores(gpt, [a[0] for a in maps], probe, ordinary=19, seed=3)
    block = torch.randperm(19, generator=torch.Generator().manual_seed(3))[:8]  # R = 16 // 2
    with torch.no_grad():
        seen = gpt(torch.cat([block, block])[None], output_attentions=True).attentions
    expected = induction_score(torch.stack([a[0] for a in seen]), 0, 8)
    assert torch.equal(scores["induction"], expected)


def test_scoring_the_snapshots_does_not_change_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    config = tiny(dropout=0.2, max_steps=6, eval_every=3, snapshot_every=2)
    scored = losses(list(train(config)))
    monkeypatch.setattr(loop, "training_scores", lambda *args, **kwargs: {})
    plain = list(train(config))
    assert scored == losses(plain)
    assert all(
        isinstance(e, Progress) or not isinstance(e, Snapshot) or e.scores == {} for e in plain
    )
