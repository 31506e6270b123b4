"""Issue 21's three figures, each one command, every side in fresh child processes.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_issue21.py --figure 1 [--rounds 3]
    PYTHONPATH=$PWD .venv/bin/python bench/bench_issue21.py --figure 2 [--variant pooled|whole]
    PYTHONPATH=$PWD .venv/bin/python bench/bench_issue21.py --figure 3 [--models gpt2-small llama]

Random weights throughout (nothing is downloaded), 1 torch thread on every side (the
app's default ``ATTENTION_VIZ_TORCH_THREADS``), each measurement in a fresh child
process, rounds alternating which side goes first; medians and ratios of medians
of wall-clock time and of the process's CPU time (steadier on a busy machine: one
torch thread), with the load average before and after.  A child whose anonymous
resident memory passes ``--max-rss-gb`` (default 8) is killed and the run stops (the
machine is shared).

1. **Long text** (GPT-2 small's shape with 4,096 positions, ``bench/random_gpt2.py``;
   T = 4,096): ``ours``
   is ``POST /api/model/attention`` through the app (TestClient) for every layer's
   heads, head average and rollout, ``pool`` (default 128) and ``format: "compact"``
   (uint8); then, in the same server, one head as /model opens it (``layers`` +
   ``heads``, pooled to 1,024 a side past 1,024 tokens; the layer's head average
   comes too), the same without the head average (``head_average: false``), the head
   with no pool (full resolution), and a 1,024 × 1,024 region of it.
   ``sdpa``: transformers' ``GPT2LMHeadModel`` with ``attn_implementation="sdpa"``,
   one forward without attentions: ``model(ids)`` (logits of every position) and
   ``model.transformer(ids)`` (no LM head, what a viewer needs), in alternating order.
   Goals: overview ≤ 1.5 × sdpa; answer ≤ 8 MB; peak resident growth ≤ 2 GB; the
   head ≤ 1 s after the overview.
2. **First grid of a 1B model** (Llama-3.2-1B's shape, saved once in bfloat16 with
   a byte-level tokenizer, ~2.5 GB under the temp dir; loaded in float32 on both
   sides, as the app loads it; T = 512): ``ours`` sends what /model's worker sends
   (``static/js/model-worker.js``): layer 1 pooled to ``gridPool`` (48 cells a side
   for more than 100 maps), compact, then layers 2..16 in one request.  ``--variant
   whole`` sends the maps unpooled (the page before pooling: the issue's 59 MB).
   ``sdpa`` as above (``LlamaForCausalLM``).  Goals: request to first grid ≤ 1.3 ×
   sdpa; bytes to the first grid ≤ 5 MB.
3. **Forward with every map kept** (T = 1,024; GPT-2 small's shape and a 110M
   Llama: hidden 768, 12 layers, 12 query heads on 4 kv heads): ``ours`` is
   ``encode`` of the model the app's registry loads (every layer's maps and hidden
   states, no logits), ``eager`` transformers' eager attention on the same
   checkpoint with ``output_attentions=True`` (logits of every position) and,
   in alternating order, with ``output_hidden_states=True, logits_to_keep=1`` (the
   same outputs as ours).  Goal: ours ≤ 0.75 × eager.

Peak memory growth is the child's peak resident set (VmHWM, reset through
/proc/self/clear_refs after loading and a warm-up on a short text) minus its
resident set just before the timed call.  ``--device cuda`` runs both sides on the
GPU (``ATTENTION_VIZ_DEVICE=cuda`` for ours), synchronizing before each clock read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_long import (  # noqa: E402
    reset_peak,
    rss_kb,
    served_dir,
    text_of,
    tokenizer_json,
)
from bench.random_gpt2 import gpt2_small  # noqa: E402

ROOT = Path(tempfile.gettempdir()) / "attention-viz-bench"
GPT2_DIR = ROOT / "gpt2-small-4k-random"  # GPT-2 small with 4,096 positions
GPT2_SERVED = ROOT / "long-4k" / "gpt2-small-4k-random"  # + tokenizer, alone in its parent
LLAMA_1B_DIR = ROOT / "llama-1b" / "llama-3.2-1b-random"
LLAMA_110M_DIR = ROOT / "llama-110m" / "llama-110m-random"
LLAMA_1B = {
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 8192,
    "head_dim": 64,
    "rope_theta": 500000.0,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
}
LLAMA_110M = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "intermediate_size": 2048,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
}
# What /model's grid asks for (static/js/model-overview.js): POOL_MANY past MANY_MAPS maps.
MANY_MAPS, POOL_FEW, POOL_MANY, ZOOM_MAX_SIDE = 100, 128, 48, 1024


# --- checkpoints ----------------------------------------------------------------------


def llama_dir(directory: Path, shape: dict[str, Any], dtype: str) -> Path:
    """A random Llama of ``shape`` saved in ``dtype`` with bench_long's tokenizer, made once."""
    if (directory / "config.json").is_file() and any(directory.glob("*.safetensors")):
        tokenizer_json(directory)
        return directory
    import shutil

    import torch
    import transformers

    needed = 2 * sum(_llama_params(shape))  # bytes at 2 a weight (float32: twice that)
    if dtype == "float32":
        needed *= 2
    free = shutil.disk_usage(directory.parent.parent if directory.parent.exists() else ROOT.parent)
    if free.free < needed + 2**30:
        raise SystemExit(
            f"{needed / 1e9:.1f} GB needed for {directory}, {free.free / 1e9:.1f} free"
        )
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**shape, bos_token_id=None, eos_token_id=None)
    model = transformers.LlamaForCausalLM._from_config(  # type: ignore[no-untyped-call]
        config, dtype=getattr(torch, dtype)
    )
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer_json(directory)
    return directory


