"""The GPU figures of big models: Llama-3.1-8B's shape, bf16, T = 32,768 on one GPU.

    .venv/bin/python bench/bench_gpu_big.py --root /tmp/bigckpt [--tokens 32768] [--record]

Runs every figure in one go, each side in a fresh child process (well under 8
minutes on an H100 with the checkpoint written by the script itself:
``bench/big_checkpoint.py``, 16 GB of random bf16 weights, tensor by tensor):

- ``sdpa``: transformers' ``LlamaForCausalLM`` in bf16 on the GPU,
  ``attn_implementation="sdpa"``, one forward without attentions
  (``logits_to_keep=1``): the least any viewer's forward could cost.
- ``ours``: the app with ``ATTENTION_VIZ_DEVICE=cuda`` (the layers in bf16, every
  attention step float32): ``POST /api/model/attention`` for the pooled overview of
  all 1,024 heads (32 layers × 32 heads, ``pool`` cells a side, compact uint8),
  then one head's last ``--zoom`` × ``--zoom`` cells at full resolution, rebuilt from
  the kept q and k (``ATTENTION_VIZ_MODEL_LONG_CACHE_BYTES`` raised to hold them).

Goals (issue 30): the overview <= 1.5x one SDPA forward and <= 20 MB; the head at
full resolution <= 1 s after it.  Timings synchronize the GPU.  ``--tokens`` and
``--shape`` smaller (``--shape llama-tiny --tokens 2048``) try the script on a CPU
(``--device cpu``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.big_checkpoint import make, stored_bytes, text_of  # noqa: E402

WARM_TOKENS = 128


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def sdpa(directory: Path, tokens: int, device: str) -> dict[str, Any]:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation="sdpa", dtype=torch.bfloat16, local_files_only=True
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
    peak = torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else 0.0
    return {"seconds": seconds, "gpu_peak_gb": peak}


def ours(directory: Path, tokens: int, device: str, pool: int, zoom: int) -> dict[str, Any]:
    import torch
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    settings = Settings(
        models=str(directory.parent),
        hf_cache=False,
        device=device,
        model_max_tokens=tokens,
        max_model_bytes=10**12,  # held whole on the GPU, not spread
        model_long_cache_bytes=2**40,  # keep the q and k of all 32 layers for the zoom
        model_max_answer_cells=2**30,
        model_deadline_seconds=0,
    )
    body: dict[str, Any] = {"model": directory.name, "format": "compact", "text": text_of(tokens)}
    with TestClient(create_app(settings)) as client:
        warm = client.post(
            "/api/model/attention", json={**body, "text": text_of(WARM_TOKENS), "pool": pool}
        )
        assert warm.status_code == 200, warm.text
        synchronize(device)
        start = time.perf_counter()
        overview = client.post("/api/model/attention", json={**body, "pool": pool})
        synchronize(device)
        seconds = time.perf_counter() - start
        assert overview.status_code == 200, overview.text
        answer = overview.json()
        maps = sum(a["shape"][0] for a in answer["attentions"])
        start = time.perf_counter()
        region = [tokens - zoom, tokens]
        head = client.post(
            "/api/model/attention",
            json={**body, "layers": [1], "heads": [1], "rows": region, "cols": region},
        )
        head_seconds = time.perf_counter() - start
        assert head.status_code == 200, head.text
    peak = torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else 0.0
    return {
        "seconds": seconds,
        "answer_mb": len(overview.content) / 1e6,
        "maps": maps,
        "path": answer.get("maps_path"),
        "head_seconds": head_seconds,
        "head_mb": len(head.content) / 1e6,
        "gpu_peak_gb": peak,
    }


def run_child(side: str, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", side, "--dir", str(directory)]
    cmd += ["--tokens", str(args.tokens), "--device", args.device]
    cmd += ["--pool", str(args.pool), "--zoom", str(args.zoom)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    print(side, result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="llama-3.1-8b")
    parser.add_argument("--root", type=Path, default=Path("/tmp/bigckpt"))
    parser.add_argument("--tokens", type=int, default=32768)
    parser.add_argument("--pool", type=int, default=112, help="cells a side of each map")
    parser.add_argument("--zoom", type=int, default=1024, help="the head's region, a side")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", choices=["ours", "sdpa"])
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    if args.child == "sdpa":
        print(json.dumps(sdpa(args.dir, args.tokens, args.device)))
        return
    if args.child == "ours":
        print(json.dumps(ours(args.dir, args.tokens, args.device, args.pool, args.zoom)))
        return
    start = time.perf_counter()
    directory = make(args.shape, args.root)
    written = time.perf_counter() - start
    print(f"{directory}: {stored_bytes(directory) / 1e9:.1f} GB in {written:.0f} s")
    theirs, mine = run_child("sdpa", args, directory), run_child("ours", args, directory)
    ratio = mine["seconds"] / theirs["seconds"]
    print(
        f"T = {args.tokens}: overview of {mine['maps']} maps {mine['seconds']:.2f} s, "
        f"{mine['answer_mb']:.1f} MB; SDPA forward {theirs['seconds']:.2f} s; "
        f"ratio {ratio:.2f}x (goal <= 1.5x, <= 20 MB); one head {args.zoom}x{args.zoom} "
        f"at full resolution {mine['head_seconds']:.2f} s after it (goal <= 1 s); "
        f"total {time.perf_counter() - start:.0f} s"
    )
    if args.record:
        record_rows(args, theirs, mine, ratio)


def record_rows(
    args: argparse.Namespace, theirs: dict[str, Any], mine: dict[str, Any], ratio: float
) -> None:
    import torch

    from bench.record import machine, record

    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    where = machine(f"{gpu}, GPU peak {mine['gpu_peak_gb']:.0f} GB")
    command = f".venv/bin/python bench/bench_gpu_big.py --root {args.root} --tokens {args.tokens}"
    command += " --record"
    shape = f"{args.shape} shape, bf16, T={args.tokens}, on {gpu}"
    record(
        "bench/bench_gpu_big.py",
        "Big models on one GPU: the pooled overview of every head vs one SDPA forward.",
        ".venv/bin/python bench/bench_gpu_big.py --root /tmp/bigckpt [--tokens 32768] [--record]",
        [
            {
                "figure": f"{shape}: pooled overview of all {mine['maps']} heads",
                "value": round(mine["seconds"], 2),
                "unit": "s",
                "baseline": "transformers bf16 SDPA forward without attentions, same GPU",
                "baseline_value": round(theirs["seconds"], 2),
                "ratio": round(ratio, 2),
                "goal": "<= 1.5x, <= 20 MB",
                "note": f"answer {mine['answer_mb']:.1f} MB (pool {args.pool})",
                "machine": where,
                "command": command,
            },
            {
                "figure": f"{shape}: one head's {args.zoom}x{args.zoom} cells at full resolution",
                "value": round(mine["head_seconds"], 2),
                "unit": "s",
                "goal": "<= 1 s after the overview",
                "machine": where,
                "command": command,
            },
        ],
    )


if __name__ == "__main__":
    main()
