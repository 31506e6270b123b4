"""A random GPT-2-small-sized checkpoint on disk, for the decoder benchmarks.

transformers builds ``GPT2LMHeadModel`` from GPT-2 small's config (12 layers,
12 heads, width 768, vocabulary 50257, 1024 positions: 124M parameters) with
a fixed seed and saves it with ``save_pretrained``; no weights are downloaded.
The directory is kept (``--checkpoint-dir``, default under the temp dir) and
reused while its config matches, so repeated runs skip the 0.5 GB write.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SMALL = {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "n_positions": 1024}
DEFAULT_DIR = Path(tempfile.gettempdir()) / "attention-viz-bench" / "gpt2-small-random"


def gpt2_small(directory: Path = DEFAULT_DIR, seed: int = 0, positions: int = 1024) -> Path:
    """The checkpoint directory, made on first use (float32 safetensors + config.json).

    ``positions``: the learned position table's length (GPT-2 small's is 1024; issue
    21's long-text figure needs 4096)."""
    shape = {**SMALL, "n_positions": positions}
    config_path = directory / "config.json"
    if config_path.is_file() and (directory / "model.safetensors").is_file():
        saved = json.loads(config_path.read_text())
        if all(saved.get(k) == v for k, v in shape.items()):
            return directory
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.GPT2Config(**shape, bos_token_id=None, eos_token_id=None)
    model = transformers.GPT2LMHeadModel(config)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    return directory


def weight_bytes(directory: Path) -> int:
    """Bytes of the tensors in the checkpoint's safetensors files (headers excluded)."""
    from attention_core.models import checkpoint_files, read_header

    total = 0
    for path in checkpoint_files(directory):
        total += sum(e.end - e.begin for e in read_header(path).entries.values())
    return total
