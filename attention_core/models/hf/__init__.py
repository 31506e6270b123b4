"""The ``transformers`` backend: any architecture transformers implements, with every
attention layer computed by ``attention_with_steps`` (see ``capture``).

Importing this package imports transformers (the ``transformers`` extra), offline:
checkpoints are read from disk only, never from the hub.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# ruff: noqa: E402

from .capture import (
    ATTENTION_NAME,
    STACKS,
    AttentionRun,
    Capture,
    CapturedCall,
    Kind,
    Site,
    Stack,
    attention_sites,
    boolean_mask,
    capturing,
    core_attention,
    handing,
    register,
    site_of,
)

__all__ = [
    "ATTENTION_NAME",
    "STACKS",
    "AttentionRun",
    "Capture",
    "CapturedCall",
    "Kind",
    "Site",
    "Stack",
    "attention_sites",
    "boolean_mask",
    "capturing",
    "core_attention",
    "handing",
    "register",
    "site_of",
]
