"""A run's facts are read from its training.json with their types: a wrong one is dropped and
named (a shared runs directory may hold files edited by hand or by another version)."""

from __future__ import annotations

import math

from attention_core.training.runs import RunFacts, read_facts


def test_facts_of_their_type_are_kept_and_absent_ones_stay_none() -> None:
    facts, wrong = read_facts(
        {"architecture": "gpt", "steps": 2, "val_loss": 3, "train_loss": 1.5, "extra": "x"}
    )
    assert wrong == ()
    assert facts == RunFacts(architecture="gpt", steps=2, val_loss=3, train_loss=1.5)
    assert facts.given() == {"architecture": "gpt", "steps": 2, "val_loss": 3, "train_loss": 1.5}


def test_wrong_types_are_dropped_and_named_in_the_fields_order() -> None:
    facts, wrong = read_facts(
        {
            "steps": 2.5,  # a count is an int
            "parameters": True,  # a JSON true is no count
            "val_loss": "low",
            "architecture": 7,
            "vocab_size": 49,
            "elapsed_s": float("nan"),  # a loss or a time may be NaN (json.dumps writes it)
            "text_source": None,  # null: absent
        }
    )
    assert wrong == ("architecture", "steps", "val_loss", "parameters")
    assert facts.steps is None and facts.parameters is None and facts.val_loss is None
    assert facts.vocab_size == 49 and facts.elapsed_s is not None and math.isnan(facts.elapsed_s)
    assert set(facts.given()) == {"vocab_size", "elapsed_s"}
