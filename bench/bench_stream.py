"""The streamed maps request (progress per layer) vs the plain POST, and how soon a closed
stream frees the model thread.

    .venv/bin/python bench/bench_stream.py [--rounds 5] [--tokens 512]

GPT-2 small's shape with random weights (``bench/random_gpt2.py``, as bench_long.py
serves it), the app in a uvicorn thread of this process (``devtools.server.
serve_in_thread``) with one model thread and one torch thread, the client over
real sockets (httpx).  Each round asks for a text not seen before (no cached pass):

- ``post``: ``POST /api/model/attention`` (``layers: [1]``, compact uint8), timed to
  the last byte;
- ``stream``: the same body to ``…/attention/stream``, timed to the ``result``
  event (12 progress events on the way); rounds alternate which goes first;
- ``freed``: a stream closed as soon as its first progress event (layer 1 of 12)
  arrives, then at once ``GET /api/model`` (a sync route: it needs the one model
  thread, and no forward): the time from the close to that answer is how long the
  cancelled pass kept the thread; ``rest`` is what the pass would have taken to
  finish (11/12 of the POST's median).

Reported: medians, the ratio stream / post, freed vs rest, the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_long import text_of, tokenizer_json  # noqa: E402
from bench.random_gpt2 import DEFAULT_DIR, gpt2_small  # noqa: E402

NAME = "gpt2-small-stream"


def served(directory: Path) -> Path:
    """The shared random GPT-2 small, hard-linked (the app reads no file a symbolic link
    leads outside its directory to), with bench_long.py's tokenizer.json."""
    shared = gpt2_small()
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        if not (directory / name).exists():
            os.link(shared / name, directory / name)
    tokenizer_json(directory)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=512)
    args = parser.parse_args()

    import httpx

    from app import compute
    from app.main import create_app
    from app.settings import Settings
    from devtools.server import serve_in_thread

    root = DEFAULT_DIR.parent / "stream"
    directory = served(root / NAME)
    base = text_of(args.tokens - 8, directory)  # each round adds a few tokens before it
    compute.MODEL_THREADS = 1
    app = create_app(
        Settings(models=str(root), hf_cache=False, torch_threads=1, model_max_tokens=1024)
    )
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {"post": [], "stream": [], "freed": []}
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=600) as client:

        def body(text: str) -> dict[str, object]:
            return {"model": NAME, "text": text, "layers": [1], "format": "compact"}

        def post(text: str) -> float:
            started = time.perf_counter()
            response = client.post("/api/model/attention", json=body(text))
            assert response.status_code == 200, response.text
            return time.perf_counter() - started

        def stream(text: str) -> float:
            started = time.perf_counter()
            with client.stream("POST", "/api/model/attention/stream", json=body(text)) as r:
                last = [line for line in r.iter_lines() if line.startswith("event: ")][-1]
            assert last == "event: result", last
            return time.perf_counter() - started

        def freed(text: str) -> float:
            with httpx.Client(base_url=url, timeout=600) as other:
                with other.stream("POST", "/api/model/attention/stream", json=body(text)) as r:
                    lines = r.iter_lines()
                    while next(lines) != "event: progress":
                        pass
                    closed = time.perf_counter()
            info = client.get("/api/model", params={"model": NAME})  # waits for the thread
            assert info.status_code == 200, info.text
            return time.perf_counter() - closed

        post(f"warm-up {base}")
        for n in range(args.rounds):
            sides = [("post", post), ("stream", stream)]
            for name, run in sides if n % 2 == 0 else sides[::-1]:
                times[name].append(run(f"{name} {n} {base}"))
            times["freed"].append(freed(f"freed {n} {base}"))
    load_after = os.getloadavg()
    med = {k: statistics.median(v) for k, v in times.items()}
    rest = med["post"] * 11 / 12
    print(f"T = {args.tokens} tokens, GPT-2 small shape (12 x 12), {args.rounds} rounds")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    for k, v in times.items():
        print(f"{k:7s} median {med[k] * 1000:8.1f} ms  ({', '.join(f'{x * 1000:.0f}' for x in v)})")
    print(f"stream / post = {med['stream'] / med['post']:.3f}")
    print(
        f"freed {med['freed'] * 1000:.0f} ms after the close; "
        f"the rest of the pass: ~{rest * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
