"""All tunables in one place, overridable by ATTENTION_VIZ_* environment variables."""

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Limits keep every request small enough to answer in milliseconds.

    Each can be raised or lowered with an environment variable named
    ``ATTENTION_VIZ_`` + the field name in capitals, e.g.
    ``ATTENTION_VIZ_MAX_TOKENS=128``.
    """

    model_config = SettingsConfigDict(env_prefix="ATTENTION_VIZ_", frozen=True)

    host: str = "127.0.0.1"
    port: int = 8000
    allowed_hosts: str = Field(
        "",
        description="Host header names this server answers besides localhost, *.localhost "
        "and IP addresses, comma-separated ('*': any) (app/request_guard.py)",
    )
    allowed_origins: str = Field(
        "",
        description="origins (scheme://host[:port]) besides the server's own whose pages may "
        "POST to it, comma-separated",
    )

    max_tokens: int = Field(64, ge=1, description="tokens per sequence (queries or sources)")
    max_token_chars: int = Field(64, ge=1, description="characters per token")
    max_dim: int = Field(256, ge=1, description="embedding width and projection width")
    max_heads: int = Field(16, ge=1, description="attention heads")
    max_vocabulary_words: int = Field(256, ge=0, description="words a request may add")
    max_body_bytes: int = Field(2_000_000, ge=1024, description="request body size")
    write_timeout_seconds: float = Field(
        30,
        ge=0,
        description="seconds a client may read nothing of an answer (sent in 1 MiB pieces): "
        "past it the answer is dropped and the connection closed (0: no limit)",
    )
    max_lesson_dims: int = Field(32, ge=1, description="dimensions in one scaling lesson")
    max_lesson_dim: int = Field(4096, ge=1, description="largest dimension in the lesson")
    max_lesson_trials: int = Field(20_000, ge=2, description="samples per dimension")
    max_lesson_samples: int = Field(
        4_000_000, ge=2, description="sum(dims) × trials: the lesson's total work"
    )

    response_cache_entries: int = Field(
        1024, ge=0, description="toy answers kept in memory per process (0: no cache)"
    )
    response_cache_bytes: int = Field(
        64_000_000, ge=0, description="memory the answer cache may hold per process"
    )
    malloc_arena_max: int = Field(
        2, ge=0, description="glibc malloc arenas at most (0: glibc's default, 8 per core)"
    )
    malloc_trim_seconds: float = Field(
        10, ge=0, description="how often free heap memory is handed back to the system (0: never)"
    )
    torch_threads: int = Field(
        1,
        ge=1,
        description="PyTorch intra-op threads; 1 suits one worker per core and tiny tensors",
    )

    # --- real models (attention_core.models; docs/models.md) ---
    model_dir: str | None = Field(
        None,
        description="the default model's checkpoint directory (any supported family); "
        "default: the packaged MiniLM",
    )
    model_max_tokens: int | None = Field(
        None,
        ge=3,
        description="tokens per model input (each model's context caps it too); default: "
        "per model, what the device's memory allows the long path to keep beside its "
        "weights (every layer's q and k, float32: layers × (heads + kv_heads) × head_dim "
        "× 4 bytes a token, half the memory left), up to its context",
    )
    model_full_maps_bytes: int = Field(
        192 * 2**20,
        ge=0,
        description="every attention map of one input (layers × heads × T² × 4 bytes) at "
        "most: past it a POST /api/model/attention answer is maps_path 'long' (its cells "
        "bounded, rollout up to model_long_rollout_tokens; maps are gathered block by "
        "block at every length, and every analysis reads them so)",
    )
    model_device_pooling: bool = Field(
        True,
        description="on a GPU, a long-path overview (the weights, a whole map pooled, "
        "nothing hidden) is gathered by a Triton kernel from flash attention's "
        "log-sum-exp, its scores from 16-bit q and k (docs/long-inputs.md); false: every "
        "step float32 through attention_with_steps, as on the CPU",
    )
    model_max_answer_cells: int = Field(
        32 * 2**20,
        ge=1,
        description="map cells one long-path answer carries: layers × (heads + head "
        "average) × rows × cols after pooling (ask with pool or a rows/cols region)",
    )
    model_long_rollout_tokens: int = Field(
        1024,
        ge=0,
        description="the long path computes rollout up to this many tokens (each layer's "
        "full head average kept, T² floats, and L products of T × T: at 1,024 tokens ~2 "
        "GFLOP a layer); beyond it rollout is null",
    )
    model_long_cache_bytes: int = Field(
        768 * 2**20,
        ge=0,
        description="per loaded model, the kept q and k of recent long inputs (4,096 "
        "tokens: GPT-2 small ~300 MB, Llama-3.2-1B ~710 MB), so a zoom into one head does "
        "not rerun the model",
    )
    device: Literal["cpu", "cuda"] = Field(
        "cpu",
        description="where models run: 'cpu', or 'cuda' (refused at start-up when torch "
        "sees no CUDA GPU); answers are the same either way",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="the weights' dtype in memory: 'auto' keeps each checkpoint's stored "
        "dtype (a bfloat16 checkpoint takes its stored bytes), 'float32' upcasts every "
        "weight at load, 'bfloat16'/'float16' cast at load; the attention steps (scores, "
        "softmax, weights, context) are float32 whatever it is, and on the CPU every layer "
        "runs in float32 (its 16-bit weights cast for its own forward only)",
    )
    offload: bool = Field(
        True,
        description="a model whose weights exceed max_model_bytes opens with accelerate's "
        "device_map (as many layers in memory as the limit allows, the rest read from "
        "disk every forward pass; needs transformers and accelerate); false: it is listed "
        "as unsupported",
    )
    offload_dir: str | None = Field(
        None,
        description="where accelerate keeps the disk-offloaded layers; default: "
        "attention-viz-offload in the system's temporary directory",
    )
    models: str = Field(
        "",
        description="checkpoint directories, separated by os.pathsep (':' on Linux); "
        "each may be one checkpoint or hold several",
    )
    serve_models: str = Field(
        "",
        description="set by `attention-viz serve --model PATH` (os.pathsep-separated); "
        "listed before ATTENTION_VIZ_MODELS",
    )
    hf_cache: bool = Field(
        True,
        description="list the local Hugging Face cache (HF_HUB_CACHE, else "
        "~/.cache/huggingface/hub), read-only",
    )
    loaded_models: int = Field(2, ge=1, description="models kept in memory at once (LRU)")
    max_model_bytes: int | None = Field(
        None,
        ge=1,
        description="memory one model's weights may take once loaded (as held: see dtype; "
        "a bfloat16 checkpoint counts its stored bytes), checked from config.json and the "
        "safetensors headers before loading; a larger model opens spread over memory and "
        "disk (see offload), or is listed as unsupported; default: half the machine's "
        "memory (or its cgroup limit)",
    )
    max_new_tokens: int = Field(256, ge=1, description="tokens one generation request may ask for")
    model_deadline_seconds: float = Field(
        300,
        ge=0,
        description="seconds one model request may take from its arrival (waiting for a "
        "model thread included): past it the work stops within a layer and the answer is "
        "503 deadline_exceeded (0: no deadline)",
    )
    model_queue: int = Field(
        16,
        ge=0,
        description="model requests waiting for a model thread at most: past it a new one "
        "is refused with 429 and Retry-After",
    )
    max_ablation_cells: int = Field(
        4_194_304,
        ge=1,
        description="layers × heads × T² of one each_head ablation (POST /api/model/ablate) "
        "or one exact attribution (POST /api/model/attribute; atp_star: heads × this): "
        "every head ablated on its own is that many attention cells per layer, batched",
    )

    # Training (POST /api/train, the /train page); see docs/training.md.
    runs_dir: str | None = Field(
        None,
        description="where finished training runs are saved (shared by replicas), and listed "
        "as models (rescanned on every listing); default: $XDG_DATA_HOME/attention-viz/runs, "
        "else ~/.local/share/attention-viz/runs",
    )
    runs_keep: int = Field(20, ge=1, description="newest training runs kept in runs_dir")
    train_concurrent: int = Field(
        0, ge=0, description="training runs at once per server process; 0: one per CPU"
    )
    train_threads: int = Field(1, ge=1, description="PyTorch threads of one training process")
    train_nice: int = Field(
        10, ge=0, le=19, description="how much lower a training process's CPU priority is"
    )
    train_max_seconds: float = Field(900, gt=0, description="wall-clock limit of one run")
    train_max_steps: int = Field(5000, ge=1, description="max_steps of one run")
    train_max_parameters: int = Field(2_000_000, ge=1, description="parameters of one model")
    train_max_text_bytes: int = Field(
        1_000_000, ge=1, description="UTF-8 bytes of an uploaded or pasted training text"
    )
    train_max_vocabulary: int = Field(1024, ge=2, description="distinct characters of a text")
    train_max_layers: int = Field(8, ge=1, description="n_layer")
    train_max_embd: int = Field(512, ge=1, description="n_embd")
    train_max_block_size: int = Field(256, ge=2, description="block_size (context length)")
    train_max_batch_size: int = Field(128, ge=1, description="batch_size")
    train_max_attention_cells: int = Field(
        8_388_608,
        ge=1,
        description="batch_size × n_head × block_size² × n_layer: the attention maps one "
        "step keeps for backward: ~45 bytes each (8M: ~0.4 GB)",
    )

    def runs_path(self) -> Path:
        """``runs_dir``, or the per-user default (XDG data directory)."""
        if self.runs_dir:
            return Path(self.runs_dir).expanduser()
        data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(data_home) / "attention-viz" / "runs"


@lru_cache
def get_settings() -> Settings:
    return Settings()
