"""The transformers backend's forward pass with every map captured, side by side.

    .venv/bin/python bench/bench_hf_backend.py [--rounds 5] [--lengths 128 512 1024]
        [--parts qwen3 llama] [--threads 1] [--clock wall|cpu] [--keep-freed-memory]

Two parts, each run alternately (A then B, then B then A, ...) so that drift in
the machine's load hits both sides alike; medians over rounds (ms), the ratio
of medians, and the ratio of the fastest runs in parentheses.

- ``qwen3``: a random model of Qwen3-0.6B's shape (28 layers, 16 query heads on
  8 kv heads of width 128, hidden 1024, intermediate 3072, vocabulary 151936;
  0.6B parameters), saved in bfloat16 and loaded as the app loads it
  (``TransformersLM.load``: float32, our attention).  A: the app's forward
  (every layer's weights and hidden states captured, ``attention_with_steps``
  in every layer); B: transformers' eager attention on the same model object
  (same weights, ``set_attn_implementation("eager")``) with
  ``output_attentions=True, output_hidden_states=True``.  Both compute the
  last position's logits only.  Goal: A ≤ 1.0 × B.
- ``llama``: one random Llama checkpoint (hidden 1024, 12 layers, 16 query heads
  on 4 kv heads, vocabulary 32000; 0.2B parameters) opened by the hand-written
  family (``core``) and by the transformers backend, both as ``Decoder.encode``
  runs them (maps and hidden states of every layer, no logits).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from attention_core.models import Llama  # noqa: E402
from attention_core.models.hf import ATTENTION_NAME  # noqa: E402
from attention_core.models.hf.language_model import TransformersLM  # noqa: E402

Run = Callable[[torch.Tensor], object]


def save_qwen3(directory: Path) -> Path:
    import transformers

    config = transformers.Qwen3Config(
        vocab_size=151936,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    transformers.Qwen3ForCausalLM(config).to(torch.bfloat16).save_pretrained(directory)
    return directory


def save_llama(directory: Path) -> Path:
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=32000,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=12,
        num_attention_heads=16,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(directory)
    return directory


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def alternate(a: Run, b: Run, ids: torch.Tensor, rounds: int) -> tuple[list[float], list[float]]:
    """Times (ms) of ``a(ids)`` and ``b(ids)``, alternating which goes first; one warm-up."""
    times: tuple[list[float], list[float]] = ([], [])
    with torch.inference_mode():
        a(ids), b(ids)
        for r in range(rounds):
            order = ((0, a), (1, b)) if r % 2 == 0 else ((1, b), (0, a))
            for index, run in order:
                start = clock()
                run(ids)
                times[index].append((clock() - start) * 1e3)
    return times


def report(label: str, names: tuple[str, str], times: tuple[list[float], list[float]]) -> None:
    a, b = (statistics.median(t) for t in times)
    fastest = min(times[0]) / min(times[1])
    load = os.getloadavg()[0]
    print(
        f"| {label} | {a:,.0f} | {b:,.0f} | {a / b:.2f} ({fastest:.2f}) | {load:.1f} |",
        flush=True,
    )


def qwen3_part(root: Path, lengths: list[int], rounds: int) -> None:
    lm = TransformersLM.load(save_qwen3(root / "qwen3-0.6b-shape"), "decoder")
    model = lm.model

    def ours(ids: torch.Tensor) -> object:
        model.set_attn_implementation(ATTENTION_NAME)  # type: ignore[operator]
        return lm(ids, num_logits=1, output_attentions=True, output_hidden_states=True)

    def eager(ids: torch.Tensor) -> object:
        model.set_attn_implementation("eager")  # type: ignore[operator]
        return model(
            input_ids=ids,
            output_attentions=True,
            output_hidden_states=True,
            logits_to_keep=1,
            use_cache=False,
        )

    with torch.inference_mode():  # the same maps, checked once
        ids = torch.randint(0, 151936, (1, 64))
        mine, theirs = ours(ids), eager(ids)
        for x, y in zip(mine.attentions, theirs.attentions, strict=True):  # type: ignore[attr-defined]
            torch.testing.assert_close(x, y, atol=1e-5, rtol=0)
    print(
        "\n| Qwen3-0.6B shape, T | ours, transformers backend (ms) | eager (ms) | ratio "
        "(fastest) | load |\n|---|---|---|---|---|"
    )
    for length in lengths:
        ids = torch.randint(0, 151936, (1, length))
        report(str(length), ("ours", "eager"), alternate(ours, eager, ids, rounds))


def llama_part(root: Path, lengths: list[int], rounds: int) -> None:
    path = save_llama(root / "llama-0.2b")
    core = Llama.from_pretrained(path)
    backend = TransformersLM.load(path, "decoder")

    def run_core(ids: torch.Tensor) -> object:
        return core(ids, num_logits=0, output_attentions=True, output_hidden_states=True)

    def run_backend(ids: torch.Tensor) -> object:
        return backend(ids, num_logits=0, output_attentions=True, output_hidden_states=True)

    print(
        "\n| Llama 0.2B, T | core family (ms) | transformers backend (ms) | ratio (fastest) "
        "| load |\n|---|---|---|---|---|"
    )
    for length in lengths:
        ids = torch.randint(0, 32000, (1, length))
        report(str(length), ("core", "backend"), alternate(run_core, run_backend, ids, rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 1024])
    parser.add_argument("--parts", nargs="+", default=["qwen3", "llama"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="wall", help="cpu: this process's CPU time"
    )
    parser.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="the allocator setting the app applies (app.model_registry.keep_freed_memory), "
        "for both sides",
    )
    args = parser.parse_args()
    if args.keep_freed_memory:
        from app.model_registry import keep_freed_memory

        print(f"keep_freed_memory: {keep_freed_memory()}")
    global clock
    clock = CLOCKS[args.clock]
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), {args.rounds} rounds, "
        f"{args.clock} clock"
    )
    with tempfile.TemporaryDirectory() as tmp:
        if "qwen3" in args.parts:
            qwen3_part(Path(tmp), args.lengths, args.rounds)
        if "llama" in args.parts:
            llama_part(Path(tmp), args.lengths, args.rounds)


if __name__ == "__main__":
    main()
