"""Head analysis on a GPT-2-small-shaped random model, side by side with one forward pass.

    .venv/bin/python bench/bench_heads.py [--rounds 5] [--threads 1] [--backend ours]

``--backend transformers`` runs the same checkpoint through the transformers
backend (``TransformersLM``: transformers' GPT-2 with every attention routed
through ``attention_with_steps``), both sides of each pair on it.

The model: ``random_gpt2.gpt2_small`` (12 layers × 12 heads, width 768,
vocabulary 50257; random weights, seed 0) with a byte-level tokenizer trained
here on a few lines (the text is tokenized to exactly T tokens).  Each round
runs the pair back to back, alternating which goes first; reported are
medians (ms) and the ratio of medians:

- all head scores (``score_heads``: the text's maps, as ``Decoder.encode``
  gives them, and the 65-token induction sequence) at T = 256, the result
  cache off (``cache_bytes=0``), vs one ``Decoder.encode`` (the forward pass
  with every layer's attention that the page draws) at T = 256: goal ≤ 1.5×;
- ``each_head_effects`` (Δloss of every one of the 144 heads ablated on its
  own, batched) at T = 128 vs one forward pass with the logits of every
  position (what one loss needs) at T = 128, timed as five in a row: goal ≤ 20×.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from random_gpt2 import gpt2_small  # noqa: E402

from attention_core.analysis import each_head_effects, head_model, score_heads  # noqa: E402
from attention_core.models import GPT2, Decoder  # noqa: E402

LINES = [
    "The cat sat on the mat because it was tired.",
    "The bank approved the loan, and the river bank was muddy.",
    "A dog ran in the park; the children laughed at it.",
] * 4
FORWARDS = 5
WORDS = "the bank river loan cat mat dog park money stream shore approved muddy tired".split()


def decoder(directory: Path, backend: str = "ours") -> Decoder:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer_path = Path(tempfile.gettempdir()) / "attention-viz-bench" / "heads-tokenizer.json"
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(LINES, trainer)
    tokenizer.save(str(tokenizer_path))
    if backend == "transformers":
        import shutil

        from attention_core.models.hf.text_models import load_transformers

        shutil.copy(tokenizer_path, directory / "tokenizer.json")
        loaded = load_transformers(
            directory, "gpt2-small-random", 1024, 0, kind="decoder", family="gpt2"
        )
        assert isinstance(loaded, Decoder)
        return loaded
    model = GPT2.from_pretrained(directory)
    from attention_core.models.text.text_tokenizer import TextTokenizer

    return Decoder(
        "gpt2-small-random",
        "gpt2",
        model,
        TextTokenizer(tokenizer_path, 1024),
        directory,
        cache_bytes=0,  # every encode runs the model
    )


def text_of(d: Decoder, length: int, seed: int) -> str:
    """A text of exactly ``length`` tokens (random words, so each round's text differs)."""
    g = torch.Generator().manual_seed(seed)
    words: list[str] = []
    while len(d.tokenizer.encode(" ".join(words) or "a", limit=10**6)) < length:
        words.append(WORDS[int(torch.randint(len(WORDS), (1,), generator=g))])
    text = " ".join(words)
    while len(d.tokenizer.encode(text, limit=10**6)) > length:
        text = text[:-1]
    assert len(d.tokenizer.encode(text, limit=10**6)) == length, "no text of that length"
    return text


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def pair(rounds: int, a: Callable[[], object], b: Callable[[], object]) -> tuple[float, float]:
    a(), b()  # warm up
    ta, tb = [], []
    for r in range(rounds):
        if r % 2:
            tb.append(timed(b))
            ta.append(timed(a))
        else:
            ta.append(timed(a))
            tb.append(timed(b))
    return statistics.median(ta), statistics.median(tb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", choices=["ours", "transformers"], default="ours")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    d = decoder(gpt2_small(), args.backend)
    heads = head_model(d)
    print(
        f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; "
        f"threads {args.threads}; backend {args.backend}"
    )

    text = text_of(d, 256, 0)

    def scores() -> object:
        return score_heads(d, text, seed=0)

    def encode() -> object:
        return d.encode(text)

    with torch.inference_mode():
        s, f = pair(args.rounds, scores, encode)
    print(f"head scores T=256: {s:.0f} ms; one encode (forward with attention): {f:.0f} ms; "
          f"ratio {s / f:.2f} (goal <= 1.5)")  # fmt: skip

    ids = d.tokenize(text_of(d, 128, 1)).input_ids
    batch = torch.tensor([ids])

    def each() -> object:
        return each_head_effects(heads, ids, "zero")

    def forwards() -> object:  # five, so the short side of the pair is not one noisy sample
        return [d.model(batch) for _ in range(FORWARDS)]

    with torch.inference_mode():
        e, f5 = pair(max(2, args.rounds // 2), each, forwards)
    f = f5 / FORWARDS
    print(f"each_head T=128 (144 ablations): {e:.0f} ms; one forward with logits: {f:.0f} ms; "
          f"ratio {e / f:.1f} (goal <= 20)")  # fmt: skip
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