def _llama_params(shape: dict[str, Any]) -> tuple[int, int]:
    """(blocks, embeddings) parameter counts of a Llama of ``shape``."""
    d, f = shape["hidden_size"], shape["intermediate_size"]
    kv = shape["num_key_value_heads"] * shape.get("head_dim", d // shape["num_attention_heads"])
    q = shape["num_attention_heads"] * shape.get("head_dim", d // shape["num_attention_heads"])
    block = d * q * 2 + d * kv * 2 + 3 * d * f + 2 * d
    embed = shape["vocab_size"] * d * (1 if shape["tie_word_embeddings"] else 2)
    return shape["num_hidden_layers"] * block, embed


def checkpoint(model: str) -> Path:
    if model == "gpt2-small":
        return served_dir(GPT2_SERVED, gpt2_small(GPT2_DIR, positions=4096))
    if model == "llama-1b":
        return llama_dir(LLAMA_1B_DIR, LLAMA_1B, "bfloat16")
    if model == "llama":
        return llama_dir(LLAMA_110M_DIR, LLAMA_110M, "float32")
    raise SystemExit(f"unknown model {model!r}")


# --- children -------------------------------------------------------------------------


class Clock:
    """perf_counter, synchronizing the GPU first when there is one at work."""

    def __init__(self, device: str) -> None:
        self.cuda = device == "cuda"

    def __call__(self) -> float:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        return time.perf_counter()


@contextmanager
def profiled(path: Path | None) -> Iterator[None]:
    """With ``path``: torch.profiler around the endpoints called in the block, the operator
    table of the longest written there.  The profiler records the thread it is started
    on, so it is started inside the thread pool's thread FastAPI runs the endpoint on."""
    if path is None:
        yield
        return
    import fastapi.routing
    from torch.profiler import ProfilerActivity, profile

    original = fastapi.routing.run_in_threadpool  # type: ignore[attr-defined]
    tables: list[tuple[float, str]] = []

    def traced(func: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            result = func(*args, **kwargs)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30)
        tables.append((time.perf_counter() - start, table))
        return result

    async def run(func: Any, *args: Any, **kwargs: Any) -> Any:
        return await original(traced, func, *args, **kwargs)

    fastapi.routing.run_in_threadpool = run  # type: ignore[attr-defined]
    try:
        yield
    finally:
        fastapi.routing.run_in_threadpool = original  # type: ignore[attr-defined]
    if tables:
        seconds, table = max(tables)
        path.write_text(f"{seconds:.2f} s (profiled)\n{table}")


def ours_app(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    """Figures 1 and 2: the API's requests through the app, in one server."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    clock = Clock(args.device)
    settings = Settings(
        models=str(directory.parent),
        hf_cache=False,
        model_max_tokens=args.tokens,
        device=args.device,
    )
    text = text_of(args.tokens, directory)
    name = directory.name
    out: dict[str, Any] = {}

    def post(key: str, body: dict[str, Any]) -> Any:
        start, cpu = clock(), time.process_time()
        response = client.post("/api/model/attention", json={"model": name, **body})
        out[key + "_s"] = clock() - start
        out[key + "_cpu"] = time.process_time() - cpu
        out[key + "_bytes"] = len(response.content)
        if response.status_code != 200:
            out[key + "_error"] = f"{response.status_code}: {response.text[:300]}"
            return None
        return response

    with TestClient(create_app(settings)) as client:
        info = client.get("/api/model", params={"model": name}).json()
        layers, heads = info["layers"], info["heads"]
        warm = {"text": text_of(16, directory), "format": "compact", "pool": 8}
        assert post("warm", warm) is not None, out
        before = rss_kb("VmRSS")
        reset_peak()
        start, cpu = clock(), time.process_time()
        if args.figure == 1:
            overview = {"text": text, "format": "compact", "pool": args.pool}
            with profiled(args.profile):
                first = post("overview", overview)
            if first is not None:
                answer = first.json()
                assert len(answer["tokens"]) == args.tokens
                assert len(answer["attentions"]) == layers, len(answer["attentions"])
                out["overview_pooled"] = answer.get("pooled")
            out["overview_peak_mb"] = (rss_kb("VmHWM") - before) / 1024
            layer, head = layers, heads  # the last layer's last head
            one: dict[str, Any] = {"text": text, "format": "compact"}
            one |= {"layers": [layer], "heads": [head]}
            page = {**one, "pool": ZOOM_MAX_SIDE} if args.tokens > ZOOM_MAX_SIDE else one
            post("head_page", page)  # as /model sends it (with the layer's head average)
            one["head_average"] = False  # the head alone
            post("head_alone", {**page, "head_average": False})
            post("head_full", one)
            side = min(ZOOM_MAX_SIDE, args.tokens)
            post("region", {**one, "rows": [args.tokens - side, args.tokens], "cols": [0, side]})
        else:
            pool = POOL_MANY if layers * heads > MANY_MAPS else POOL_FEW
            body: dict[str, Any] = {"text": text, "format": "compact"}
            if args.variant == "pooled":
                body["pool"] = pool
            with profiled(args.profile):
                post("first_layer", {**body, "layers": [1]})
            if layers > 1:
                post("other_layers", {**body, "layers": list(range(2, layers + 1))})
            out["grid_s"] = clock() - start
            out["grid_cpu"] = time.process_time() - cpu
            out["grid_bytes"] = out["first_layer_bytes"] + out.get("other_layers_bytes", 0)
        out["peak_mb"] = (rss_kb("VmHWM") - before) / 1024
    return out


def ours_forward(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    """Figure 3: ``encode`` of the model the app's registry loads, as the app runs it."""
    import torch

    from app.model_registry import build_registry, keep_freed_memory
    from app.settings import Settings

    clock = Clock(args.device)
    keep_freed_memory()
    settings = Settings(
        models=str(directory.parent),
        hf_cache=False,
        model_max_tokens=args.tokens,
        device=args.device,
    )
    model = build_registry(settings).load(directory.name)
    text = text_of(args.tokens, directory)
    with torch.inference_mode():
        model.encode(text_of(16, directory))
        before = rss_kb("VmRSS")
        reset_peak()
        start, cpu = clock(), time.process_time()
        maps = model.encode(text)
        seconds = clock() - start
        cpu = time.process_time() - cpu
    assert len(maps.tokens) == args.tokens
    return {"ours_s": seconds, "ours_cpu": cpu, "peak_mb": (rss_kb("VmHWM") - before) / 1024}


def transformers_side(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    """sdpa (figures 1, 2) or eager with every map (figure 3), two calls alternating."""
    import torch
    import transformers
    from tokenizers import Tokenizer

    clock = Clock(args.device)
    implementation = "eager" if args.figure == 3 else "sdpa"
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation=implementation, dtype=torch.float32
    )
    model = model.to(args.device).eval()
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    ids = torch.tensor([tokenizer.encode(text_of(args.tokens, directory)).ids], device=args.device)
    assert ids.shape[1] == args.tokens
    if args.figure == 3:  # every map; the logits of all positions, then ours' outputs

        def full() -> object:
            return model(ids, output_attentions=True)

        def lean() -> object:
            return model(ids, output_attentions=True, output_hidden_states=True, logits_to_keep=1)

    else:  # no maps; the logits of all positions, then the body alone (no LM head)

        def full() -> object:
            return model(ids)

        def lean() -> object:
            return model.base_model(ids)

    calls = [("full", full), ("lean", lean)]
    out: dict[str, Any] = {}
    with torch.inference_mode():
        model(ids[:, :16])
        for key, call in calls if args.round % 2 == 0 else calls[::-1]:
            before = rss_kb("VmRSS")
            reset_peak()
            start, cpu = clock(), time.process_time()
            result = call()
            out[key + "_s"] = clock() - start
            out[key + "_cpu"] = time.process_time() - cpu
            out[key + "_peak_mb"] = (rss_kb("VmHWM") - before) / 1024
            del result
    return out


def child(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    directory = checkpoint(args.model)
    if args.child == "theirs":
        return transformers_side(args, directory)
    return ours_forward(args, directory) if args.figure == 3 else ours_app(args, directory)


# --- the parent -----------------------------------------------------------------------


def run_child(
    cmd: list[str], max_anon_kb: int, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run one child, killing it if its anonymous resident memory passes ``max_anon_kb``
    (file-backed pages, the memory-mapped checkpoint's, are page cache: not counted)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = {"VmRSS": 0, "RssAnon": 0}

    def watch() -> None:
        status = Path(f"/proc/{proc.pid}/status")
        while proc.poll() is None:
            try:
                for line in status.read_text().splitlines():
                    key = line.split(":")[0]
                    if key in peak:
                        peak[key] = max(peak[key], int(line.split()[1]))
            except OSError:
                return
            if peak["RssAnon"] > max_anon_kb:
                proc.kill()
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    stdout, stderr = proc.communicate()
    watcher.join()
    if peak["RssAnon"] > max_anon_kb:
        gb = peak["RssAnon"] / 2**20
        raise SystemExit(f"killed: anonymous resident memory {gb:.1f} GB > the limit: {cmd}")
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}): {cmd}\n{stderr[-3000:]}")
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    result["child_rss_gb"] = round(peak["VmRSS"] / 2**20, 2)
    result["child_anon_gb"] = round(peak["RssAnon"] / 2**20, 2)
    return result


def median(rows: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in rows if isinstance(r.get(key), int | float)]
    return statistics.median(values) if values else float("nan")


def report(args: argparse.Namespace, model: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Medians of wall-clock and CPU time (the process's: steadier on a busy machine)."""
    ours, theirs, before = rows["ours"], rows["theirs"], rows.get("before", [])
    ref = "eager" if args.figure == 3 else "sdpa"
    lean_name = "same outputs as ours" if args.figure == 3 else "no LM head"

    def times(group: list[dict[str, Any]], key: str) -> tuple[float, float]:
        return median(group, key + "_s"), median(group, key + "_cpu")

    def row(what: str, t: tuple[float, float], goal: str = "") -> None:
        print(f"| {what} | {t[0]:.2f} s | {t[1]:.2f} s | {goal} |")

    def ratio(what: str, a: tuple[float, float], b: tuple[float, float], goal: str) -> None:
        print(f"| {what} | **{a[0] / b[0]:.2f}×** | **{a[1] / b[1]:.2f}×** | {goal} |")

    full, lean = times(theirs, "full"), times(theirs, "lean")
    print(f"\n### figure {args.figure}: {model}, T = {args.tokens}, {args.rounds} rounds")
    print("| measure | wall | CPU | goal |")
    print("|---|---:|---:|---|")
    row(f"{ref}: logits of every position", full)
    row(f"{ref}: {lean_name}", lean)
    if args.figure == 1:
        overview = times(ours, "overview")
        row(f"ours: overview, pool {args.pool}", overview)
        ratio(f"ours / {ref}", overview, full, "≤ 1.5×")
        ratio(f"ours / {ref} no LM head", overview, lean, "")
        size = median(ours, "overview_bytes") / 1e6
        print(f"| overview answer | {size:.2f} MB | | ≤ 8 MB |")
        peak = median(ours, "overview_peak_mb")
        print(f"| peak resident growth, overview | {peak:.0f} MB | | ≤ 2,048 MB |")
        for key, what in (
            ("head_page", f"one head as /model asks (pool {ZOOM_MAX_SIDE}, + head average)"),
            ("head_alone", f"the same, `head_average: false` (pool {ZOOM_MAX_SIDE})"),
            ("head_full", "one head, no pool (full resolution), no head average"),
            ("region", f"a {min(ZOOM_MAX_SIDE, args.tokens)}² region of it, full resolution"),
        ):
            errors = {r[key + "_error"] for r in ours if key + "_error" in r}
            size = median(ours, key + "_bytes") / 1e6
            note = f" (refused: {'; '.join(errors)})" if errors else ""
            row(f"{what}: {size:.1f} MB{note}", times(ours, key), "≤ 1 s")
        print(f"| peak resident growth, all five requests | {median(ours, 'peak_mb'):.0f} MB | | |")
    elif args.figure == 2:
        first, grid = times(ours, "first_layer"), times(ours, "grid")
        if before:
            b_first, b_grid = times(before, "first_layer"), times(before, "grid")
            row("before: layer 1's request", b_first)
            row("before: to the first grid (both)", b_grid)
            ratio(f"before: first request / {ref}", b_first, full, "")
            ratio(f"before: first grid / {ref}", b_grid, full, "")
            ratio("ours / before: first grid", grid, b_grid, "")
            size = median(before, "grid_bytes") / 1e6
            print(f"| before: bytes, all layers | {size:.2f} MB | | |")
        row(f"ours ({args.variant}): layer 1's request", first)
        row(f"ours ({args.variant}): layers 2..L's request", times(ours, "other_layers"))
        row("ours: to the first grid (both)", grid)
        ratio(f"first request / {ref}", first, full, "≤ 1.3×")
        ratio(f"first request / {ref} no LM head", first, lean, "")
        ratio(f"first grid / {ref}", grid, full, "")
        ratio(f"first grid / {ref} no LM head", grid, lean, "")
        print(
            f"| bytes: layer 1 / all layers | {median(ours, 'first_layer_bytes') / 1e6:.2f} / "
            f"**{median(ours, 'grid_bytes') / 1e6:.2f} MB** | | ≤ 5 MB |"
        )
        print(f"| peak resident growth | {median(ours, 'peak_mb'):.0f} MB | | |")
    else:
        encode = times(ours, "ours")
        if before:
            b_encode = times(before, "ours")
            row("before: encode", b_encode)
            ratio("before / eager (logits of every position)", b_encode, full, "")
            ratio("before / eager (same outputs)", b_encode, lean, "")
            ratio("ours / before", encode, b_encode, "")
        row("ours: encode, every map and hidden state", encode)
        ratio("ours / eager (logits of every position)", encode, full, "≤ 0.75×")
        ratio("ours / eager (same outputs)", encode, lean, "")
        print(
            f"| peak resident growth ours / eager | {median(ours, 'peak_mb'):.0f} / "
            f"{median(theirs, 'full_peak_mb'):.0f} MB | | |"
        )
    for side, group in rows.items():
        if not group:
            continue
        rss = max(r["child_rss_gb"] for r in group)
        anon = max(r["child_anon_gb"] for r in group)
        print(f"| {side}: largest child resident set (anonymous) | {rss:.1f} ({anon:.1f}) GB | | |")


FIGURES = {1: (["gpt2-small"], 4096), 2: (["llama-1b"], 512), 3: (["gpt2-small", "llama"], 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--figure", type=int, choices=(1, 2, 3), required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", nargs="+", help="figure 3: gpt2-small llama")
    parser.add_argument("--tokens", type=int, help="default: 4096, 512, 1024 by figure")
    parser.add_argument("--pool", type=int, default=POOL_FEW, help="figure 1's overview pool")
    parser.add_argument("--variant", choices=("pooled", "whole"), default="pooled")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--max-rss-gb", type=float, default=8.0)
    parser.add_argument("--child", choices=("ours", "theirs"))
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write every child's numbers here")
    parser.add_argument(
        "--before",
        type=Path,
        help="figures 2, 3: a source tree of the code before (`git archive main | tar -x -C "
        "DIR`, with this bench copied into DIR/bench): its ours runs as a third side",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="figures 1, 2: torch.profiler around ours' first request, the table written here "
        "(one round is enough; the profiler slows it)",
    )
    args = parser.parse_args()
    models, tokens = FIGURES[args.figure]
    args.tokens = args.tokens or tokens
    if args.child:
        print(json.dumps(child(args)))
        return
    import torch

    print(
        f"figure {args.figure}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"device {args.device} (CUDA available: {torch.cuda.is_available()}), "
        f"{args.threads} thread(s), load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    everything: dict[str, Any] = {}
    for model in args.models or models:
        checkpoint(model)  # made here, once, not in a timed child
        rows: dict[str, list[dict[str, Any]]] = {"ours": [], "theirs": [], "before": []}
        sides = ["ours", "theirs"] + (["before"] if args.before else [])
        for r in range(args.rounds):
            for side in sides[r % len(sides) :] + sides[: r % len(sides)]:
                script, env = __file__, None
                if side == "before":  # ours, from another source tree (its own bench copy)
                    script = str(args.before / "bench" / "bench_issue21.py")
                    env = {**os.environ, "PYTHONPATH": str(args.before)}
                child_side = "ours" if side == "before" else side
                cmd = [sys.executable, script, "--child", child_side, "--model", model]
                cmd += ["--figure", str(args.figure), "--tokens", str(args.tokens)]
                cmd += ["--pool", str(args.pool), "--variant", args.variant]
                cmd += ["--threads", str(args.threads), "--device", args.device]
                cmd += ["--round", str(r)]
                if args.profile and side == "ours":
                    cmd += ["--profile", str(args.profile)]
                rows[side].append(run_child(cmd, int(args.max_rss_gb * 2**20), env))
                load = os.getloadavg()[0]
                print(
                    f"round {r + 1} {model} {side} (load {load:.1f}): {rows[side][-1]}", flush=True
                )
        everything[model] = rows
        report(args, model, rows)
    print(f"\nload average at end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
