"""Issue 32 item 9: a cancelled generation leaves no tensors for the cyclic garbage
collector: its memory is freed when it stops, not when some later allocation happens to
run the GC.  uvicorn in a thread of this process; the streams are closed mid-generation."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import httpx
import pytest
import torch

from devtools.server import serve_in_thread
from tests.models.checkpoints import make_gpt2
from tests.requires import require

NAME = "cancel-gpt2"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require("transformers")
    from app.main import create_app
    from app.settings import Settings

    root = tmp_path_factory.mktemp("cancel-models")
    make_gpt2(root / NAME, n_positions=512, n_layer=2)
    with serve_in_thread(create_app(Settings(models=str(root), hf_cache=False))) as base:
        assert httpx.get(f"{base}/api/model", params={"model": NAME}, timeout=60).is_success
        yield base


def cancel_a_generation(url: str, n: int) -> None:
    """Stream a generation and close it once 5 tokens are written."""
    body = {"model": NAME, "prompt": f"the bank {n}", "max_new_tokens": 200}
    with httpx.Client(base_url=url, timeout=60) as client:
        with client.stream("POST", "/api/model/generate/stream", json=body) as response:
            for line in response.iter_lines():
                if '"stage":"generate","done":5' in line:
                    break


def test_cancelled_generations_leave_no_tensors_in_cycles(url: str) -> None:
    cancel_a_generation(url, 0)  # warm: the first pass builds what stays
    gc.collect()
    gc.disable()
    try:
        for n in range(1, 4):
            cancel_a_generation(url, n)
        # The server has stopped every pass: a request after them is served at once.
        done = httpx.post(
            f"{url}/api/model/generate",
            json={"model": NAME, "prompt": "after", "max_new_tokens": 2},
        )
        assert done.status_code == 200
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        cyclic = [o for o in gc.garbage if isinstance(o, torch.Tensor)]
        assert cyclic == [], f"{len(cyclic)} tensors freed only by the cyclic GC"
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
