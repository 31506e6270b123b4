"""Training figures (issue 11), each measured side by side in one run.

    .venv/bin/python bench/bench_train.py [--part all|speed|bigram|budget|latency]
        [--rounds 3] [--steps 120] [--threads 1] [--duration 10] [--json out.json]

speed    Steps/s of the default ``gpt`` preset (2 layers × 4 heads, n_embd 64,
         block 64, batch 32), alternating three loops, round after round:
         ``events``  ``attention_core.training.train`` as the app runs it: a
                     Progress event every step, a Snapshot of the probe's
                     attention every 25 steps, each event serialized to its SSE
                     frame (compact uint8 attention) as the worker process does;
         ``bare``    the same model, batches, AdamW, schedule and clipping with no
                     events and no snapshots (the loop body alone);
         ``nanogpt`` a plain nanoGPT-style loop with nanoGPT's own model shape
                     (nn.Linear, F.scaled_dot_product_attention(is_causal=True),
                     exact GELU), the same sizes, batches and optimizer.
         Steps/s counts steps 10..N (no setup, no evaluation). Goals: events ≥ 0.9 ×
         bare, events ≥ 0.95 × nanogpt.
bigram   Seconds for the default configuration to get under the bigram baseline's
         val loss: in process (threads 1 and 2; evaluating every 10 steps to find
         the step), and through the app (POST /api/train as shipped, from the
         request to the first progress event whose val_loss is under the line:
         includes starting the worker process). Goal ≤ 60 s on 2 cores.
budget   The default budget, as the test suite cannot afford it: the ``gpt`` and
         ``bigram`` presets exactly as shipped (500 steps, evaluations, snapshots
         and samples), in process with --threads (1, as the app): final val losses, the count
         bigram's line, seconds.  (tests/training/test_loop.py gives gpt 150 steps.)
latency  ``POST /api/attention`` (the flagship, answer cache off so every request
         computes) p50/p99 with wrk, 16 connections, with no training and while a
         training run streams from the same server (1 uvicorn worker, the
         training in its process at the shipped priority and threads);
         alternating idle/training per round. Goal: p99 while training ≤ 2 × idle.

Loopback only; every loop is bounded. The machine is shared: read the ratios,
and the load average printed with them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_load import loadavg, run_wrk, write_requests  # noqa: E402

from app.training.sse import event_frame  # noqa: E402
from attention_core.training import (  # noqa: E402
    Done,
    Progress,
    Start,
    TrainConfig,
    build_model,
    default_text,
    learning_rate_at,
    make_corpus,
    make_optimizer,
    preset_config,
    train,
)
from attention_core.training.batches import get_batch, language_model_loss  # noqa: E402
from devtools.server import start_server, stop_server  # noqa: E402

WARMUP = 10


# ----------------------------------------------------------------- speed ---


def steps_per_s_events(config: TrainConfig, steps: int) -> float:
    config = preset_config("gpt", {"max_steps": steps, "eval_every": 0, "snapshot_every": 25})
    marks: dict[int, float] = {}
    for event in train(config):
        event_frame(event, "bench")  # what the worker writes for each event
        # Progress(steps) comes after the final evaluation: stop the clock one step before.
        if isinstance(event, Progress) and event.step in (WARMUP, steps - 1):
            marks[event.step] = time.perf_counter()
    return (steps - 1 - WARMUP) / (marks[steps - 1] - marks[WARMUP])


def steps_per_s_bare(config: TrainConfig, steps: int) -> float:
    config = preset_config("gpt", {"max_steps": steps})
    corpus = make_corpus(default_text(), config.block_size)
    torch.manual_seed(config.seed)
    built = build_model(config, corpus.vocabulary.size)
    model = built.model.train()
    optimizer = make_optimizer(model, config)
    batches = torch.Generator().manual_seed(config.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    started = 0.0
    for step in range(steps):
        if step == WARMUP:
            started = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, config)
        x, y = get_batch(corpus.train, config.block_size, config.batch_size, batches)
        loss = language_model_loss(model, x, y)
        optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer.step()
        float(loss.detach())
    return (steps - WARMUP) / (time.perf_counter() - started)


class NanoAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, D)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))  # (B, T, C)


class NanoBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = NanoAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """nanoGPT's ``model.GPT`` at dropout 0: tied embeddings, GPT-2 init."""

    def __init__(self, vocab: int, block: int, n_layer: int, n_head: int, n_embd: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList(NanoBlock(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def steps_per_s_nanogpt(config: TrainConfig, steps: int) -> float:
    config = preset_config("gpt", {"max_steps": steps})
    corpus = make_corpus(default_text(), config.block_size)
    torch.manual_seed(config.seed)
    model = NanoGPT(
        corpus.vocabulary.size, config.block_size, config.n_layer, config.n_head, config.n_embd
    ).train()
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(
        groups, lr=config.learning_rate, betas=(config.beta1, config.beta2), foreach=True
    )
    batches = torch.Generator().manual_seed(config.seed)
    started = 0.0
    for step in range(steps):
        if step == WARMUP:
            started = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, config)
        x, y = get_batch(corpus.train, config.block_size, config.batch_size, batches)
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer.step()
        float(loss.detach())
    return (steps - WARMUP) / (time.perf_counter() - started)


def part_speed(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    config = preset_config("gpt", {})
    loops: dict[str, Callable[[TrainConfig, int], float]] = {
        "events": steps_per_s_events,
        "bare": steps_per_s_bare,
        "nanogpt": steps_per_s_nanogpt,
    }
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for round_ in range(args.rounds):
        order = list(loops) if round_ % 2 == 0 else list(reversed(loops))
        for name in order:
            rates[name].append(loops[name](config, args.steps))
        print(f"  round {round_ + 1}: " + ", ".join(f"{n} {rates[n][-1]:.1f}" for n in loops))
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"speed ({args.threads} thread(s), {args.steps} steps, median of {args.rounds}):")
    for name in loops:
        print(f"  {name:8} {median[name]:7.2f} steps/s")
    print(f"  events / bare    = {median['events'] / median['bare']:.3f}  (goal >= 0.9)")
    print(f"  events / nanogpt = {median['events'] / median['nanogpt']:.3f}  (goal >= 0.95)")
    print(f"  bare / nanogpt   = {median['bare'] / median['nanogpt']:.3f}")
    print(f"  load average: {loadavg()}")
    return {"threads": args.threads, "steps_per_s": median, "rounds": rates, "load": loadavg()}


# ---------------------------------------------------------------- bigram ---


def seconds_to_beat_bigram_in_process(threads: int) -> dict:
    torch.set_num_threads(threads)
    config = preset_config("gpt", {"eval_every": 10, "sample_chars": 0, "snapshot_every": 0})
    started = time.perf_counter()
    baseline = math.inf
    for event in train(config):
        if isinstance(event, Start):
            baseline = event.baseline_val_loss
        if isinstance(event, Progress) and event.val_loss is not None and event.val_loss < baseline:
            return {
                "threads": threads,
                "step": event.step,
                "seconds": time.perf_counter() - started,
                "val_loss": event.val_loss,
                "baseline": baseline,
            }
    raise RuntimeError("the default configuration never got under the bigram baseline")


def seconds_to_beat_bigram_via_api(url: str) -> dict:
    started = time.perf_counter()
    baseline = math.inf
    with httpx.Client(base_url=url, timeout=600) as client:
        with client.stream("POST", "/api/train", json={}) as response:
            response.raise_for_status()
            name = None
            for line in response.iter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: ") and name in ("start", "progress"):
                    data = json.loads(line[6:])
                    if name == "start":
                        baseline = data["baseline_val_loss"]
                        first = time.perf_counter() - started
                    elif data["val_loss"] is not None and data["val_loss"] < baseline:
                        return {
                            "step": data["step"],
                            "seconds": time.perf_counter() - started,
                            "seconds_to_start_event": first,
                            "val_loss": data["val_loss"],
                            "baseline": baseline,
                        }
    raise RuntimeError("the run ended before its val loss got under the bigram baseline")


def part_bigram(args: argparse.Namespace) -> dict:
    results: dict = {"in_process": [], "api": None}
    for threads in (1, 2):
        r = seconds_to_beat_bigram_in_process(threads)
        results["in_process"].append(r)
        print(
            f"bigram line, in process, {threads} thread(s): val {r['val_loss']:.4f} < "
            f"{r['baseline']:.4f} at step {r['step']} after {r['seconds']:.1f} s"
        )
    with tempfile.TemporaryDirectory() as runs:
        url, process = start_server({"ATTENTION_VIZ_RUNS_DIR": runs})
        try:
            r = seconds_to_beat_bigram_via_api(url)
        finally:
            stop_server(process)
    results["api"] = r
    print(
        f"bigram line, POST /api/train as shipped (eval every 50): val {r['val_loss']:.4f} < "
        f"{r['baseline']:.4f} at step {r['step']} after {r['seconds']:.1f} s "
        f"(start event after {r['seconds_to_start_event']:.1f} s)"
    )
    print(f"  load average: {loadavg()}")
    results["load"] = loadavg()
    return results


# ---------------------------------------------------------------- budget ---


def part_budget(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)  # 1 by default, as the app's worker runs
    results = {}
    for architecture in ("gpt", "bigram"):
        started = time.perf_counter()
        done = list(train(preset_config(architecture, {})))[-1]
        assert isinstance(done, Done)
        results[architecture] = {
            "steps": done.step,
            "val_loss": done.val_loss,
            "baseline": done.baseline_val_loss,
            "seconds": time.perf_counter() - started,
        }
        print(
            f"default budget, {architecture:6}: {done.step} steps, val {done.val_loss:.4f} "
            f"(count bigram {done.baseline_val_loss:.4f}) "
            f"in {time.perf_counter() - started:.1f} s"
        )
    gap = results["bigram"]["val_loss"] - results["gpt"]["val_loss"]
    print(f"  gpt under bigram by {gap:.4f}; load average: {loadavg()}")
    results["load"] = loadavg()  # type: ignore[assignment]
    return results


# --------------------------------------------------------------- latency ---


class Trainer(threading.Thread):
    """Keeps one long training run streaming from the server until stopped."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.training = threading.Event()
        self.steps = 0

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=600) as client:
            body = {"max_steps": 5000, "eval_every": 500}
            with client.stream("POST", "/api/train", json=body) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if line == "event: progress":
                        self.steps += 1
                        self.training.set()
                    if self.stop.is_set():
                        return


def part_latency(args: argparse.Namespace) -> dict:
    results: dict[str, list] = {"idle": [], "training": []}
    with tempfile.TemporaryDirectory() as tmp:
        env = {"ATTENTION_VIZ_RUNS_DIR": tmp, "ATTENTION_VIZ_RESPONSE_CACHE_ENTRIES": "0"}
        url, process = start_server(env)
        requests = write_requests(["toy"], Path(tmp))
        try:
            for round_ in range(args.rounds):
                for mode in ("idle", "training") if round_ % 2 == 0 else ("training", "idle"):
                    trainer = None
                    if mode == "training":
                        trainer = Trainer(url)
                        trainer.start()
                        if not trainer.training.wait(120):
                            raise RuntimeError("the training run did not start")
                    result = run_wrk(url, requests, duration=args.duration, connections=16)
                    steps = trainer.steps if trainer else 0
                    if trainer:
                        trainer.stop.set()
                        trainer.join(30)
                    if result.errors:
                        raise RuntimeError(f"wrk saw errors: {result.raw}")
                    results[mode].append(
                        {
                            "rps": result.requests_per_s,
                            "p50": result.latency_ms["50"],
                            "p99": result.latency_ms["99"],
                            "training_steps": steps,
                            "load": loadavg(),
                        }
                    )
                    latency = result.latency_ms
                    print(
                        f"  round {round_ + 1} {mode:8}: {result.requests_per_s:8.0f} req/s, "
                        f"p50 {latency['50']:.2f} ms, p99 {latency['99']:.2f} ms"
                        + (f", {steps} training steps meanwhile" if trainer else "")
                    )
                    time.sleep(2)  # let the killed worker go before the next measurement
        finally:
            stop_server(process)
    p99 = {mode: statistics.median(r["p99"] for r in rs) for mode, rs in results.items()}
    rps = {mode: statistics.median(r["rps"] for r in rs) for mode, rs in results.items()}
    print(f"latency (/api/attention flagship, cache off, 16 connections, {args.duration} s each):")
    print(f"  idle     p99 {p99['idle']:.2f} ms, {rps['idle']:.0f} req/s")
    print(f"  training p99 {p99['training']:.2f} ms, {rps['training']:.0f} req/s")
    print(f"  p99 training / idle = {p99['training'] / p99['idle']:.2f}  (goal <= 2)")
    print(f"  load average: {loadavg()}")
    return {"rounds": results, "p99": p99, "rps": rps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", choices=["all", "speed", "bigram", "budget", "latency"], default="all"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--duration", type=int, default=10, help="seconds of wrk per round")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"load average at start: {loadavg()}")
    out = {}
    if args.part in ("all", "speed"):
        out["speed"] = part_speed(args)
    if args.part in ("all", "bigram"):
        out["bigram"] = part_bigram(args)
    if args.part in ("all", "budget"):
        out["budget"] = part_budget(args)
    if args.part in ("all", "latency"):
        out["latency"] = part_latency(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
