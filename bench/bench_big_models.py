"""Big models on the CPU: bf16 checkpoints of Llama-3.2-3B's and Llama-3.1-8B's shapes.

    .venv/bin/python bench/bench_big_models.py --shape llama-3.2-3b,llama-3.1-8b \
        --root /work/bigckpt --record

(the 3B shape at T = 128 and through the long path at T = 1,024, the 8B shape at
T = 128: about 15 minutes on a quiet machine, 24 GB of memory, one process at a time)

Random bfloat16 weights written tensor by tensor (``bench/big_checkpoint.py``,
6.4 GB and 16 GB, under ``--root``: never in the repository).  Each side runs in
a fresh child process, one after the other (1 torch thread, as the app's default
``ATTENTION_VIZ_TORCH_THREADS``), after loading and a 16-token warm-up that pages
every weight in:

- ``ours``: ``POST /api/model/attention`` through the app (TestClient: routing,
  the pass, pooling, compact uint8 serialization) with ``pool`` 128, the weights
  held in bfloat16 and each layer run in float32 (``attention_core.models.weight_dtype``);
  ``ATTENTION_VIZ_MAX_MODEL_BYTES`` is raised to 20 GB so the 8B model is held
  whole (memory-mapped) rather than spread over memory and disk.
- ``eager``: transformers' ``LlamaForCausalLM`` in bfloat16 (as transformers loads
  the checkpoint), ``attn_implementation="eager"``, ``output_attentions=True``,
  ``logits_to_keep=1``.
- at T = 1,024 (``--long``): ``ours`` takes the long path (the maps, 2.8 GB for the
  3B shape, are over ``ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES``) vs ``sdpa``:
  transformers bfloat16, ``attn_implementation="sdpa"``, one forward without
  attentions.

Reported per side: seconds of the timed call (wall clock, and the process's CPU
seconds: with 1 torch thread the CPU-time ratio is what a loaded machine distorts
least), the process's peak resident set
(VmHWM, whole life: loading included) against the stored bytes, and the ratio
ours / transformers.  ``--record`` writes bench/results/bench_big_models.json.
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

MAX_MODEL_BYTES = 20 * 10**9
POOL = 128
WARM_TOKENS = 16


def peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def profiled(call: Any, profile: int) -> Any:
    """``call()`` under torch.profiler, its ``profile`` costliest ops (self CPU time) printed
    to stderr; just ``call()`` when ``profile`` is 0."""
    if not profile:
        return call()
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    with profiler(activities=[ProfilerActivity.CPU]) as prof:
        result = call()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=profile)
    print(table, file=sys.stderr)
    return result


def ours(directory: Path, tokens: int, profile: int = 0) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    settings = Settings(
        models=str(directory.parent),
        hf_cache=False,
        model_max_tokens=max(tokens, WARM_TOKENS),
        max_model_bytes=MAX_MODEL_BYTES,
        model_deadline_seconds=0,  # a 1,024-token pass on a loaded 2-core machine takes minutes
    )
    body = {"model": directory.name, "pool": POOL, "format": "compact"}
    with TestClient(create_app(settings)) as client:
        listed = {m["name"]: m for m in client.get("/api/models").json()["models"]}
        entry = listed[directory.name]
        assert entry["supported"], entry["reason"]
        warm = client.post("/api/model/attention", json={**body, "text": text_of(WARM_TOKENS)})
        assert warm.status_code == 200, warm.text
        start, cpu = time.perf_counter(), time.process_time()
        response = client.post("/api/model/attention", json={**body, "text": text_of(tokens)})
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert response.status_code == 200, response.text
        answer = response.json()
        assert len(answer["tokens"]) == tokens
        if profile:  # the same answer again, in this thread (the profiler's): no HTTP
            from app.attention_answer import attention_answer
            from app.schemas.model import ModelAttentionRequest

            other = "w1 " + text_of(tokens).split(" ", 1)[1]  # not the cached pass's text
            request = ModelAttentionRequest(**body, text=other)
            profiled(lambda: attention_answer(request, client.app.state.models, settings), profile)
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_gb": peak_kb() * 1024 / 1e9,
        "answer_mb": len(response.content) / 1e6,
        "path": answer.get("maps_path"),
        "dtype": entry["dtype"],
        "held_gb": entry["held_bytes"] / 1e9,
    }


def transformers_side(
    directory: Path, tokens: int, attention: str, profile: int = 0
) -> dict[str, Any]:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation=attention, dtype=torch.bfloat16, local_files_only=True
    ).eval()
    ids = torch.tensor([[1 + (i * 7919) % 1000 for i in range(tokens)]])
    wanted = attention == "eager"
    with torch.inference_mode():
        model(ids[:, :WARM_TOKENS], output_attentions=wanted, logits_to_keep=1)
        start, cpu = time.perf_counter(), time.process_time()
        out = profiled(lambda: model(ids, output_attentions=wanted, logits_to_keep=1), profile)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if wanted:
        assert out.attentions[0].shape[-1] == tokens
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_gb": peak_kb() * 1024 / 1e9}


def whole_last_layer() -> None:
    """The pass as it was before ``maps_only``: the last layer's MLP and the final norm run
    (``--whole``'s comparison; the head is skipped either way)."""
    from attention_core.models.base import decoder_lm, stack

    def whole(*args: Any, **kwargs: Any) -> Any:
        return stack.run_blocks(*args, **{**kwargs, "maps_only": False})

    decoder_lm.run_blocks = whole  # type: ignore[assignment]


def mapped_weights() -> None:
    """Weights left memory-mapped, their pages touched (``read_in(private=False)``), as
    before each weight was copied privately as it is read in (``--mapped``'s comparison)."""
    import functools

    from attention_core.models.checkpoints.weight_dtype import read_in
    from attention_core.models.text import text_model_base

    text_model_base.read_in = functools.partial(read_in, private=False)  # type: ignore[assignment]


def child(side: str, directory: Path, tokens: int, profile: int = 0) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    if side == "ours-whole":
        whole_last_layer()
    if side == "ours-mapped":
        mapped_weights()
    if side.startswith("ours"):
        return ours(directory, tokens, profile)
    return transformers_side(directory, tokens, side, profile)


def run_child(side: str, directory: Path, tokens: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", side, "--dir", str(directory)]
    cmd += ["--tokens", str(tokens)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{side} at T={tokens} failed:\n{done.stderr[-3000:]}")
    out = done.stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    print(side, tokens, result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--shape", default="llama-3.2-3b", help="one shape or several, comma-separated"
    )
    parser.add_argument("--root", type=Path, default=Path("/work/bigckpt"))
    parser.add_argument("--tokens", type=int, default=128, help="0: no T=128 figure")
    parser.add_argument("--long", type=int, default=1024, help="0: no long-path figure")
    parser.add_argument(
        "--long-shapes", default="llama-3.2-3b", help="the shapes that get the long figure"
    )
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", choices=["ours", "ours-whole", "ours-mapped", "eager", "sdpa"])
    parser.add_argument(
        "--mapped",
        action="store_true",
        help="also the T=128 figure with the weights left memory-mapped (no private copy)",
    )
    parser.add_argument(
        "--whole",
        action="store_true",
        help="also the T=128 figure without maps_only (the last MLP and final norm run)",
    )
    parser.add_argument("--dir", type=Path)
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        help="with --child: the timed call again under torch.profiler (ours: the answer "
        "without HTTP, in the profiler's thread), its N costliest ops to stderr",
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.dir, args.tokens, args.profile)), flush=True)
        # Out at once: tearing a big model down is seconds of freeing, and the interpreter's
        # shutdown beside the app's threads sometimes aborted in torch's C++ teardown.
        sys.stderr.flush()
        os._exit(0)
    load = os.getloadavg()[0]
    rows = []
    for shape in args.shape.split(","):
        start = time.perf_counter()
        directory = make(shape, args.root)
        stored = stored_bytes(directory) / 1e9
        print(f"{directory}: {stored:.2f} GB stored, ready in {time.perf_counter() - start:.0f} s")
        if args.tokens:
            a = run_child("ours", directory, args.tokens)
            b = run_child("eager", directory, args.tokens)
            rows.append(figure(args, shape, stored, "maps", args.tokens, a, b, "eager"))
            if args.whole:
                w = run_child("ours-whole", directory, args.tokens)
                rows.append(figure(args, shape, stored, "whole", args.tokens, w, b, "eager"))
            if args.mapped:
                m = run_child("ours-mapped", directory, args.tokens)
                rows.append(figure(args, shape, stored, "mapped", args.tokens, m, b, "eager"))
        if args.long and shape in args.long_shapes.split(","):
            c, d = run_child("ours", directory, args.long), run_child("sdpa", directory, args.long)
            rows.append(figure(args, shape, stored, "long", args.long, c, d, "sdpa"))
    note = f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
    for row in rows:
        print(json.dumps(row))
    if args.record:
        from bench.record import machine, record

        for row in rows:
            row["machine"] = machine(note)
        record(
            "bench/bench_big_models.py",
            "Big bf16 checkpoints on the CPU: the app's maps vs transformers' own bf16 forward.",
            ".venv/bin/python bench/bench_big_models.py --shape llama-3.2-3b,llama-3.1-8b "
            "--root /work/bigckpt [--tokens 128] [--long 1024] [--long-shapes llama-3.2-3b] "
            "[--record]",
            rows,
        )


