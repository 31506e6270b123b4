"""The steps of one attention layer, written once: their names (the API's ``steps``,
the response's fields), and what the pages title and say about each.

``explorer.html`` renders a panel per step from ``STEPS`` and the pages get the same
list in their initial data (``ToyPageData.steps``, read by ``pipeline.js``), so a
step is named in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

# The names, in order: the only place they are spelled (STEP_NAMES derives from it).
StepName = Literal[
    "x",
    "q",
    "k",
    "v",
    "attn_scores",
    "scaled_scores",
    "masked_scores",
    "attn_weights",
    "context_vec",
    "output",
]
STEP_NAMES: tuple[str, ...] = get_args(StepName)


@dataclass(frozen=True)
class Step:
    """One step as a page shows it. ``rows``/``cols``: "q" (query tokens), "k" (key
    tokens) or "dim"; ``shared``: one matrix for all heads (else one per head).
    ``cross_title``/``cross_text``: the words when the keys and values come from a
    source sequence (cross-attention); empty when they are the same."""

    key: StepName
    title: str
    text: str
    rows: Literal["q", "k"]
    cols: Literal["k", "dim"]
    shared: bool = False
    weights: bool = False
    cross_title: str = ""
    cross_text: str = ""


STEPS: tuple[Step, ...] = (
    Step("x", "x", "Each token's input embedding, one row per token.", "q", "dim", shared=True),
    Step(
        "q",
        "q = x @ W_query",
        "Queries: what each token is looking for.",
        "q",
        "dim",
    ),
    Step(
        "k",
        "k = x @ W_key",
        "Keys: what each token offers to be matched against.",
        "k",
        "dim",
        cross_title="k = source @ W_key",
        cross_text="Keys: what each source token offers to be matched against.",
    ),
    Step(
        "v",
        "v = x @ W_value",
        "Values: what each token passes on when attended to.",
        "k",
        "dim",
        cross_title="v = source @ W_value",
        cross_text="Values: what each source token passes on when attended to.",
    ),
    Step(
        "attn_scores",
        "attn_scores = q @ k.T",
        "How well each token's query (row) matches each token's key (column).",
        "q",
        "k",
        cross_text="How well each token's query (row) matches each source token's key (column).",
    ),
    Step(
        "scaled_scores",
        "scaled_scores",
        "The scores times the scale (1/sqrt(d_k) by default), so they do not grow with the width.",
        "q",
        "k",
    ),
    Step(
        "masked_scores",
        "masked_scores",
        "With the causal mask, a token may not look ahead: those cells become −∞ (blank).",
        "q",
        "k",
        cross_text="No causal mask in cross-attention: every query sees the whole source "
        "(a mask hides later positions of a token's own sequence).",
    ),
    Step(
        "attn_weights",
        "attn_weights = softmax(masked_scores)",
        "Each row turned into weights that sum to 1: how much each token (row) takes from "
        "each token (column).",
        "q",
        "k",
        weights=True,
        cross_text="Each row turned into weights that sum to 1: how much each token (row) "
        "takes from each source token (column).",
    ),
    Step(
        "context_vec",
        "context_vec = attn_weights @ v",
        "Each token's new vector: the weighted average of the values.",
        "q",
        "dim",
    ),
    Step(
        "output",
        "output",
        "The heads' context vectors joined side by side (times W_out when given).",
        "q",
        "dim",
        shared=True,
    ),
)

# The steps computed per head (the others are one matrix for the layer).
HEAD_STEPS: tuple[str, ...] = tuple(s.key for s in STEPS if not s.shared)
