"""How fast this CPU multiplies float32 (and bfloat16) matrices on one thread, and what
that bounds: the big-model figures at T = 128 of ``bench_big_models.py``.

    .venv/bin/python bench/cpu_float32_peak.py [--rounds 5] [--record]

Prints (``--record``: also writes bench/results/cpu_float32_peak.json):

- the CPU's name, its vector instructions (AVX2 + FMA, AVX-512, AVX-512 BF16, AMX)
  and the single-thread peaks they allow at the clock /proc/cpuinfo reports (AVX2
  FMA: 2 FMA units × 8 float32 × 2 = 32 FLOP a cycle; AVX-512: 64);
- measured GFLOP/s of one thread's ``torch.matmul``, CPU time, best of ``--rounds``:
  float32 and bfloat16, on the 3B shape's MLP projection at T = 128 (128 × 3,072 by
  3,072 × 8,192) and on 2,048² squares;
- the FLOP of one forward at T = 128 of Llama-3.2-3B's and Llama-3.1-8B's shapes
  (``big_checkpoint.SHAPES``): transformers' eager forward (every layer, the head on
  one token: ``logits_to_keep=1``) and ours (the maps only: the last layer's MLP and
  the head are not computed), 2 FLOP a multiply-add, the attention's T² terms
  included; the least time each needs at the measured rates; and, from the figures
  ``bench_big_models.py`` recorded (bench/results/bench_big_models.json), the rate each
  side reached and the float32 rate the ``<= 0.5x`` goal would need.

The argument it backs (docs/models.md, "Speed"): our forward computes in float32 and
runs near this CPU's float32 matmul rate; transformers' bfloat16 forward uses the
CPU's bfloat16 instructions where it has them, so ``<= 0.5x`` its time would need
float32 arithmetic about twice as fast as the CPU does it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.big_checkpoint import config_of  # noqa: E402

FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16")
T = 128
RECORDED = Path(__file__).resolve().parent / "results" / "bench_big_models.json"


def cpu_info() -> tuple[str, float, set[str]]:
    """The CPU's model name, its clock in MHz as /proc/cpuinfo says, and its flags."""
    name, mhz, flags = "unknown", 0.0, set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and name == "unknown":
            name = value.strip()
        elif key == "cpu MHz" and not mhz:
            mhz = float(value)
        elif key == "flags" and not flags:
            flags = set(value.split())
    return name, mhz, flags


def gflops(m: int, k: int, n: int, dtype: torch.dtype, rounds: int) -> float:
    """One thread's best rate of an (m × k) @ (k × n) product, CPU time."""
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    torch.matmul(a, b)  # warm-up
    reps = max(1, int(2e10 / (2 * m * k * n)))  # ~20 GFLOP a round
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(reps):
            torch.matmul(a, b)
        best = min(best, (time.process_time() - start) / reps)
    return 2 * m * k * n / best / 1e9


def forward_flop(shape: str, ours: bool) -> float:
    """FLOP of one forward at T tokens (``ours``: the last MLP and the head skipped)."""
    c = config_of(shape)
    C, inner, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    H, KV, D, V = (
        c["num_attention_heads"],
        c["num_key_value_heads"],
        c["head_dim"],
        c["vocab_size"],
    )
    projections = C * H * D + 2 * C * KV * D + H * D * C  # q, k, v, o
    mlp = 3 * C * inner  # gate, up, down
    attention = 2 * H * T * T * D  # q·kᵀ and weights·v, per token row: T² D per head
    per_layer = 2 * T * (projections + mlp) + 2 * attention
    total = L * per_layer
    if ours:
        return float(total - 2 * T * mlp)  # no last MLP, no head
    return float(total + 2 * C * V)  # the head on one token


