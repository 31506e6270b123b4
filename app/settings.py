"""All tunables in one place, overridable by ATTENTION_VIZ_* environment variables."""

from functools import lru_cache

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

    max_tokens: int = Field(64, ge=1, description="tokens per sequence (queries or sources)")
    max_token_chars: int = Field(64, ge=1, description="characters per token")
    max_dim: int = Field(256, ge=1, description="embedding width and projection width")
    max_heads: int = Field(16, ge=1, description="attention heads")
    max_vocabulary_words: int = Field(256, ge=0, description="words a request may add")
    max_body_bytes: int = Field(2_000_000, ge=1024, description="request body size")
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
    torch_threads: int = Field(
        1,
        ge=1,
        description="PyTorch intra-op threads; 1 suits one worker per core and tiny tensors",
    )

    # --- real models (attention_core.models; README "Models") ---
    model_dir: str | None = Field(
        None,
        description="the default model's checkpoint directory (any supported family); "
        "default: the packaged MiniLM",
    )
    model_max_tokens: int = Field(
        512, ge=3, description="tokens per model input (each model's context caps it too)"
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
    runs_dir: str | None = Field(
        None, description="trained runs (checkpoint directories), rescanned on every listing"
    )
    hf_cache: bool = Field(
        True,
        description="list the local Hugging Face cache (HF_HUB_CACHE, else "
        "~/.cache/huggingface/hub), read-only",
    )
    loaded_models: int = Field(2, ge=1, description="models kept in memory at once (LRU)")
    max_new_tokens: int = Field(256, ge=1, description="tokens one generation request may ask for")


@lru_cache
def get_settings() -> Settings:
    return Settings()
