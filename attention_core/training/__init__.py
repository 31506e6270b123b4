"""Train a small GPT-2 on characters and watch its attention form.

The tutorials' ladder (bigram, averaging, one head, several heads, blocks) as
configurations of the one ``models.GPT2`` class; a loop that yields plain
events (``Start``, ``Progress``, ``Snapshot``, ``Sample``, ``Done``); a run
saved as an ordinary checkpoint directory.  Nothing here knows HTTP.
"""

from .architectures import BuiltModel, build_model, gpt2_config, parameter_count
from .checkpoint import TRAINING_FILE, is_run, new_run_name, prune_runs, save_run
from .config import ARCHITECTURES, DEFAULT_PROBE, FIXED_SETTINGS, TrainConfig, preset_config
from .config import PRESETS as TRAINING_PRESETS
from .config import SETTINGS as TRAINING_SETTINGS
from .corpus import (
    CharVocabulary,
    Corpus,
    bigram_baseline,
    default_text,
    make_corpus,
    min_text_chars,
)
from .events import Done, Event, Progress, Sample, Snapshot, Start
from .loop import learning_rate_at, make_optimizer, train

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_PROBE",
    "FIXED_SETTINGS",
    "TRAINING_FILE",
    "TRAINING_PRESETS",
    "TRAINING_SETTINGS",
    "BuiltModel",
    "CharVocabulary",
    "Corpus",
    "Done",
    "Event",
    "Progress",
    "Sample",
    "Snapshot",
    "Start",
    "TrainConfig",
    "bigram_baseline",
    "build_model",
    "default_text",
    "gpt2_config",
    "is_run",
    "learning_rate_at",
    "make_corpus",
    "make_optimizer",
    "min_text_chars",
    "new_run_name",
    "parameter_count",
    "preset_config",
    "prune_runs",
    "save_run",
    "train",
]
