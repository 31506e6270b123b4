"""Encoder-decoder forward and greedy generation with every map captured: ours (the
transformers backend, every attention by ``attention_with_steps``) vs transformers eager
``output_attentions=True``, same checkpoint.

    .venv/bin/python bench/bench_seq2seq.py [--rounds 5] [--lengths 64 128 256] [--new 32]

A random Marian with opus-mt-en-de's shape (d_model 512, 6 + 6 layers, 8 heads, FFN
2048) but an 8,000-token vocabulary, saved to a temporary directory and loaded by both
sides.  Forward: a source of S tokens and a target of S tokens, all three stacks' maps
(ours: ``EncoderDecoder.encode_pair`` without its result cache; theirs: one forward with
``output_attentions=True``).  Generation: ``--new`` greedy tokens (ours:
``EncoderDecoder.generate``, the maps of the whole target stitched; theirs:
``generate(do_sample=False, output_attentions=True, return_dict_in_generate=True)``),
forced to the full length (no end token).  Each round runs both back to back, alternating
which goes first; medians of wall-clock and CPU time in ms and the ratios ours / theirs,
one torch thread.
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

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build(directory: Path) -> Path:
    import json

    import transformers

    from tests.models.seq2seq_checkpoints import seq2seq_tokenizer

    tokenizer = seq2seq_tokenizer("marian")
    vocab = tokenizer.get_vocab()
    config = transformers.MarianConfig(
        vocab_size=8000,
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        max_position_embeddings=512,
        pad_token_id=vocab["<pad>"],
        eos_token_id=vocab["</s>"],
        decoder_start_token_id=vocab["<pad>"],
    )
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    model.generation_config.update(bad_words_ids=[[vocab["<pad>"]], [vocab["</s>"]]])
    model.save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<pad>"})
    )
    return directory


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) milliseconds: on a shared machine CPU time is the steadier of the two."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--new", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import transformers

    from attention_core.models.hf.seq2seq import EncoderDecoder

    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp) / "marian-base")
        ours = EncoderDecoder.from_dir(path, max_tokens=512, cache_bytes=0)
        theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(
            path, attn_implementation="eager", local_files_only=True
        ).eval()
        print(f"load average {os.getloadavg()[0]:.2f}; torch threads 1; rounds {args.rounds}")
        words = "the bank approved the loan and the river bank was muddy " * 60
        for length in args.lengths:
            ids = ours.tokenizer.encode(words, limit=10_000).input_ids[:length]
            text = ours.tokenizer.decode(ids)
            source = ours.tokenize(text)
            target = ours.target_text(text)
            src = torch.tensor([source.input_ids])
            tgt = torch.tensor([target.input_ids])

            def mine(text: str = text) -> object:
                return ours.encode_pair(text, text)

            def hf(src: torch.Tensor = src, tgt: torch.Tensor = tgt) -> object:
                with torch.inference_mode():
                    return theirs(input_ids=src, decoder_input_ids=tgt, output_attentions=True)

            report(f"forward S=T={len(source)}", mine, hf, args.rounds)
        ids = ours.tokenizer.encode(words, limit=10_000).input_ids[:64]
        prompt = ours.tokenizer.decode(ids)
        src = torch.tensor([ours.tokenize(prompt).input_ids])

        def write() -> object:
            return ours.generate(prompt, args.new)

        def hf_write() -> object:
            with torch.inference_mode():
                return theirs.generate(
                    src,
                    do_sample=False,
                    num_beams=1,
                    max_new_tokens=args.new,
                    output_attentions=True,
                    return_dict_in_generate=True,
                )

        assert list(write().new_ids) == hf_write().sequences[0].tolist()[1:]
        report(f"generate {args.new} tokens, S={src.shape[1]}", write, hf_write, args.rounds)


def report(name: str, mine: Callable[[], object], hf: Callable[[], object], rounds: int) -> None:
    mine(), hf()  # warm up
    ours_ms: list[tuple[float, float]] = []
    theirs_ms: list[tuple[float, float]] = []
    for r in range(rounds):
        pair = [(ours_ms, mine), (theirs_ms, hf)]
        for times, fn in pair if r % 2 == 0 else reversed(pair):
            times.append(timed(fn))
    for i, what in ((0, "wall"), (1, "CPU")):
        a = statistics.median(t[i] for t in ours_ms)
        b = statistics.median(t[i] for t in theirs_ms)
        shown = f"ours {a:7.1f} ms  transformers eager {b:7.1f} ms  {a / b:.2f}x"
        print(f"{name:30s} {what:4s} {shown}")


if __name__ == "__main__":
    main()
