"""Generation with attention capture: ours vs transformers' ``generate``, tokens per second.

Same random GPT-2-small-sized weights (``random_gpt2.py``), same prompt ids,
greedy, 32 new tokens, no end-of-text stop, same torch threads.  Ours is
``attention_core.models.generate(..., capture_attentions=True)``: prefill, then
one cached decode step per token, every layer's weights stitched into (H, T, T)
maps of the whole sequence (plus one more step for the last token's own row).
Theirs is ``GPT2LMHeadModel.generate(..., output_attentions=True,
return_dict_in_generate=True)`` with eager attention (its SDPA path returns no
weights).  Rounds alternate (order shuffled each round) so load drift hits
both alike; reported: median tokens/s of each and ours / theirs, by the wall
clock and, with one torch thread, by this thread's CPU time (the figure to
read on a busy machine: other processes' load does not count in it).

    .venv/bin/python bench/bench_generate.py [--rounds 7] [--prompt 16 128] [--threads 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from random_gpt2 import gpt2_small

from attention_core.models import GPT2, generate

NEW_TOKENS = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--prompt", type=int, nargs="+", default=[16, 128], help="prompt lengths")
    parser.add_argument("--new-tokens", type=int, default=NEW_TOKENS)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the app uses 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import GPT2LMHeadModel

    directory = gpt2_small()
    ours = GPT2.from_pretrained(directory)
    theirs = GPT2LMHeadModel.from_pretrained(directory, attn_implementation="eager").eval()
    theirs.generation_config.eos_token_id = None
    theirs.generation_config.pad_token_id = 0
    new = args.new_tokens

    def run_ours(prompt: torch.Tensor) -> list[int]:
        out = generate(ours, prompt[0].tolist(), new, capture_attentions=True)
        assert len(out.layer_attentions) == 12
        return list(out.new_ids)

    def run_theirs(prompt: torch.Tensor) -> list[int]:
        with torch.inference_mode():
            out = theirs.generate(
                prompt,
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                output_attentions=True,
                return_dict_in_generate=True,
            )
        assert len(out.attentions) == new
        return out.sequences[0, prompt.shape[1] :].tolist()

    clocks = {"wall": time.perf_counter}
    if args.threads == 1:
        clocks["cpu"] = time.thread_time  # the calling thread does all the work
    print(f"# {new} new tokens, greedy, attention captured; torch threads {args.threads}")
    print("| prompt | clock | ours tokens/s | transformers tokens/s | ours / transformers |")
    print("|---:|---|---:|---:|---:|")
    for length in args.prompt:
        generator = torch.Generator().manual_seed(length)
        prompt = torch.randint(0, 50257, (1, length), generator=generator)
        if run_ours(prompt) != run_theirs(prompt):  # also the warm-up
            raise SystemExit(f"prompt {length}: the two generated different tokens")
        times = {(side, clock): [] for side in ("ours", "theirs") for clock in clocks}
        runners = {"ours": run_ours, "theirs": run_theirs}
        for _ in range(args.rounds):
            order = list(runners)
            random.shuffle(order)
            for side in order:
                start = {clock: read() for clock, read in clocks.items()}
                runners[side](prompt)
                for clock, read in clocks.items():
                    times[side, clock].append(read() - start[clock])
        for clock in clocks:
            ours_rate = new / statistics.median(times["ours", clock])
            theirs_rate = new / statistics.median(times["theirs", clock])
            print(
                f"| {length} | {clock} | {ours_rate:.1f} | {theirs_rate:.1f} | "
                f"**{ours_rate / theirs_rate:.2f}×** |",
                flush=True,
            )


if __name__ == "__main__":
    main()
