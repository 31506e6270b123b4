"""The notebook's ``show()`` on a long text: the server's long path vs the full maps it held.

    .venv/bin/python bench/bench_notebook_show.py [--rounds 3] [--tokens 4000] [--record]

A random GPT-2 (4 layers × 4 heads, width 64, 4,096 positions; ``make_gpt2``'s
byte-level tokenizer) in a temp directory, a text of about ``--tokens`` tokens.
Each measurement runs in a fresh child process (1 torch thread), rounds
alternating which side goes first:

- ``show``: ``attention_viz.show(checkpoint, text, html_action="return")`` as it is
  now: the server's builder (``app.attention_answer`` with ``pool``), no map held.
- ``full``: what ``show`` did before: ``model.encode(text)`` (every layer's
  (H, T, T) maps held), stacked, pooled by ``section_json``.

Timed: the call (the model loaded and warmed on a short text first); memory:
the child's peak resident set (``ru_maxrss``) minus its resident set before the
call.  Reported: medians and the ratio full / show.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WORDS = "the river bank was muddy and the money was in the bank by the water".split()


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def child(side: str, checkpoint: str, text: str) -> None:
    import torch

    torch.set_num_threads(1)
    from app.notebook import show
    from app.notebook.attentions import POOL_ABOVE, Section, section_json
    from app.notebook.views import _loaded_model

    def full() -> object:
        loaded = _loaded_model(checkpoint)
        maps_out = loaded.encode(text, None)
        maps = torch.stack(list(maps_out.layer_attentions)).to(torch.float32)
        section = Section(
            name="attention",
            title=loaded.name,
            queries=tuple(maps_out.tokens),
            keys=tuple(maps_out.tokens),
            maps=maps,
            layers=tuple(range(1, maps.shape[0] + 1)),
            heads=tuple(range(1, maps.shape[1] + 1)),
            causal=loaded.causal,
        )
        return section_json(section, POOL_ABOVE)

    def served() -> object:
        return show(checkpoint, text, html_action="return")

    run = full if side == "full" else served
    show(checkpoint, "the bank", html_action="return")  # load and warm the model
    before = rss_kb()
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "peak_mb": (peak - before) / 1024}))


def long_text(checkpoint: Path, most: int) -> tuple[str, int]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    low, high = 1, most
    while low < high:
        mid = (low + high + 1) // 2
        if len(tokenizer.encode(" ".join(WORDS[i % len(WORDS)] for i in range(mid))).ids) <= most:
            low = mid
        else:
            high = mid - 1
    text = " ".join(WORDS[i % len(WORDS)] for i in range(low))
    return text, len(tokenizer.encode(text).ids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    from tests.models.checkpoints import make_gpt2

    directory = Path(tempfile.mkdtemp()) / "gpt2-4k"
    make_gpt2(directory, n_positions=4096, n_layer=4, n_head=4, n_embd=64)
    text, T = long_text(directory, args.tokens)
    found: dict[str, list[dict[str, float]]] = {"show": [], "full": []}
    for r in range(args.rounds):
        for side in ("show", "full") if r % 2 == 0 else ("full", "show"):
            out = subprocess.run(
                [sys.executable, __file__, "--child", side, str(directory), text],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "ATTENTION_VIZ_TORCH_THREADS": "1"},
            )
            found[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {
        side: {k: statistics.median(x[k] for x in rows) for k in ("seconds", "peak_mb")}
        for side, rows in found.items()
    }
    ratio = med["full"]["seconds"] / med["show"]["seconds"]
    print(f"T = {T} tokens, 4 layers x 4 heads, {args.rounds} rounds (medians)")
    for side in ("show", "full"):
        print(f"  {side}: {med[side]['seconds']:.2f} s, peak +{med[side]['peak_mb']:.0f} MB")
    print(f"  full / show: {ratio:.2f}x time")
    if args.record:
        sys.path.insert(0, str(ROOT / "bench"))
        from record import machine, record

        command = " ".join(["bench/bench_notebook_show.py", *sys.argv[1:]])
        common = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": machine()}
        record(
            "bench/bench_notebook_show.py",
            "the notebook's show() on a long text: the server's long path vs the full maps",
            ".venv/bin/python bench/bench_notebook_show.py [--rounds 3] [--tokens 4000]",
            [
                {
                    "figure": f"show() at {T} tokens (4 x 4 heads), time",
                    "value": round(med["show"]["seconds"], 2),
                    "unit": "s",
                    "baseline": "the full maps show() held before, same run",
                    "baseline_value": round(med["full"]["seconds"], 2),
                    "ratio": round(med["show"]["seconds"] / med["full"]["seconds"], 2),
                    "command": f".venv/bin/python {command}",
                    **common,
                },
                {
                    "figure": f"show() at {T} tokens (4 x 4 heads), peak memory growth",
                    "value": round(med["show"]["peak_mb"]),
                    "unit": "MB",
                    "baseline": "the full maps show() held before, same run",
                    "baseline_value": round(med["full"]["peak_mb"]),
                    "command": f".venv/bin/python {command}",
                    **common,
                },
            ],
        )


if __name__ == "__main__":
    main()
