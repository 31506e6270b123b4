"""Our encoder vs Hugging Face ``transformers`` BertModel (eager, output_attentions=True).

Same weights, same token ids, same torch threads; the runs are interleaved
(one of each per round, in a shuffled order) so drift in machine load and the
allocator's state hit every side alike.  Reported: median ms per forward, ours / theirs.

    .venv/bin/python bench/bench_encoder.py [--repeats 30] [--threads N] [--clock cpu]

"ours" is ``Encoder.forward`` (per-layer tuples, like Hugging Face's output);
"ours+stack" also stacks them into (L, H, T, T) and (L+1, T, hidden) tensors,
a copy the API avoids.  Hugging Face runs with ``output_attentions=True`` and
``output_hidden_states=True``.  Run it on an idle machine: under load, several
torch threads per process thrash (use ``--threads 1``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from attention_core.models import Encoder, default_model_dir  # noqa: E402

LENGTHS = (16, 128, 512)


def _ids(encoder: Encoder, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``length`` real WordPiece ids: [CLS] + words from a sentence, repeated + [SEP]."""
    sentence = "the quick brown fox jumps over the lazy dog near the river bank . "
    _, body = encoder.tokenizer.pieces(sentence * 64)
    cls_sep = encoder.tokenize("x").input_ids
    ids = torch.tensor([cls_sep[0], *body[: length - 2], cls_sep[-1]])
    return ids, torch.zeros_like(ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: this thread's CPU time (needs --threads 1); robust on a busy machine",
    )
    parser.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="raise glibc's malloc thresholds as the app does (helps both sides)",
    )
    args = parser.parse_args()
    if args.keep_freed_memory:
        from app.model_registry import keep_freed_memory

        if not keep_freed_memory():
            parser.error("--keep-freed-memory needs glibc (Linux)")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "cpu" and torch.get_num_threads() != 1:
        parser.error("--clock cpu measures the calling thread only: use it with --threads 1")
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter

    from transformers import BertModel

    path = default_model_dir()
    ours = Encoder.from_dir(path)
    theirs = BertModel.from_pretrained(str(path), attn_implementation="eager").eval()

    def run_ours(ids: torch.Tensor, types: torch.Tensor) -> None:
        ours.forward(ids, types)  # per-layer tuples, like Hugging Face's output

    def run_ours_stacked(ids: torch.Tensor, types: torch.Tensor) -> None:
        attentions, hidden = ours.forward(ids, types)
        torch.stack(attentions)  # (L, H, T, T)
        torch.stack(hidden)  # (L+1, T, hidden)

    def run_theirs(ids: torch.Tensor, types: torch.Tensor) -> None:
        with torch.inference_mode():
            theirs(
                input_ids=ids[None],
                token_type_ids=types[None],
                output_attentions=True,
                output_hidden_states=True,
            )

    shuffle = random.Random(0)
    runners = {"ours": run_ours, "ours+stack": run_ours_stacked, "HF": run_theirs}
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"repeats {args.repeats}, clock {args.clock}, keep freed memory {args.keep_freed_memory}"
    )
    print("median ms per forward; ratio of medians (ratio of minimums)")
    print(f"{'T':>5} {'ours':>9} {'ours+stack':>11} {'HF':>9} {'ours/HF':>14} {'+stack/HF':>14}")
    for length in LENGTHS:
        ids, types = _ids(ours, length)
        for _ in range(args.warmup):
            for run in runners.values():
                run(ids, types)
        times: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(args.repeats):
            order = list(runners.items())
            shuffle.shuffle(order)  # interleaved, in a fresh order each round
            for name, run in order:
                start = clock()
                run(ids, types)
                times[name].append(clock() - start)
        med = {name: statistics.median(values) for name, values in times.items()}
        low = {name: min(values) for name, values in times.items()}
        ratios = {
            name: f"{med[name] / med['HF']:.2f} ({low[name] / low['HF']:.2f})"
            for name in ("ours", "ours+stack")
        }
        print(
            f"{length:>5} {med['ours'] * 1e3:>9.2f} {med['ours+stack'] * 1e3:>11.2f} "
            f"{med['HF'] * 1e3:>9.2f} {ratios['ours']:>14} {ratios['ours+stack']:>14}"
        )


if __name__ == "__main__":
    main()
