"""What the checks on untrusted checkpoints cost a listing (issue 20).

A Llama-7B-shaped checkpoint (291 tensors, bf16, 13.5 GB of weights) is made
as a sparse file (its header real, its buffer holes: no disk used), then,
alternating in each round so load drift hits all alike:

- ``json.loads``: parsing its safetensors header as the reader did before;
- ``parse_json``: the bounded parse (depth counted first, finite numbers, 64-bit ints);
- ``read_header``: that parse plus every entry's checks (dtype, shape, offsets, overlap);
- ``describe``: everything a listing reads of one model (config, generation config,
  header, sizes, the size limit);
- ``entries (cached)``: what every later listing pays while the files are unchanged.

Run: ``.venv/bin/python bench/bench_listing.py [--rounds 7]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attention_core.models.checkpoints.safetensors_io import read_header  # noqa: E402
from attention_core.models.checkpoints.untrusted_json import parse_json  # noqa: E402
from attention_core.models.registry.discovery import Candidate  # noqa: E402
from attention_core.models.registry.model_registry import ModelRegistry, describe  # noqa: E402

LAYERS, HIDDEN, INTER, VOCAB = 32, 4096, 11008, 32000


def llama7b(directory: Path) -> int:
    """config.json, tokenizer.json (empty stand-in) and a sparse model.safetensors."""
    directory.mkdir(parents=True)
    shapes: dict[str, list[int]] = {
        "model.embed_tokens.weight": [VOCAB, HIDDEN],
        "model.norm.weight": [HIDDEN],
        "lm_head.weight": [VOCAB, HIDDEN],
    }
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[p + f"self_attn.{n}.weight"] = [HIDDEN, HIDDEN]
        shapes[p + "mlp.gate_proj.weight"] = [INTER, HIDDEN]
        shapes[p + "mlp.up_proj.weight"] = [INTER, HIDDEN]
        shapes[p + "mlp.down_proj.weight"] = [HIDDEN, INTER]
        shapes[p + "input_layernorm.weight"] = [HIDDEN]
        shapes[p + "post_attention_layernorm.weight"] = [HIDDEN]
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in shapes.items():
        size = 2
        for s in shape:
            size *= s
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    path = directory / "model.safetensors"
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
    os.truncate(path, 8 + len(encoded) + offset)  # a hole: no disk blocks
    config = {
        "model_type": "llama",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": 32,
        "max_position_embeddings": 4096,
        "eos_token_id": 2,
    }
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "tokenizer.json").write_text("{}")
    return len(encoded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "models"
        directory = root / "llama-7b-shaped"
        header_bytes = llama7b(directory)
        data = (directory / "model.safetensors").read_bytes()[8 : 8 + header_bytes]
        candidate = Candidate(directory.name, directory, "env")
        registry = ModelRegistry(
            include_package=False, builtin_dir=None, env_paths=[root], max_model_bytes=2**40
        )
        (entry,) = registry.entries()
        assert entry.supported, entry.reason
        cases: dict[str, Callable[[], object]] = {
            "json.loads": lambda: json.loads(data),
            "parse_json": lambda: parse_json(data, "header", max_depth=4),
            "read_header": lambda: read_header(directory / "model.safetensors"),
            "describe": lambda: describe(candidate, (), 2**40),
            "entries (cached)": registry.entries,
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, call in cases.items():
                start = time.perf_counter()
                for _ in range(args.repeats):
                    call()
                times[name].append((time.perf_counter() - start) / args.repeats)
        base = statistics.median(times["json.loads"])
        print(f"header: {header_bytes:,} bytes, 291 tensors; load average {os.getloadavg()}")
        print(f"{'':18} {'median ms':>10} {'x json.loads':>13}")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"{name:18} {median * 1e3:10.3f} {median / base:13.2f}")


if __name__ == "__main__":
    main()
