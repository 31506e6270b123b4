"""The one contract's analyses at long context, side by side in one run (issue 28's figures).

    .venv/bin/python bench/bench_contract.py [--tokens 4096] [--rounds 3] [--pool 128]
        [--sides ablation,ablation_next]

GPT-2 small's shape with random weights (``bench/random_gpt2.py``, positions =
``--tokens``), one torch thread, in one process, rounds alternating the order of
the sides; every side of ours runs the model's pass anew (its pass cache off):

- ``sdpa``: transformers' ``GPT2LMHeadModel``, ``attn_implementation="sdpa"``, one
  forward without attentions;
- ``overview``: the contract's pass (``forward_stacks``) gathering every layer's 144
  maps, their average and nothing else, pooled to at most pool × pool cells;
- ``value_norm``: the same overview of the value-weighted maps, gathered by the
  pass itself (each block's weights times each key's ‖v W_O‖, rows re-summed), as
  ``POST /api/model/attention`` with ``measure: value_norm`` does;
- ``head_scores``: all five scores of the 144 heads (``score_heads``: the four text
  scores summed block by block from the pass, induction on its repeated block);
- ``ablation``: one head (layer 1, head 1: the earliest, so every layer above its
  attention runs with and without it) zeroed, ``POST /api/model/ablate``'s ``ablate``:
  the text with and without the head, each position's next-token log-probability and
  top tokens, the attention a block of rows at a time (``context_pass``);
- ``ablation_next``: then another head (layer 1, head 2) of the same text, as
  ``POST /api/model/ablate`` answers it: the clean predictions kept from the first
  ablation (``clean_predictions``), the ablated forward alone.

Printed: each side's median seconds (wall, and the process's CPU time: on a
busy machine the steadier of the two) and the ratios the issue sets goals for
(head scores ≤ 1.5× the overview, value-weighted ≤ 1.5× the overview, the
overview ≤ 1.3× one SDPA forward, one head's ablation ≤ 2× one SDPA forward, cold and
next), with
the load average before and after; ``--record`` writes them to
bench/results/bench_contract.json (``scripts/bench_table.py`` renders the tables).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_long import served_dir, text_of  # noqa: E402
from bench.random_gpt2 import DEFAULT_DIR, gpt2_small  # noqa: E402


def sides(directory: Path, tokens: int, pool: int) -> dict[str, Callable[[], object]]:
    import torch
    import transformers

    from attention_core.analysis import score_heads
    from attention_core.analysis.ablation import ablate
    from attention_core.analysis.head_models import head_model
    from attention_core.models import ModelRegistry
    from attention_core.models.base.contract import PassOptions
    from attention_core.models.base.result_cache import ResultCache
    from attention_core.models.maps.map_grid import MapQuery
    from attention_core.models.maps.pooling import Region, block_size

    registry = ModelRegistry(
        include_package=False, builtin_dir=None, env_paths=[directory.parent], max_tokens=tokens
    )
    name = registry.entries()[0].name
    model = registry.load(name)
    model.long_cache = ResultCache(0)  # every side runs its own pass
    text = text_of(tokens, directory)
    T = len(model.tokenize(text, field="text").tokens)
    block = (block_size(T, pool), block_size(T, pool))
    overview = MapQuery(None, Region(0, T, 0, T), block, None)
    weighted = MapQuery(None, Region(0, T, 0, T), block, None, measure="value_norm")
    hf = transformers.GPT2LMHeadModel.from_pretrained(
        directory, attn_implementation="sdpa", dtype=torch.float32
    ).eval()
    ids = torch.tensor([model.tokenize(text, field="text").input_ids])
    print(f"{name}: {T} tokens, pooled to {overview.shape}", flush=True)

    def sdpa() -> object:
        with torch.inference_mode():
            return hf(ids, use_cache=False).logits.shape

    def pooled_overview() -> object:
        with torch.inference_mode():
            return model.forward_stacks(text, options=PassOptions(view=lambda *_: overview))

    def value_norm() -> object:
        with torch.inference_mode():
            options = PassOptions(view=lambda *_: weighted, values=True)
            stack = model.forward_stacks(text, options=options).stack()
            grids = [stack.gathered(layer, weighted) for layer in range(len(stack.layers))]
            if any(grid is None for grid in grids):
                raise RuntimeError("the pass gathered no value-weighted view")
            return grids

    def head_scores() -> object:
        with torch.inference_mode():
            return score_heads(model, text)

    heads = head_model(model)

    def ablation() -> object:
        with torch.inference_mode():
            return ablate(heads, heads.tokenize(text).ids, [(0, 0)])

    with torch.inference_mode():  # what the text's first ablation left (not timed)
        clean = ablate(heads, heads.tokenize(text).ids, [(0, 0)]).before

    def ablation_next() -> object:
        with torch.inference_mode():
            return ablate(heads, heads.tokenize(text).ids, [(0, 1)], clean=clean)

    return {
        "sdpa": sdpa,
        "overview": pooled_overview,
        "value_norm": value_norm,
        "head_scores": head_scores,
        "ablation": ablation,
        "ablation_next": ablation_next,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool", type=int, default=128)
    parser.add_argument("--record", action="store_true", help="write bench/results")
    parser.add_argument(
        "--sides", default="", help="comma-separated sides to run (default: all; sdpa kept)"
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    shared = DEFAULT_DIR.with_name(f"gpt2-small-{args.tokens}")
    checkpoint = gpt2_small(shared, positions=args.tokens)
    # alone in its parent directory, which the registry reads
    directory = served_dir(shared.with_name(f"served-{args.tokens}") / "gpt2-small", checkpoint)
    load_before = os.getloadavg()[0]
    run = sides(directory, args.tokens, args.pool)
    if args.sides:
        wanted = {"sdpa", *args.sides.split(",")}
        run = {side: fn for side, fn in run.items() if side in wanted}
    times: dict[str, list[float]] = {side: [] for side in run}
    cpu: dict[str, list[float]] = {side: [] for side in run}
    for r in range(args.rounds):
        order = list(run) if r % 2 == 0 else list(reversed(run))
        for side in order:
            start, start_cpu = time.perf_counter(), time.process_time()
            run[side]()
            times[side].append(time.perf_counter() - start)
            cpu[side].append(time.process_time() - start_cpu)
            print(f"round {r + 1} {side}: {times[side][-1]:.2f} s", flush=True)
    median = {side: statistics.median(found) for side, found in times.items()}
    median_cpu = {side: statistics.median(found) for side, found in cpu.items()}
    for side, seconds in median.items():
        print(f"{side:<12} median {seconds:.2f} s (CPU {median_cpu[side]:.2f} s)")
    load = f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    goals = [(side, base, goal) for side, base, goal in GOALS if side in run and base in run]
    for side, baseline, goal in goals:
        ratio, ratio_cpu = median[side] / median[baseline], median_cpu[side] / median_cpu[baseline]
        print(f"{side} / {baseline}: {ratio:.2f}x, CPU time {ratio_cpu:.2f}x (goal <= {goal})")
    print(load)
    if args.record:
        recorded(args, goals, median, median_cpu, load)


# (side, the side it is compared with, the goal for their ratio)
GOALS = (
    ("overview", "sdpa", 1.3),
    ("value_norm", "overview", 1.5),
    ("head_scores", "overview", 1.5),
    ("ablation", "sdpa", 2.0),
    ("ablation_next", "sdpa", 2.0),
)
FIGURES = {
    "sdpa": "one forward, transformers' SDPA (logits of every position)",
    "overview": "pooled overview: every layer's 144 maps and their average, pooled (one pass)",
    "value_norm": "value-weighted pooled overview (measure value_norm, one pass)",
    "head_scores": "all five head scores of the 144 heads (score_heads)",
    "ablation": "one head's ablation (layer 1 head 1 zeroed: the text with and without it)",
    "ablation_next": "another head's ablation of the same text (layer 1 head 2: its clean "
    "predictions kept from the first, the ablated forward alone)",
}


def recorded(
    args: argparse.Namespace,
    goals: list[tuple[str, str, float]],
    median: dict[str, float],
    median_cpu: dict[str, float],
    load: str,
) -> None:
    from record import machine, record

    command = (
        f".venv/bin/python bench/bench_contract.py --tokens {args.tokens} --rounds {args.rounds}"
    ) + (f" --sides {args.sides}" if args.sides else "")
    shape = f"GPT-2 small's shape, T = {args.tokens}, 1 thread"
    rows = []
    for side, baseline, goal in goals:
        cpu_ratio = median_cpu[side] / median_cpu[baseline]
        rows.append(
            {
                "figure": f"{FIGURES[side]}, {shape}",
                "value": round(median[side], 2),
                "unit": "s",
                "baseline": f"{FIGURES[baseline]}, same run",
                "baseline_value": round(median[baseline], 2),
                "ratio": round(median[side] / median[baseline], 2),
                "goal": f"<= {goal}x",
                "note": f"median of {args.rounds} rounds, sides alternating; CPU time "
                f"{median_cpu[side]:.2f} s / {median_cpu[baseline]:.2f} s = {cpu_ratio:.2f}x; "
                f"{load}",
                "machine": machine(),
                "command": command + " --record",
            }
        )
    record(
        "bench/bench_contract.py",
        "issue 28's figures: the one contract's analyses at long context against one SDPA "
        "forward and the pooled overview",
        ".venv/bin/python bench/bench_contract.py [--tokens 4096] [--rounds 3] [--record]",
        rows,
    )


if __name__ == "__main__":
    main()
