"""Which heads matter: head-type scores, value-weighted maps, ablation, the logit lens.

Plain functions over a loaded model (``attention_core.models``) and a text,
each checked against transformers in the tests.  ``access.HeadModel`` is the
little each needs of a model family.
"""

from .ablation import (
    ABLATION_MODES,
    Ablation,
    Predictions,
    ablate,
    ablation_cost,
    check_heads,
    each_head_effects,
)
from .access import HeadModel, RunOutput, Tokens
from .head_models import head_model
from .logit_lens import LENS_TOP_K, LogitLens, logit_lens
from .scores import (
    SCORE_NAMES,
    HeadScores,
    attention_entropy,
    duplicate_token_pattern,
    duplicate_token_score,
    first_token_share,
    induction_score,
    pattern_score,
    previous_token_pattern,
    previous_token_score,
    text_scores,
)
from .scoring import DEFAULT_INDUCTION_LENGTH, ScoredHeads, induction_ids, score_heads
from .value_norm import (
    ValueNormMaps,
    row_shares,
    value_norm_maps,
    value_norm_shares,
    value_weighted,
)

__all__ = [
    "ABLATION_MODES",
    "DEFAULT_INDUCTION_LENGTH",
    "LENS_TOP_K",
    "SCORE_NAMES",
    "Ablation",
    "HeadModel",
    "HeadScores",
    "LogitLens",
    "Predictions",
    "RunOutput",
    "ScoredHeads",
    "Tokens",
    "ValueNormMaps",
    "ablate",
    "ablation_cost",
    "attention_entropy",
    "check_heads",
    "duplicate_token_pattern",
    "duplicate_token_score",
    "each_head_effects",
    "first_token_share",
    "head_model",
    "induction_ids",
    "induction_score",
    "logit_lens",
    "pattern_score",
    "previous_token_pattern",
    "previous_token_score",
    "row_shares",
    "score_heads",
    "text_scores",
    "value_norm_maps",
    "value_norm_shares",
    "value_weighted",
]
