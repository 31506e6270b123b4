"""The GPU figures of big models: Llama-3.1-8B's shape, bf16, T = 32,768 on one GPU.

    .venv/bin/python bench/bench_gpu_big.py --root /tmp/bigckpt [--record]

On a GPU machine without network whose image has torch and Triton, ``bash
scripts/offline-wheels.sh`` here first (the app's other packages as wheels in .whl/),
then there ``. .whl/setup.sh && python3 bench/bench_gpu_big.py --record``.

One run, each side in a fresh child process (with its own time limit, printed as it
ends), the checkpoint written first by ``bench/big_checkpoint.py`` (16 GB of random
bf16 weights, tensor by tensor; ~27 s on an H200):

- ``sdpa``: transformers' ``LlamaForCausalLM`` in bf16 on the GPU,
  ``attn_implementation="sdpa"``, one forward without attentions
  (``logits_to_keep=1``): the least any viewer's forward could cost.
- ``kernel``: the app (``ATTENTION_VIZ_DEVICE=cuda``, the layers in bf16):
  ``POST /api/model/attention`` for the pooled overview of all 1,024 heads (32 layers
  × 32 heads and each layer's head average, ``pool`` cells a side, compact uint8),
  gathered by the GPU kernel (``ATTENTION_VIZ_MODEL_DEVICE_POOLING``, on by default:
  flash attention's context, the maps recomputed from its log-sum-exp,
  ``attention_core/models/maps/gpu_pooled.py``); then one head's last ``--zoom`` ×
  ``--zoom`` cells at full resolution, rebuilt in float32 from the kept q and k.
- ``moonshot``: the same overview at ``--moonshot`` tokens (131,072), kernel only.
- ``hf`` (only with ``--hf-tokens``, e.g. 32768): the ``kernel`` side's overview and
  zoom on ``--hf-shape`` (Qwen3-8B's, a second 16 GB checkpoint), a family only the
  transformers backend runs: its causal mask described, not built
  (``attention_core/models/hf/described_mask.py``), so its layers reach the kernel too.
- ``steps``: the overview with the kernel off (every attention step float32 through
  ``attention_with_steps``, block by block) at ``--steps-tokens`` (8,192; 0 skips it),
  against the kernel's overview at that length (``kernel``'s last request): time, and
  their uint8 maps cell by cell.

Before each timed overview the kernel is built and autotuned for its length and pool
on random q and k of the model's heads (``warm_kernel``; its seconds are printed as
``kernel_warm_seconds``, not counted in the overview's).

Goals (issue 30): the overview <= 1.5x one SDPA forward and <= 20 MB; the head at
full resolution <= 1 s after it; the moonshot at all, never a T × T tensor.  Timings
synchronize the GPU.

Before a GPU session: ``.venv/bin/python bench/bench_gpu_big.py --check`` runs every
side (sdpa, kernel with its zoom and comparison, steps, moonshot; hf on ``qwen3-tiny``)
at a few hundred tokens of ``llama-tiny`` on the CPU, the kernel in Triton's
interpreter, and exits non-zero unless each answered and the kernel pooled every layer
(80-100 s on 2 busy cores, most of it the five children's imports: too long for the
test suite, so run it by hand after changing this script or the kernel).  On a CPU at other sizes:
``--shape llama-tiny --tokens 2048 --device cpu --moonshot 0 --interpret``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.big_checkpoint import make, stored_bytes, text_of  # noqa: E402

WARM_TOKENS = 128
# How to run it (--check first: every side tiny on the CPU, before a GPU session).
RUN = ".venv/bin/python bench/bench_gpu_big.py [--check] [--root /tmp/bigckpt] [--record]"
# Seconds each child may take (a 16 GB load is ~20 s of it), and the whole run.
LIMITS = {"sdpa": 120, "kernel": 150, "moonshot": 200, "steps": 240, "hf": 150}
RUN_SECONDS = 290


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def gpu_peak(device: str) -> float:
    import torch

    return torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else 0.0


def sdpa(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import transformers

    device, tokens = args.device, args.tokens
    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.dir, attn_implementation="sdpa", dtype=torch.bfloat16, local_files_only=True
    ).to(device)
    model.eval()
    ids = torch.tensor([[1 + (i * 7919) % 1000 for i in range(tokens)]], device=device)
    with torch.inference_mode():
        model(ids[:, :WARM_TOKENS], logits_to_keep=1)
        synchronize(device)
        start = time.perf_counter()
        model(ids, logits_to_keep=1)
        synchronize(device)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "gpu_peak_gb": gpu_peak(device)}


def ours(args: argparse.Namespace) -> dict[str, Any]:
    """The overview (kernel on or off: ``--pooling``), then one head's zoom; with
    ``--compare-tokens`` one more overview at that length, its maps kept in ``--dump``."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    settings = Settings(
        models=str(args.dir.parent),
        hf_cache=False,
        device=args.device,
        model_max_tokens=max(args.tokens, args.compare_tokens, WARM_TOKENS),
        max_model_bytes=10**12,  # held whole on the GPU, not spread
        model_long_cache_bytes=2**40,  # keep the q and k of all 32 layers for the zoom
        model_max_answer_cells=2**30,
        model_deadline_seconds=0,
        model_device_pooling=args.pooling == "on",
        model_full_maps_bytes=0,  # the long path at every length (a tiny model's too)
        model_long_rollout_tokens=0,  # no rollout (none past 1,024 tokens by default)
    )
    pooled = count_kernel_layers(args.interpret)
    body: dict[str, Any] = {"model": args.dir.name, "format": "compact", "pool": args.pool}
    with TestClient(create_app(settings)) as client:
        overview(client, body, WARM_TOKENS, args.device)
        warmed = 0.0
        for tokens in (args.tokens, args.compare_tokens):
            if tokens and args.pooling == "on":  # built and tuned first
                warmed += warm_kernel(args.dir, tokens, args.pool, args.device)
        pooled.clear()
        result, answer = overview(client, body, args.tokens, args.device)
        result |= {"kernel_layers": len(pooled)}  # layers whose maps the kernel pooled
        result |= {"kernel_warm_seconds": warmed}
        config = json.loads((args.dir / "config.json").read_text())
        result |= {"layers": config["num_hidden_layers"]}
        result |= zoom(client, body, args)
        if args.compare_tokens:
            second, answer = overview(client, body, args.compare_tokens, args.device)
            result["compare_seconds"] = second["seconds"]
        if args.dump is not None:
            dump_maps(answer, args.dump)
    return result


