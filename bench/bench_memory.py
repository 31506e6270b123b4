"""Peak resident memory of one forward pass with attention capture, against the weights' bytes.

The GPT-2-small-sized random checkpoint (``random_gpt2.py``, 124M parameters,
float32) at T tokens (default 1024, its whole context), one fresh process per
measurement so that no allocator state carries over:

- ``ours``: ``GPT2.from_pretrained`` (weights memory-mapped from the
  safetensors file) and ``forward(ids, output_attentions=True, num_logits=0)``;
- ``ours+hidden``: the same with ``output_hidden_states=True``, what the API's
  maps keep (``Decoder.encode``);
- ``transformers``: ``GPT2LMHeadModel`` with eager attention,
  ``output_attentions=True, logits_to_keep=1``.

Reported per process: RSS after ``import torch`` (the baseline), after loading,
and the peak (``ru_maxrss``) after the forward pass with its outputs still
held; the peak minus the baseline against the weights' bytes.  The attention
maps held at the end are L·H·T²·4 bytes (604 MB at T = 1024), whoever computes them.

    .venv/bin/python bench/bench_memory.py [--length 1024] [--runs 1] [--keep-freed-memory]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

SIDES = ("ours", "ours+hidden", "transformers")
MB = 1e6


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def child(side: str, length: int, keep_freed: bool) -> None:
    import torch

    if keep_freed:
        from app.model_registry import keep_freed_memory

        keep_freed_memory()
    torch.set_num_threads(1)
    from random_gpt2 import gpt2_small

    directory = gpt2_small()
    baseline = rss_bytes()
    ids = torch.randint(0, 50257, (1, length), generator=torch.Generator().manual_seed(0))
    if side.startswith("ours"):
        from attention_core.models import GPT2

        model = GPT2.from_pretrained(directory)
        loaded = rss_bytes()
        with torch.inference_mode():
            out = model(
                ids,
                num_logits=0,
                output_attentions=True,
                output_hidden_states=side == "ours+hidden",
            )
        attentions = out.attentions
    else:
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel.from_pretrained(directory, attn_implementation="eager").eval()
        loaded = rss_bytes()
        with torch.inference_mode():
            out = model(ids, output_attentions=True, logits_to_keep=1)
        attentions = out.attentions
    assert len(attentions) == 12 and attentions[0].shape == (1, 12, length, length)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    held = sum(a.numel() * a.element_size() for a in attentions)
    print(json.dumps({"baseline": baseline, "loaded": loaded, "peak": peak, "held": held}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=1, help="processes per side (median)")
    parser.add_argument("--keep-freed-memory", action="store_true", help="glibc as the app sets it")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.length, args.keep_freed_memory)
        return

    from random_gpt2 import gpt2_small, weight_bytes

    weights = weight_bytes(gpt2_small())
    print(f"# T = {args.length}; weights {weights / MB:.0f} MB (float32); one process each")
    print("| side | after import torch | after load | peak | peak − baseline | ÷ weights |")
    print("|---|---:|---:|---:|---:|---:|")
    for _ in range(args.runs):
        for side in SIDES:
            command = [sys.executable, __file__, "--child", side, "--length", str(args.length)]
            if args.keep_freed_memory:
                command.append("--keep-freed-memory")
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            m = json.loads(done.stdout.strip().splitlines()[-1])
            grown = m["peak"] - m["baseline"]
            print(
                f"| {side} | {m['baseline'] / MB:.0f} MB | {m['loaded'] / MB:.0f} MB | "
                f"{m['peak'] / MB:.0f} MB | {grown / MB:.0f} MB | {grown / weights:.2f}× |",
                flush=True,
            )


if __name__ == "__main__":
    main()
