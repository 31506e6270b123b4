"""Session fixtures: the packaged MiniLM, loaded once by us and once by Hugging Face;
small random decoder checkpoints made once (``checkpoints``).

``transformers`` is a test-only dependency, used as the oracle; it loads the
same local directories with the hub switched off.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from attention_core.models.families.bert import Encoder, default_model_dir
from tests.models.checkpoints import make_gpt2, make_llama
from tests.requires import require

# The app runs torch with one intra-op thread (ATTENTION_VIZ_TORCH_THREADS);
# on a shared 2-core machine this is also many times faster for short inputs.
torch.set_num_threads(1)

# name -> (family, builder, keyword arguments).  The directory name is the model's name.
CHECKPOINTS: dict[str, tuple[str, Callable[..., Path], dict[str, object]]] = {
    "tiny-gpt2": ("gpt2", make_gpt2, {}),
    "tiny-gpt2-untied": ("gpt2", make_gpt2, {"tie_word_embeddings": False, "seed": 1}),
    "tiny-gpt2-bf16": ("gpt2", make_gpt2, {"dtype": torch.bfloat16, "seed": 2}),
    # Llama family: GQA 4 query heads on 2 kv heads unless said otherwise.
    "tiny-llama": ("llama", make_llama, {}),
    "tiny-llama-bf16-tied": (
        "llama",
        make_llama,
        {"dtype": torch.bfloat16, "tie_word_embeddings": True, "seed": 3},
    ),
    "tiny-llama3-rope": (
        "llama",
        make_llama,
        {
            "seed": 5,
            "max_position_embeddings": 32,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 4.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        },
    ),
    "tiny-qwen2": ("llama", make_llama, {"model_type": "qwen2", "seed": 6}),
}
DECODERS = sorted(CHECKPOINTS)


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding every checkpoint of ``CHECKPOINTS``, each in its own directory.

    Made once per session (transformers' random init + ``save_pretrained``, a
    tokenizer trained on a few lines); point ``ATTENTION_VIZ_MODELS`` at it.
    """
    require("transformers")
    root = tmp_path_factory.mktemp("checkpoints")
    for name, (_, build, options) in CHECKPOINTS.items():
        build(root / name, **options)
    return root


@pytest.fixture(scope="session")
def hf_decoder(checkpoints: Path) -> Callable[[str], torch.nn.Module]:
    """name -> transformers' own model for that checkpoint (eager attention, float32)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers

    loaded: dict[str, torch.nn.Module] = {}

    def get(name: str) -> torch.nn.Module:
        if name not in loaded:
            loaded[name] = transformers.AutoModelForCausalLM.from_pretrained(
                checkpoints / name, attn_implementation="eager", dtype=torch.float32
            ).eval()
        return loaded[name]

    return get


@pytest.fixture(scope="session")
def encoder() -> Encoder:
    return Encoder.from_dir()


@pytest.fixture(scope="session")
def hf_model() -> torch.nn.Module:
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = require("transformers")
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


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """name (of ``hf_checkpoints.HF_SPECS``) -> its directory, each made on first use."""
    from tests.models.hf_checkpoints import make_hf
    from tests.requires import require

    require("transformers")
    root = tmp_path_factory.mktemp("hf-checkpoints")

    def get(name: str) -> Path:
        directory = root / name
        if not (directory / "config.json").is_file():
            make_hf(directory, name)
        return directory

    return get
