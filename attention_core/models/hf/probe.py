"""Whether a family's attention can be captured, decided when a model is listed.

A checkpoint is listed as supported only if its family passes a dry run: a
tiny random model of the same class, built from the checkpoint's own
``config.json`` shrunk with its structure kept (``shrink``: 2 layers, 4 to 16
heads, the per-head sizes, experts and layer kinds kept consistent), loaded as
the app loads it (our attention, or an adapter) and run once on two tokens;
every layer of every stack must be captured.  The verdict is kept per model
type, kind, transformers version and the config's non-size settings (ALiBi or
RoPE, shared layers...), so each family is tried once per process.

The verdict is final: a tiny model that cannot be built, whose forward pass
fails or whose attention is not all captured lists the model as unsupported
with that reason, so nothing is listed supported and then refused at load.
(A shrunk model, not the real config on the meta device: a meta forward pass
cannot run the masks, routers and data-dependent shapes the check must see.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import torch

from ...errors import SpecError
from .shrink import is_size, shrunk

_verdicts: dict[str, str | None] = {}
_lock = threading.Lock()


def _key(raw: Mapping[str, Any], kind: str) -> str:
    import transformers

    settings = {k: v for k, v in raw.items() if not is_size(k) and "token_id" not in k}
    return json.dumps([kind, transformers.__version__, settings], sort_keys=True, default=str)


def verdict(raw: Mapping[str, Any], kind: str) -> str | None:
    """Why a checkpoint of this config cannot be captured (None: it can); one dry run per
    family and settings."""
    key = _key(raw, kind)
    with _lock:
        if key in _verdicts:
            return _verdicts[key]
    found = dry_run(raw, kind)
    with _lock:
        _verdicts[key] = found
    return found


def check(raw: Mapping[str, Any], kind: str) -> None:
    """``SpecError`` with the dry run's reason when the family cannot be captured."""
    reason = verdict(raw, kind)
    if reason is not None:
        raise SpecError(reason, field="model")


def build_tiny(raw: Mapping[str, Any], kind: str) -> torch.nn.Module:
    """A tiny random model of the checkpoint's class, loaded as the app loads it."""
    from .adapters import install_adapters
    from .capture import register
    from .language_model import attention_implementation, auto_class, transformers_config

    register()
    config = transformers_config(shrunk(raw))
    auto = auto_class(str(raw["model_type"]), kind)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        model: torch.nn.Module = auto.from_config(
            config,
            attn_implementation=attention_implementation(str(raw["model_type"])),
            dtype=torch.float32,
        )
    finally:
        torch.random.set_rng_state(state)
    install_adapters(model)
    return model.eval().requires_grad_(False)


def dry_run(raw: Mapping[str, Any], kind: str) -> str | None:
    """The reason a tiny model of this family fails to build, to run or to be captured, or
    None: the verdict is final (the model is listed unsupported with that reason)."""
    from .language_model import TransformersLM
    from .seq2seq import ForwardFailed, check_stacks

    family = f"model_type {raw.get('model_type')!r}"
    try:
        model = build_tiny(raw, kind)
    except Exception as exc:  # noqa: BLE001 - an untrusted config: whatever fails is its reason
        return f"{family}: transformers cannot build a model of this config ({_said(exc)})"
    try:
        if kind == "encoder-decoder":
            start = getattr(model.config, "decoder_start_token_id", None)
            check_stacks(model, family, start if isinstance(start, int) else 0)
        else:
            TransformersLM(model, "encoder" if kind == "encoder" else "decoder", family)
    except ForwardFailed as exc:
        return exc.message
    except SpecError as exc:
        return exc.message
    except Exception as exc:  # noqa: BLE001 - the family's forward pass failed: its reason
        return f"{family}: a forward pass of {type(model).__name__} failed ({_said(exc)})"
    return None


def _said(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"
