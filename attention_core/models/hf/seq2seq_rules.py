"""The rules a checkpoint's ``generation_config.json`` sets on the next token, as transformers
applies them in ``generate()``: its own logits processors, built from the same fields.

Real translation and summarization checkpoints rely on them: Marian never writes
``<pad>`` (``bad_words_ids``), BART is made to start with ``<s>``
(``forced_bos_token_id``) and to end with ``</s>`` at the length limit
(``forced_eos_token_id``), summarizers forbid repeated trigrams
(``no_repeat_ngram_size``).  The order is ``generate()``'s.  Beam search,
temperature and top-k from the file are not applied: the request says how to
pick (greedy or sampled, see ``generation.sample``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# (ids so far (1, t), scores (1, V)) -> scores (1, V)
Rule = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def generation_rules(generation_config: Any, max_new_tokens: int) -> list[Rule]:
    """transformers' processors for an encoder-decoder whose decoder starts with one token.

    ``max_new_tokens`` sets the length limit the forced end-of-sequence token
    is written at (transformers' ``max_length``: the start token plus the new ones).
    """
    import transformers as tf

    c = generation_config
    eos = c.eos_token_id
    rules: list[Rule] = []
    if c.repetition_penalty is not None and c.repetition_penalty != 1.0:
        rules.append(tf.RepetitionPenaltyLogitsProcessor(c.repetition_penalty))
    if c.no_repeat_ngram_size:
        rules.append(tf.NoRepeatNGramLogitsProcessor(c.no_repeat_ngram_size))
    if c.bad_words_ids is not None:
        rules.append(tf.NoBadWordsLogitsProcessor(c.bad_words_ids, eos))
    if eos is not None and c.min_length:
        rules.append(tf.MinLengthLogitsProcessor(c.min_length, eos))
    if eos is not None and c.min_new_tokens:
        rules.append(tf.MinNewTokensLengthLogitsProcessor(1, c.min_new_tokens, eos))
    if c.forced_bos_token_id is not None:
        rules.append(tf.ForcedBOSTokenLogitsProcessor(c.forced_bos_token_id))
    if c.forced_eos_token_id is not None:
        rules.append(tf.ForcedEOSTokenLogitsProcessor(1 + max_new_tokens, c.forced_eos_token_id))
    if c.suppress_tokens is not None:
        rules.append(tf.SuppressTokensLogitsProcessor(c.suppress_tokens))
    return rules


def apply_rules(rules: list[Rule], ids: list[int], logits: torch.Tensor) -> torch.Tensor:
    """One position's logits (V,) after every rule, given the target ids so far."""
    if not rules:
        return logits
    so_far = torch.tensor([ids])  # (1, t)
    scores = logits.unsqueeze(0).float()  # (1, V)
    for rule in rules:
        scores = rule(so_far, scores)
    return scores[0]
