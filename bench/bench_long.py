"""Long inputs: the pooled overview of every head vs one transformers SDPA forward.

    .venv/bin/python bench/bench_long.py [--rounds 3] [--tokens 1024] [--pool 128]

GPT-2 small's shape with random weights (``bench/random_gpt2.py``: 12 layers ×
12 heads = 144 maps, width 768, 124M parameters) plus a small byte-level
tokenizer.json, so the app serves it as a model.  Each measurement runs in a
fresh child process (1 torch thread on both sides, as the app's default
``ATTENTION_VIZ_TORCH_THREADS``), rounds alternating which side goes first:

- ``ours``: ``POST /api/model/attention`` through the app (FastAPI's
  TestClient, real routing and serialization) with ``pool`` and ``format:
  "compact"`` (uint8): every layer's 12 heads, head average and rollout, each
  max-pooled to at most pool × pool cells.  Timed: the request; measured: the
  answer's bytes.
- ``sdpa``: transformers' ``GPT2LMHeadModel`` on the same checkpoint,
  ``attn_implementation="sdpa"``, one forward without attentions (the least a
  viewer's forward could cost).

Peak memory growth is the child's peak resident set (VmHWM, reset through
/proc/self/clear_refs after loading and a warm-up) minus its resident set just
before the measured call.  Reported: medians, the ratio ours / sdpa, the load
average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.random_gpt2 import DEFAULT_DIR, gpt2_small  # noqa: E402

NAME = "gpt2-small-random"
WORDS = "the river bank was muddy and the money was in the bank near 12 old stone houses"


def tokenizer_json(directory: Path) -> None:
    """A byte-level BPE trained on a few lines (ids < 400, inside GPT-2's vocabulary)."""
    if (directory / "tokenizer.json").is_file():
        return
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([WORDS] * 4, trainer)
    tokenizer.save(str(directory / "tokenizer.json"))


def served_dir(directory: Path, shared: Path | None = None) -> Path:
    """The shared random GPT-2 small (hard-linked, not copied) with its own tokenizer.json,
    alone in its parent directory (which the app is pointed at)."""
    shared = shared or gpt2_small()
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        target = directory / name
        if target.is_symlink():  # the registry reads no file that leads outside its directory
            target.unlink()
        if not target.exists():
            try:
                os.link(shared / name, target)
            except OSError:  # another file system
                shutil.copyfile(shared / name, target)
    tokenizer_json(directory)
    return directory


def text_of(tokens: int, directory: Path) -> str:
    """A text of exactly ``tokens`` tokens under the checkpoint's tokenizer."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    words = [f"{w}{i % 97}" for i in range(tokens) for w in WORDS.split()[i % 5 : i % 5 + 1]]
    text = " ".join(words)
    ids = tokenizer.encode(text).ids
    while len(ids) > tokens:  # drop words until it fits, then pad with single letters
        text = text.rsplit(" ", 1)[0]
        ids = tokenizer.encode(text).ids
    while len(ids) < tokens:
        text += "a"
        ids = tokenizer.encode(text).ids
    assert len(ids) == tokens, (len(ids), tokens)
    return text


def rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def child(side: str, directory: Path, tokens: int, pool: int) -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    text = text_of(tokens, directory)
    if side == "ours":
        from fastapi.testclient import TestClient

        from app.main import create_app
        from app.settings import Settings

        settings = Settings(models=str(directory.parent), hf_cache=False, model_max_tokens=tokens)
        body = {"model": NAME, "pool": pool, "format": "compact"}
        with TestClient(create_app(settings)) as client:
            warm = client.post(
                "/api/model/attention", json={**body, "text": text_of(16, directory)}
            )
            assert warm.status_code == 200, warm.text
            before = rss_kb("VmRSS")
            reset_peak()
            start = time.perf_counter()
            response = client.post("/api/model/attention", json={**body, "text": text})
            seconds = time.perf_counter() - start
            assert response.status_code == 200, response.text
            answer = response.json()
            assert len(answer["tokens"]) == tokens
            assert answer["attentions"][0]["shape"][0] == 12
            size = len(response.content)
        return {"seconds": seconds, "bytes": size, "peak_mb": (rss_kb("VmHWM") - before) / 1024}
    import transformers

    model = transformers.GPT2LMHeadModel.from_pretrained(
        directory, attn_implementation="sdpa", dtype=torch.float32
    ).eval()
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    ids = torch.tensor([tokenizer.encode(text).ids])
    with torch.inference_mode():
        model(ids[:, :16])
        before = rss_kb("VmRSS")
        reset_peak()
        start = time.perf_counter()
        model(ids)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "bytes": 0, "peak_mb": (rss_kb("VmHWM") - before) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--pool", type=int, default=128)
    parser.add_argument("--child", choices=["ours", "sdpa"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR.parent / "long" / NAME)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.dir, args.tokens, args.pool)))
        return
    directory = served_dir(args.dir)
    load_before = os.getloadavg()
    results: dict[str, list[dict[str, float]]] = {"ours": [], "sdpa": []}
    for r in range(args.rounds):
        for side in ("ours", "sdpa") if r % 2 == 0 else ("sdpa", "ours"):
            cmd = [sys.executable, __file__, "--child", side, "--dir", str(directory)]
            cmd += ["--tokens", str(args.tokens), "--pool", str(args.pool)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results[side].append(json.loads(out.strip().splitlines()[-1]))
            print(side, results[side][-1], flush=True)
    load_after = os.getloadavg()

    def median(side: str, key: str) -> float:
        return statistics.median(m[key] for m in results[side])

    ours, sdpa = median("ours", "seconds"), median("sdpa", "seconds")
    print(f"\nT = {args.tokens}, pool {args.pool}, {args.rounds} rounds, 1 torch thread")
    print(f"load average {load_before[0]:.1f} -> {load_after[0]:.1f}")
    print("| side | median s | answer bytes | peak growth MB |")
    print("|---|---:|---:|---:|")
    for side in ("ours", "sdpa"):
        print(
            f"| {side} | {median(side, 'seconds'):.2f} | {median(side, 'bytes'):.0f} "
            f"| {median(side, 'peak_mb'):.0f} |"
        )
    print(f"ours / sdpa: {ours / sdpa:.2f}×")


if __name__ == "__main__":
    main()