def figure(
    args: argparse.Namespace,
    shape: str,
    stored: float,
    kind: str,
    tokens: int,
    ours_: dict[str, Any],
    theirs: dict[str, Any],
    baseline: str,
) -> dict[str, Any]:
    ratio = ours_["seconds"] / theirs["seconds"]
    cpu_ratio = ours_["cpu_seconds"] / theirs["cpu_seconds"]
    what = {
        "maps": "pooled maps of every head",
        "whole": "pooled maps of every head, the last MLP and final norm run (no maps_only)",
        "mapped": "pooled maps of every head, the weights left memory-mapped",
        "long": "the long path's pooled overview",
    }[kind]
    their = (
        "transformers bf16 eager output_attentions=True"
        if baseline == "eager"
        else "transformers bf16 SDPA forward without attentions"
    )
    command = f".venv/bin/python bench/bench_big_models.py --shape {args.shape} --root {args.root}"
    command += f" --tokens {args.tokens} --long {args.long} --long-shapes {args.long_shapes}"
    command += " --whole" if args.whole else ""
    command += " --mapped" if args.mapped else ""
    command += " --record" if args.record else ""
    return {
        "figure": f"{shape} shape, bf16 ({stored:.1f} GB stored), {what}, T={tokens}",
        "value": round(ours_["seconds"], 1),
        "unit": "s",
        "baseline": f"{their}, same checkpoint, 1 thread",
        "baseline_value": round(theirs["seconds"], 1),
        "ratio": round(ratio, 2),
        "goal": "<= 0.6x" if kind == "long" else "<= 0.5x, peak <= stored + 3 GB",
        "note": (
            f"CPU seconds {ours_['cpu_seconds']:.1f} vs {theirs['cpu_seconds']:.1f} "
            f"({cpu_ratio:.2f}x: the ratio a loaded machine distorts least); "
            f"peak resident {ours_['peak_gb']:.1f} GB (transformers {theirs['peak_gb']:.1f} GB), "
            f"held {ours_['dtype']} {ours_['held_gb']:.1f} GB, answer {ours_['answer_mb']:.1f} MB, "
            f"{ours_['path'] or 'full'} path"
        ),
        "command": command,
    }


if __name__ == "__main__":
    main()
