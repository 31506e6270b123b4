"""Weights read in as the process's own copies (``read_in``): the checkpoint's file pages
leave the process, so the kernel, short of memory, can drop them without a later
forward pass reading them from disk again.

Oracles: the kernel's own account of the file's mapping (``/proc/self/smaps``: its
resident bytes) and the same checkpoint left memory-mapped (``private=False``),
whose weights and maps the copies equal exactly.
"""

from __future__ import annotations

import gc
from pathlib import Path

import torch

from attention_core.models import Llama
from attention_core.models.checkpoints.weight_dtype import compute_in_float32, read_in
from attention_core.models.text.decoder import Decoder
from tests.models.checkpoints import make_llama

TEXT = "The bank approved the loan, and the river bank was muddy."


def mapped_resident(path: Path) -> int:
    """Resident bytes of this process's mappings of ``path`` (0: none left)."""
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
                inside = len(fields) >= 6 and fields[5] == str(path)
            elif inside and fields[:1] == ["Rss:"]:
                total += int(fields[1]) * 1024
    return total


def test_weights_read_in_privately_leave_no_file_pages_and_equal_the_mapped(
    tmp_path: Path,
) -> None:
    path = make_llama(
        tmp_path / "llama",
        dtype=torch.bfloat16,
        hidden_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        seed=41,
    )
    file = (path / "model.safetensors").resolve()
    size = file.stat().st_size
    assert size > 2e6  # many pages a tensor: the pages given back are most of the file
    mapped = Decoder.from_dir(path, Llama.from_pretrained, "mapped")
    read_in(mapped.torch_module, private=False)
    assert mapped_resident(file) > 0.9 * size  # every page read, still mapped
    held = Decoder.from_dir(path, Llama.from_pretrained, "held")
    read_in(held.torch_module)
    assert mapped_resident(file) > 0.9 * size  # the first model's, still mapped
    del mapped
    gc.collect()
    assert mapped_resident(file) < 0.02 * size
    module = held.torch_module
    again = Decoder.from_dir(path, Llama.from_pretrained, "again")
    for (name, ours), (_, theirs) in zip(
        module.named_parameters(), again.torch_module.named_parameters(), strict=True
    ):
        assert ours.dtype == torch.bfloat16 and torch.equal(ours, theirs), name
    compute_in_float32(module)  # idempotent: as loaded
    for ours, theirs in zip(
        held.encode(TEXT).layer_attentions, again.encode(TEXT).layer_attentions, strict=True
    ):
        assert torch.equal(ours, theirs)