def recorded(shape: str) -> tuple[float, float] | None:
    """``bench_big_models.py``'s recorded T = 128 figures of ``shape``: our CPU seconds and
    transformers' bf16 eager seconds (None when not recorded)."""
    if not RECORDED.is_file():
        return None
    for row in json.loads(RECORDED.read_text())["results"]:
        if row["figure"].startswith(f"{shape} shape") and f"T={T}" in row["figure"]:
            note = row.get("note", "")
            if note.startswith("CPU seconds "):  # "CPU seconds 6.0 vs 9.4 (...)"
                ours, _, theirs = note.removeprefix("CPU seconds ").partition(" vs ")
                return float(ours), float(theirs.split()[0])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    name, mhz, flags = cpu_info()
    have = [f for f in FLAGS if f in flags]
    ghz = mhz / 1000
    peaks = f"AVX2 FMA {32 * ghz:.0f} GFLOP/s"
    if "avx512f" in flags:
        peaks += f", AVX-512 {64 * ghz:.0f} GFLOP/s (2 FMA units)"
    print(f"{name}, {mhz:.0f} MHz (as /proc/cpuinfo says), torch {torch.__version__}")
    print(f"vector instructions: {', '.join(have) or 'none of ' + ', '.join(FLAGS)}")
    print(f"one thread's float32 peak at {ghz:.2f} GHz: {peaks}")
    fp32 = gflops(T, 3072, 8192, torch.float32, args.rounds)
    bf16 = gflops(T, 3072, 8192, torch.bfloat16, args.rounds)
    square = gflops(2048, 2048, 2048, torch.float32, args.rounds)
    print(f"matmul 128x3072 @ 3072x8192, 1 thread: float32 {fp32:.0f}, bfloat16 {bf16:.0f} GFLOP/s")
    print(f"matmul 2048^2, float32, 1 thread: {square:.0f} GFLOP/s")
    rows = [matmul_row(fp32, bf16, square, peaks, ghz)]
    for shape in ("llama-3.2-3b", "llama-3.1-8b"):
        theirs, mine = forward_flop(shape, ours=False), forward_flop(shape, ours=True)
        print(
            f"{shape}, T = {T}: transformers' forward {theirs / 1e9:.0f} GFLOP, ours "
            f"{mine / 1e9:.0f} GFLOP; ours at the float32 matmul rate >= "
            f"{mine / fp32 / 1e9:.1f} s; transformers' at the bfloat16 rate >= "
            f"{theirs / bf16 / 1e9:.1f} s"
        )
        seconds = recorded(shape)
        if seconds is not None:
            line, row = goal_row(shape, mine, theirs, seconds, (fp32, bf16, square))
            print(line)
            rows.append(row)
    if args.record:
        record_rows(rows, args.rounds)


def matmul_row(fp32: float, bf16: float, square: float, peaks: str, ghz: float) -> dict[str, Any]:
    return {
        "figure": "one thread's float32 matmul, the 3B shape's MLP projection at T = 128 "
        "(128x3072 @ 3072x8192), CPU time",
        "value": round(fp32),
        "unit": "GFLOP/s",
        "baseline": "the same product in bfloat16",
        "baseline_value": round(bf16),
        "ratio": round(fp32 / bf16, 2),
        "note": f"2048^2 float32: {square:.0f} GFLOP/s; peaks at the {ghz:.1f} GHz "
        f"/proc/cpuinfo gives: {peaks}",
    }


def goal_row(
    shape: str,
    mine: float,
    theirs: float,
    seconds: tuple[float, float],
    rates: tuple[float, float, float],
) -> tuple[str, dict[str, Any]]:
    """The float32 rate ``<= 0.5x`` transformers' recorded bf16 time would need, against
    the measured ``rates`` (float32 and bfloat16 on the forward's product shape, float32
    on 2,048² squares)."""
    ours_s, theirs_s = seconds
    fp32, bf16, square = rates
    needed = mine / (0.5 * theirs_s) / 1e9
    reached, their_rate = mine / ours_s / 1e9, theirs / theirs_s / 1e9
    line = (
        f"{shape}, recorded: ours {ours_s} s = {reached:.0f} GFLOP/s, transformers' bf16 "
        f"{theirs_s} s = {their_rate:.0f} GFLOP/s; <= 0.5x would need {needed:.0f} GFLOP/s "
        "of float32 over the whole forward"
    )
    row = {
        "figure": f"{shape} shape, T={T}: the float32 rate our forward would need for "
        "<= 0.5x transformers' bf16 eager (bench_big_models' goal)",
        "value": round(needed),
        "unit": "GFLOP/s",
        "baseline": "one thread's float32 matmul here, the 3B shape's MLP product at T = 128 "
        "(128x3072 @ 3072x8192)",
        "baseline_value": round(fp32),
        "ratio": round(needed / fp32, 2),
        "note": f"ours {mine / 1e9:.0f} GFLOP (no last MLP, no head) in {ours_s} CPU s as "
        f"recorded = {reached:.0f} GFLOP/s; transformers {theirs / 1e9:.0f} GFLOP in "
        f"{theirs_s} s = {their_rate:.0f} GFLOP/s, its bf16 matmul rate here ({bf16:.0f}, "
        f"AVX-512 BF16); the goal needs {needed / square:.2f}x even the best float32 "
        f"product measured here (2048^2: {square:.0f} GFLOP/s), sustained over norms, "
        "RoPE, softmax and the weights' bf16-to-float32 reads",
    }
    return line, row


def record_rows(rows: list[dict[str, Any]], rounds: int) -> None:
    from bench.record import machine, record

    command = f".venv/bin/python bench/cpu_float32_peak.py --rounds {rounds} --record"
    for row in rows:
        row |= {"machine": machine(), "command": command}
    record(
        "bench/cpu_float32_peak.py",
        "One thread's float32 and bfloat16 matmul rate, and what it bounds: the big "
        "models' CPU goal at T = 128.",
        ".venv/bin/python bench/cpu_float32_peak.py [--rounds 5] [--record]",
        rows,
    )


if __name__ == "__main__":
    main()
