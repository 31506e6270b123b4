"""Session fixtures: the packaged MiniLM, loaded once by us and once by Hugging Face.

``transformers`` is a test-only dependency, used as the oracle; it loads the
same local directory with the hub switched off.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch

from attention_core.encoder import Encoder, default_model_dir

# The app runs torch with one intra-op thread (see app.routes.model.load_encoder);
# on a shared 2-core machine this is also many times faster for short inputs.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def encoder() -> Encoder:
    return Encoder.from_dir()


@pytest.fixture(scope="session")
def hf_model() -> torch.nn.Module:
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = pytest.importorskip("transformers")
    model = transformers.BertModel.from_pretrained(
        str(default_model_dir()), attn_implementation="eager"
    )
    return model.eval()


HFRun = Callable[[tuple[int, ...], tuple[int, ...]], tuple[torch.Tensor, torch.Tensor]]


@pytest.fixture(scope="session")
def hf_run(hf_model: torch.nn.Module) -> HFRun:
    """(input_ids, token_type_ids) -> HF attentions (L, H, T, T), hidden states (L+1, T, C)."""

    def run(ids: tuple[int, ...], types: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.inference_mode():
            out = hf_model(
                input_ids=torch.tensor([ids]),
                token_type_ids=torch.tensor([types]),
                output_attentions=True,
                output_hidden_states=True,
            )
        attentions = torch.stack([a[0] for a in out.attentions])
        hidden = torch.stack([h[0] for h in out.hidden_states])
        return attentions, hidden

    return run