def overview(
    client: Any, body: dict[str, Any], tokens: int, device: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One overview of a ``tokens``-long text: its figures, and the answer."""
    synchronize(device)
    start = time.perf_counter()
    response = client.post("/api/model/attention", json={**body, "text": text_of(tokens)})
    synchronize(device)
    seconds = time.perf_counter() - start
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    result = {"seconds": seconds, "answer_mb": len(response.content) / 1e6}
    result |= {"maps": sum(a["shape"][0] for a in answer["attentions"])}
    result |= {"path": answer.get("maps_path"), "gpu_peak_gb": gpu_peak(device)}
    return result, answer


def warm_kernel(directory: Path, tokens: int, pool: int, device: str) -> float:
    """Triton's builds of the kernel and its autotuning (``pooled_kernel.pooled_maps_tuned``:
    keyed on the head dim, T's power-of-two bucket and the tile caps) for a ``tokens``-long
    overview pooled to ``pool`` cells, on random q and k of the model's heads, before the
    timed request: seconds that are not the overview's.  On a GPU both 16-bit types (the
    layer picks one per call); on a CPU (the interpreter) float32, as there."""
    import torch

    from attention_core.models.maps import gpu_pooled
    from attention_core.models.maps.map_grid import MapGrid, MapQuery
    from attention_core.models.maps.pooling import Region, block_size

    config = json.loads((directory / "config.json").read_text())
    H, H_kv = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
    D = int(config.get("head_dim") or config["hidden_size"] // H)
    block = block_size(tokens, pool)
    query = MapQuery(None, Region(0, tokens, 0, tokens), (block, block), None)
    dtypes = (torch.float16, torch.bfloat16) if device == "cuda" else (torch.float32,)
    start = time.perf_counter()
    for dtype in dtypes:
        q = torch.randn(H, tokens, D, device=device).mul_(0.1).to(dtype)
        k = torch.randn(H_kv, tokens, D, device=device).mul_(0.1).to(dtype)
        lse = torch.zeros(H, tokens, device=device)
        gpu_pooled.pool_layer(q, k, lse, D**-0.5, True, MapGrid(query, H, tokens, tokens))
        del q, k, lse
    synchronize(device)
    return time.perf_counter() - start


def count_kernel_layers(interpret: bool) -> list[int]:
    """A list that grows by one for each layer the GPU kernel pools (``interpret``: the
    kernel on the CPU, in Triton's interpreter)."""
    from attention_core.models.maps import gpu_pooled

    gpu_pooled.CPU_INTERPRETER = interpret
    calls: list[int] = []
    original = gpu_pooled.pool_layer

    def counted(query: Any, *rest: Any) -> Any:
        calls.append(int(query.shape[1]))
        return original(query, *rest)

    gpu_pooled.pool_layer = counted  # type: ignore[assignment]
    return calls


def zoom(client: Any, body: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Layer 1, head 1's last ``--zoom`` rows and columns at full resolution."""
    region = [args.tokens - args.zoom, args.tokens]
    ask = {**body, "text": text_of(args.tokens), "pool": None}
    ask |= {"layers": [1], "heads": [1], "rows": region, "cols": region}
    start = time.perf_counter()
    head = client.post("/api/model/attention", json=ask)
    head_seconds = time.perf_counter() - start
    assert head.status_code == 200, head.text
    return {"head_seconds": head_seconds, "head_mb": len(head.content) / 1e6}


def dump_maps(answer: dict[str, Any], path: Path) -> None:
    """Every layer's uint8 maps (heads and head average), one array, for the comparison."""
    import base64

    import numpy as np

    parts = [
        np.frombuffer(base64.b64decode(m["data"]), dtype=np.uint8)
        for key in ("attentions", "head_average")
        for m in answer.get(key) or []
    ]
    np.save(path, np.concatenate(parts))


def compared(kernel: Path, steps: Path) -> str:
    """How far the kernel's uint8 maps are from the float32 path's, in steps of 1/255."""
    import numpy as np

    a, b = np.load(kernel).astype(np.int16), np.load(steps).astype(np.int16)
    if a.shape != b.shape:
        return f"kernel vs steps maps: shapes differ ({a.shape} vs {b.shape})"
    diff = np.abs(a - b)
    over = float((diff > 1).mean()) * 100
    return (
        f"kernel vs steps maps ({a.size} uint8 cells): max |diff| {int(diff.max())}/255, "
        f"mean {float(diff.mean()):.4f}/255, {over:.3f}% of cells more than 1/255 apart"
    )


def run_child(
    side: str, args: argparse.Namespace, directory: Path, tokens: int, deadline: float, **extra: Any
) -> dict[str, Any] | None:
    """One side in a fresh process, within its limit and the run's; its result printed
    as it ends, or why there is none (None)."""
    slower = 1 if args.device == "cuda" else 4  # a CPU (the interpreter) takes longer
    limit = min(LIMITS[side] * slower, deadline - time.perf_counter())
    if limit < 20:
        print(f"{side}: skipped, {limit:.0f} s left of the run", flush=True)
        return None
    child = "sdpa" if side == "sdpa" else "ours"
    cmd = [sys.executable, __file__, "--child", child, "--dir", str(directory)]
    cmd += ["--tokens", str(tokens), "--device", args.device]
    cmd += ["--pool", str(args.pool), "--zoom", str(min(args.zoom, tokens))]
    for name, value in extra.items():
        cmd += [f"--{name}", str(value)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if args.interpret:
        cmd.append("--interpret")
        env["TRITON_INTERPRET"] = "1"  # before the child imports Triton
    start = time.perf_counter()
    try:
        out = subprocess.run(
            cmd, check=True, stdout=subprocess.PIPE, text=True, timeout=limit, env=env
        ).stdout
    except subprocess.TimeoutExpired:
        print(f"{side} T={tokens}: no result within {limit:.0f} s", flush=True)
        return None
    except subprocess.CalledProcessError as exc:
        print(f"{side} T={tokens}: failed ({exc.returncode}): {exc.stdout[-400:]}", flush=True)
        return None
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["tokens"] = tokens
    rounded = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}
    print(f"{side} T={tokens} ({time.perf_counter() - start:.0f} s in all): {rounded}", flush=True)
    return result


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="llama-3.1-8b")
    parser.add_argument("--root", type=Path, default=Path("/tmp/bigckpt"))
    parser.add_argument("--tokens", type=int, default=32768)
    parser.add_argument("--moonshot", type=int, default=131072, help="0: none")
    parser.add_argument("--steps-tokens", type=int, default=8192, help="0: none")
    parser.add_argument("--compare-tokens", type=int, default=0)
    parser.add_argument("--hf-shape", default="qwen3-8b", help="the transformers backend's")
    parser.add_argument("--hf-tokens", type=int, default=0, help="0: no transformers side")
    parser.add_argument("--pool", type=int, default=112, help="cells a side of each map")
    parser.add_argument("--zoom", type=int, default=1024, help="the head's region, a side")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--interpret", action="store_true", help="the kernel on a CPU")
    parser.add_argument("--seconds", type=int, default=RUN_SECONDS, help="the whole run's")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--check", action="store_true", help="every side, tiny, on the CPU")
    parser.add_argument("--child", choices=["ours", "sdpa"])
    parser.add_argument("--pooling", choices=["on", "off"], default="on")
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--dir", type=Path)
    return parser.parse_args()


def leave(result: dict[str, Any]) -> NoReturn:
    """A child's end: its result printed, the threads still running named on stderr, then
    ``os._exit``.  A plain exit finalizes the interpreter while such a thread may be
    inside a torch op with the GIL released; taking the GIL back then ends the thread
    by ``pthread_exit``, whose unwinding through the op's C++ frames aborts the process
    ("terminate called without an active exception", seen at the end of GPU children)
    after the result was already written."""
    print(json.dumps(result), flush=True)
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        print(f"threads running at the child's end: {others}", file=sys.stderr, flush=True)
    sys.stderr.flush()
    os._exit(0)


# ``--check``: every side of the run at a few hundred tokens on the CPU, the kernel in
# Triton's interpreter (about a minute): a script broken by a change shows here, before
# a GPU's time is spent on it.
CHECK = {
    "shape": "llama-tiny",
    "tokens": 256,
    "moonshot": 288,
    "steps_tokens": 192,
    "pool": 2,
    "zoom": 32,
    "device": "cpu",
    "interpret": True,
    "hf_shape": "qwen3-tiny",
    "hf_tokens": 256,
}


def main() -> None:
    args = parse()
    if args.child is not None:
        leave(sdpa(args) if args.child == "sdpa" else ours(args))
    if args.check:
        args.__dict__.update(CHECK)
        args.root = args.root.with_name(args.root.name + "-check")
    start = time.perf_counter()
    deadline = start + args.seconds * (1 if args.device == "cuda" else 4)
    directory = make(args.shape, args.root)
    written = time.perf_counter() - start
    print(f"{directory}: {stored_bytes(directory) / 1e9:.1f} GB in {written:.0f} s", flush=True)
    T, steps_T = args.tokens, args.steps_tokens
    dumps = {"kernel": args.root / "maps-kernel.npy", "steps": args.root / "maps-steps.npy"}
    for path in dumps.values():
        path.unlink(missing_ok=True)
    compare = {"compare-tokens": steps_T, "dump": dumps["kernel"]} if steps_T else {}
    results: dict[str, dict[str, Any] | None] = {
        "sdpa": run_child("sdpa", args, directory, T, deadline),
        "kernel": run_child("kernel", args, directory, T, deadline, **compare),
    }
    if steps_T:  # before the moonshot: the kernel's maps checked on the GPU come first
        steps = {"pooling": "off", "dump": dumps["steps"]}
        results["steps"] = run_child("steps", args, directory, steps_T, deadline, **steps)
    if args.moonshot:
        results["moonshot"] = run_child("moonshot", args, directory, args.moonshot, deadline)
    if args.hf_tokens:  # last: a second checkpoint to write and load
        hf_dir = make(args.hf_shape, args.root)
        results["hf"] = run_child("hf", args, hf_dir, args.hf_tokens, deadline)
    for line in summary(args, results, steps_T):
        print(line, flush=True)
    if all(path.is_file() for path in dumps.values()):
        print(f"T = {steps_T}: {compared(dumps['kernel'], dumps['steps'])}", flush=True)
    print(f"total {time.perf_counter() - start:.0f} s", flush=True)
    rows = result_rows(args, results)
    if args.check:
        sys.exit(check_failures(results, dumps, rows))
    if args.record:
        record_rows(rows)


def check_failures(
    results: dict[str, dict[str, Any] | None],
    dumps: dict[str, Path],
    rows: list[dict[str, Any]],
) -> int:
    """``--check``'s verdict (0: every side answered, the kernel pooled every layer of its
    overviews, both paths' maps were dumped and a row was made of each figure)."""
    failures = [f"{side}: no result" for side, result in results.items() if result is None]
    for side in ("kernel", "moonshot", "hf"):
        result = results.get(side) or {}
        if result and result["kernel_layers"] != result["layers"]:
            failures.append(
                f"{side}: the kernel pooled {result['kernel_layers']} of {result['layers']} layers"
            )
    failures += [f"no {path}" for path in dumps.values() if not path.is_file()]
    expected = 4 + ("hf" in results)
    if len(rows) != expected:
        failures.append(f"{len(rows)} rows to record, not {expected}")
    for failure in failures:
        print(f"check failed: {failure}", flush=True)
    if not failures:
        print("check: every side ran and answered", flush=True)
    return 1 if failures else 0


def summary(
    args: argparse.Namespace, results: dict[str, dict[str, Any] | None], steps_T: int
) -> list[str]:
    """The goals' lines: each figure against its goal (or why it is missing)."""
    theirs, mine = results.get("sdpa"), results.get("kernel")
    lines = []
    if theirs and mine:
        lines.append(
            f"T = {args.tokens}: overview of {mine['maps']} maps (kernel) {mine['seconds']:.2f} s, "
            f"{mine['answer_mb']:.1f} MB; SDPA forward {theirs['seconds']:.2f} s; ratio "
            f"{mine['seconds'] / theirs['seconds']:.2f}x (goal <= 1.5x, <= 20 MB); one head "
            f"{args.zoom}x{args.zoom} at full resolution {mine['head_seconds']:.2f} s after it "
            "(goal <= 1 s)"
        )
    steps = results.get("steps")
    if steps and mine and "compare_seconds" in mine:
        lines.append(
            f"T = {steps_T}: overview on the float32 steps path {steps['seconds']:.2f} s, "
            f"by the kernel {mine['compare_seconds']:.2f} s: "
            f"{steps['seconds'] / mine['compare_seconds']:.1f}x"
        )
    elif steps:
        lines.append(f"T = {steps_T}: overview on the float32 steps path {steps['seconds']:.2f} s")
    moon = results.get("moonshot")
    if moon:
        lines.append(
            f"moonshot T = {args.moonshot}: overview of {moon['maps']} maps (kernel) "
            f"{moon['seconds']:.2f} s, {moon['answer_mb']:.1f} MB, GPU peak "
            f"{moon['gpu_peak_gb']:.0f} GB; one head {args.zoom}x{args.zoom} "
            f"{moon['head_seconds']:.2f} s"
        )
    hf = results.get("hf")
    if hf:
        lines.append(
            f"{args.hf_shape} through transformers, T = {hf['tokens']}: overview of "
            f"{hf['maps']} maps {hf['seconds']:.2f} s ({hf['kernel_layers']} of "
            f"{hf['layers']} layers by the kernel), {hf['answer_mb']:.1f} MB; one head "
            f"{args.zoom}x{args.zoom} {hf['head_seconds']:.2f} s"
        )
    return lines


def result_rows(
    args: argparse.Namespace, results: dict[str, dict[str, Any] | None]
) -> list[dict[str, Any]]:
    """The rows ``--record`` writes (built in ``--check`` too, so their code runs)."""
    import torch

    from bench.record import machine

    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    theirs, mine = results.get("sdpa"), results.get("kernel")
    peak = max((r["gpu_peak_gb"] for r in results.values() if r), default=0.0)
    where = machine(f"{gpu}, GPU peak {peak:.0f} GB")
    command = f".venv/bin/python bench/bench_gpu_big.py --root {args.root} --record"
    shape = f"{args.shape} shape, bf16, on {gpu}"
    rows: list[dict[str, Any]] = []
    if theirs and mine:
        rows.append(
            {
                "figure": f"{shape}, T={args.tokens}: pooled overview of all {mine['maps']} "
                "maps (GPU kernel from flash attention's log-sum-exp)",
                "value": round(mine["seconds"], 2),
                "unit": "s",
                "baseline": "transformers bf16 SDPA forward without attentions, same GPU",
                "baseline_value": round(theirs["seconds"], 2),
                "ratio": round(mine["seconds"] / theirs["seconds"], 2),
                "goal": "<= 1.5x, <= 20 MB",
                "note": f"answer {mine['answer_mb']:.1f} MB (pool {args.pool})",
            }
        )
    if mine:
        rows.append(
            {
                "figure": f"{shape}, T={args.tokens}: one head's {args.zoom}x{args.zoom} "
                "cells at full resolution after the overview",
                "value": round(mine["head_seconds"], 2),
                "unit": "s",
                "goal": "<= 1 s after the overview",
            }
        )
    rows += other_rows(args, results, shape)
    for row in rows:
        row |= {"machine": where, "command": command}
    return rows


def record_rows(rows: list[dict[str, Any]]) -> None:
    from bench.record import record

    record(
        "bench/bench_gpu_big.py",
        "Big models on one GPU: the pooled overview of every head vs one SDPA forward.",
        RUN,
        rows,
    )


def other_rows(
    args: argparse.Namespace, results: dict[str, dict[str, Any] | None], shape: str
) -> list[dict[str, Any]]:
    """The float32 steps path's overview and the moonshot's, when they ran."""
    rows: list[dict[str, Any]] = []
    mine, steps, moon = results.get("kernel"), results.get("steps"), results.get("moonshot")
    hf = results.get("hf")
    if steps:
        row = {
            "figure": f"{shape}, T={steps['tokens']}: pooled overview on the float32 steps "
            "path (ATTENTION_VIZ_MODEL_DEVICE_POOLING=false)",
            "value": round(steps["seconds"], 2),
            "unit": "s",
        }
        if mine and "compare_seconds" in mine:
            row |= {"baseline": "the same overview by the GPU kernel, same GPU"}
            row |= {"baseline_value": round(mine["compare_seconds"], 2)}
            row |= {"ratio": round(steps["seconds"] / mine["compare_seconds"], 2)}
        rows.append(row)
    if moon:
        rows.append(
            {
                "figure": f"{shape}, T={moon['tokens']} (moonshot): pooled overview of all "
                f"{moon['maps']} maps by the GPU kernel, never a T x T tensor",
                "value": round(moon["seconds"], 2),
                "unit": "s",
                "note": f"answer {moon['answer_mb']:.1f} MB, GPU peak {moon['gpu_peak_gb']:.0f} "
                f"GB; one head {args.zoom}x{args.zoom} {moon['head_seconds']:.2f} s after it",
            }
        )
    if hf:
        rows.append(
            {
                "figure": f"{args.hf_shape} shape through the transformers backend, "
                f"T={hf['tokens']}: pooled overview of all {hf['maps']} maps (its causal "
                "mask described, not built: the GPU kernel)",
                "value": round(hf["seconds"], 2),
                "unit": "s",
                "note": f"{hf['kernel_layers']} of {hf['layers']} layers by the kernel; "
                f"answer {hf['answer_mb']:.1f} MB, GPU peak {hf['gpu_peak_gb']:.0f} GB; one "
                f"head {args.zoom}x{args.zoom} {hf['head_seconds']:.2f} s after it",
            }
        )
    return rows


if __name__ == "__main__":
    main()
