"""Decoder forward pass with attention capture: ours vs transformers eager, same weights.

    .venv/bin/python bench/bench_decoder_forward.py [--rounds 7] [--threads 1 2]
        [--lengths 128 512 1024] [--models gpt2-small llama-100m] [--hidden]
        [--no-keep-freed-memory]

Two models with random weights (``torch.manual_seed(0)``), built by
transformers and shared with ours (our modules are loaded with the very same
tensors, so neither side has its own copy):

- ``gpt2-small``: GPT-2 small's shape (768 wide, 12 layers, 12 heads, 1024
  positions, 50257-token vocabulary; 124M parameters) — our ``GPT2`` against
  ``GPT2LMHeadModel``;
- ``llama-100m``: hidden 768, 12 layers, 12 query heads on 4 kv heads,
  intermediate 2048, vocabulary 32000 (≈ 110M parameters) — our ``Llama``
  against ``LlamaForCausalLM``.

Equal work (checked before timing: logits and maps agree at T = 128): both
compute the logits of every position and every layer's attention weights
(``output_attentions=True``; with ``--hidden`` both also return the hidden
states), under ``torch.inference_mode()``, batch 1.  Each
round runs ours and theirs back to back, alternating which goes first, so
drift in machine load hits both alike; reported are medians over rounds (ms)
and the ratio of medians ours / theirs (goal ≤ 1.0), with the ratio of the
fastest runs in parentheses.  Torch's intra-op threads are set per block of
rows (the app runs 1 per request); the allocator setting the app applies
(``app.routes.model.keep_freed_memory``: glibc keeps freed large blocks for
reuse) is on for both sides unless ``--no-keep-freed-memory``.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from attention_core.models import GPT2, GPT2Config, Llama, LlamaConfig  # noqa: E402
from attention_core.models.maps.blocked_pass import FullMapsPass  # noqa: E402

MODELS = ("gpt2-small", "llama-100m")
M_MMAP_MAX = -4  # glibc mallopt parameter (malloc.h)


def build(name: str) -> tuple[nn.Module, nn.Module]:
    """(ours, theirs) with the same weight tensors."""
    import transformers

    torch.manual_seed(0)
    ours: nn.Module
    if name == "gpt2-small":
        hf_config = transformers.GPT2Config(n_positions=1024)
        theirs = transformers.GPT2LMHeadModel._from_config(hf_config, attn_implementation="eager")
        with torch.device("meta"):
            ours = GPT2(GPT2Config.from_dict(hf_config.to_dict()))
        state = {k: v for k, v in theirs.state_dict().items() if k in ours.state_dict()}
    elif name == "llama-100m":
        hf_config = transformers.LlamaConfig(
            vocab_size=32000,
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=12,
            num_attention_heads=12,
            num_key_value_heads=4,
            max_position_embeddings=2048,
        )
        theirs = transformers.LlamaForCausalLM._from_config(hf_config, attn_implementation="eager")
        with torch.device("meta"):
            ours = Llama(LlamaConfig.from_dict(hf_config.to_dict()))
        state = dict(theirs.state_dict())
    else:
        raise SystemExit(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    ours.load_state_dict(state, strict=True, assign=True)
    ours.tie_weights()  # type: ignore[operator]
    return ours.eval(), theirs.eval()


def same_outputs(ours: nn.Module, theirs: nn.Module, ids: torch.Tensor) -> str:
    """Both sides' largest differences on ``ids``: the timed work is the same work."""
    with torch.inference_mode():
        a = ours(ids, output_attentions=True)
        b = theirs(ids, output_attentions=True)
    logits = (a.logits - b.logits).abs().max().item()
    maps = max((x - y).abs().max().item() for x, y in zip(a.attentions, b.attentions, strict=True))
    if not (logits < 1e-4 and maps < 1e-5):
        raise SystemExit(f"the two models disagree: logits {logits:.1e}, attentions {maps:.1e}")
    return f"max |ours - theirs| at T={ids.shape[1]}: logits {logits:.1e}, attentions {maps:.1e}"


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 1024])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--hidden", action="store_true", help="both also return hidden states")
    parser.add_argument("--no-keep-freed-memory", action="store_true")
    parser.add_argument(
        "--blocked",
        action="store_true",
        help="also time ours inside a FullMapsPass (what Decoder.encode runs from 256 "
        "tokens: every map computed in blocks of rows, causal blocks skipping masked keys)",
    )
    parser.add_argument(
        "--heap-only",
        action="store_true",
        help="also mallopt(M_MMAP_MAX, 0): blocks over glibc's 32 MB mmap ceiling come from "
        "the heap and are reused (not what the app does today; see bench/README.md)",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: the calling thread's CPU time (only with --threads 1); "
        "steadier on a busy machine",
    )
    args = parser.parse_args()
    if args.clock == "cpu" and args.threads != [1]:
        parser.error("--clock cpu measures the calling thread only: use it with --threads 1")
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    keep = not args.no_keep_freed_memory
    if keep:
        from app.model_registry import keep_freed_memory

        if not keep_freed_memory():
            parser.error("keep_freed_memory needs glibc (Linux); pass --no-keep-freed-memory")
    if args.heap_only and not ctypes.CDLL("libc.so.6").mallopt(M_MMAP_MAX, 0):
        parser.error("--heap-only needs glibc (Linux)")

    import transformers

    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"rounds {args.rounds}, clock {args.clock}, keep freed memory {keep}, "
        f"heap only {args.heap_only}, "
        f"hidden states {args.hidden}, "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    print("median ms per forward; ours / theirs: ratio of medians (ratio of minimums)")
    print(f"{'model':<11} {'threads':>7} {'T':>5} {'ours':>9} {'theirs':>9} {'ours/theirs':>14}")
    for name in args.models:
        ours, theirs = build(name)
        vocab = ours.config.vocab_size  # type: ignore[union-attr]

        def run_ours(ids: torch.Tensor, model: nn.Module = ours) -> None:
            model(ids, output_attentions=True, output_hidden_states=args.hidden)

        def run_theirs(ids: torch.Tensor, model: nn.Module = theirs) -> None:
            model(ids, output_attentions=True, output_hidden_states=args.hidden)

        def run_blocked(ids: torch.Tensor, model: nn.Module = ours) -> None:
            model(
                ids,
                output_attentions=True,
                output_hidden_states=args.hidden,
                blocked=FullMapsPass(),
            )

        check = torch.randint(0, vocab, (1, 128), generator=torch.Generator().manual_seed(2))
        print(f"{name}: {same_outputs(ours, theirs, check)}")
        sides: list[tuple[str, Callable[[torch.Tensor], None]]] = [
            ("ours", run_ours),
            ("theirs", run_theirs),
        ]
        if args.blocked:
            sides.append(("blocked", run_blocked))
        for threads in args.threads:
            torch.set_num_threads(threads)
            for length in args.lengths:
                ids = torch.randint(
                    0, vocab, (1, length), generator=torch.Generator().manual_seed(1)
                )
                times: dict[str, list[float]] = {side: [] for side, _ in sides}
                with torch.inference_mode():
                    for _ in range(args.warmup):
                        for _, run in sides:
                            run(ids)
                    for round_ in range(args.rounds):
                        order = sides if round_ % 2 == 0 else sides[::-1]
                        for side, run in order:
                            start = clock()
                            run(ids)
                            times[side].append(clock() - start)
                ours_ms, theirs_ms = median_ms(times["ours"]), median_ms(times["theirs"])
                low = min(times["ours"]) / min(times["theirs"])
                blocked = ""
                if args.blocked:
                    blocked_ms = median_ms(times["blocked"])
                    low_blocked = min(times["blocked"]) / min(times["theirs"])
                    blocked = (
                        f"   blocked {blocked_ms:9.1f} {blocked_ms / theirs_ms:>7.2f} "
                        f"({low_blocked:.2f})"
                    )
                print(
                    f"{name:<11} {threads:>7} {length:>5} {ours_ms:>9.1f} {theirs_ms:>9.1f} "
                    f"{ours_ms / theirs_ms:>7.2f} ({low:.2f}){blocked}",
                    flush=True,
                )
        del ours, theirs
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
