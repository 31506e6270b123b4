"""An encoder-decoder stored in bfloat16 is held in bfloat16 and computed in float32.

Oracles: transformers' eager attention (``output_attentions=True``) on the same
checkpoint in float32 (to float32 rounding) and in bfloat16 (within the distance
its own rounding takes it from float32); the parameters' dtype and bytes; the
listing's bytes (as stored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from attention_core.models import ModelRegistry, read_header
from attention_core.models.checkpoints.weight_dtype import held_bytes
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.requires import require

SOURCE = "The cat sat on the mat because it was tired."
TARGET = "Die Katze sass auf der Matte."


def eager(path: Path, dtype: torch.dtype) -> Any:
    transformers = require("transformers")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        path, attn_implementation="eager", dtype=dtype, local_files_only=True
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    batch = tokenizer(SOURCE, text_target=TARGET, return_tensors="pt")
    with torch.inference_mode():
        return model(**batch, output_attentions=True)


@pytest.mark.parametrize("model_type", ["t5", "bart", "marian"])
def test_a_bf16_encoder_decoder_stays_bf16_and_its_maps_are_eager(
    model_type: str, tmp_path: Path
) -> None:
    name = f"{model_type}-bf16"
    path = make_seq2seq(tmp_path / "models" / name, model_type, dtype=torch.bfloat16, seed=3)
    registry = ModelRegistry(
        include_package=False, builtin_dir=None, env_paths=[tmp_path / "models"]
    )
    (entry,) = registry.entries()
    stored = held_bytes([read_header(path / "model.safetensors")])
    assert (entry.dtype, entry.held_bytes) == ("bfloat16", stored)
    model = registry.load(name)
    module = model.model  # type: ignore[attr-defined]
    # Every stored weight is held bf16; Marian's sinusoidal position tables, computed at
    # load and never stored, are computed in float32 (as the float32 model has them).
    dtypes = {n: p.dtype for n, p in module.named_parameters()}
    float32 = sorted(n for n, dtype in dtypes.items() if dtype == torch.float32)
    assert set(dtypes.values()) <= {torch.bfloat16, torch.float32}
    tables = ["model.decoder.embed_positions.weight", "model.encoder.embed_positions.weight"]
    assert float32 == (tables if model_type == "marian" else [])
    maps = model.encode_pair(SOURCE, TARGET)  # type: ignore[attr-defined]
    in_float32, in_bf16 = eager(path, torch.float32), eager(path, torch.bfloat16)
    for stack in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
        ours = getattr(maps, stack)
        assert {a.dtype for a in ours} == {torch.float32}
        for a, float32, bf16 in zip(
            ours, getattr(in_float32, stack), getattr(in_bf16, stack), strict=True
        ):
            torch.testing.assert_close(a, float32[0], atol=1e-5, rtol=0)
            rounding = float((bf16[0].float() - float32[0]).abs().max())
            assert rounding > 0  # transformers did compute in bf16
            torch.testing.assert_close(a, bf16[0].float(), atol=rounding + 1e-5, rtol=0)
