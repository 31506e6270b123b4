"""Weights held as stored (bfloat16, float16, float32), every layer computed in float32.

A 16-bit checkpoint stays 16-bit in memory: its bytes are the stored bytes
(memory-mapped, nothing copied).  What users see, the attention steps
(scores, softmax, weights, context), is always float32.  On the CPU, which
has no fast 16-bit arithmetic here, the whole forward pass runs in float32:
every 16-bit parameter of every module but the embeddings is read through a
parametrization that casts it to float32 when the module runs (a layer's
float32 copy lives for that layer's forward only, so memory stays about the
stored bytes and speed about float32's), and each embedding's output (a row
lookup, exact) is cast to float32.  A plain ``nn.Linear`` (nearly all the
bytes) runs without that whole copy: its forward reads the held weight a
block of rows at a time (``float32_linear``).  A float32 checkpoint is untouched.

``ATTENTION_VIZ_DTYPE`` picks the held dtype: ``auto`` (as stored, the
default), ``float32`` (every weight upcast once at load: the old behaviour),
``bfloat16`` or ``float16`` (cast once at load).
"""

from __future__ import annotations

import dataclasses
import re
import types
import weakref
from collections.abc import Iterable
from typing import Any, TypeVar, cast

import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.utils.hooks import RemovableHandle

from ...progress import report
from .float32_linear import float32_linear
from .safetensors_io import SafetensorsHeader, private_copy

DTYPE_SETTING = "ATTENTION_VIZ_DTYPE"
AUTO = "auto"
DTYPES: dict[str, torch.dtype | None] = {
    AUTO: None,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
SIXTEEN_BIT = (torch.float16, torch.bfloat16)
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items() if dtype is not None}
# The first number in a tensor's name is its layer (model.layers.3.mlp..., h.3.attn...).
LAYER_NUMBER = re.compile(r"\.(\d+)\.")
PAGE_BYTES = 4096


def check_dtype(name: str) -> torch.dtype | None:
    """The held dtype called ``name`` (None: as stored); a ``ValueError`` naming the choices."""
    if name not in DTYPES:
        raise ValueError(f"{DTYPE_SETTING} is {name!r}; use one of {', '.join(DTYPES)}")
    return DTYPES[name]


def size_text(count: int) -> str:
    """Bytes for people: ``16,060.5 MB``, ``94 kB``."""
    return f"{count / 1e6:,.1f} MB" if count >= 10**6 else f"{count / 1e3:,.0f} kB"


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def stored_dtype(headers: Iterable[SafetensorsHeader]) -> torch.dtype:
    """The floating-point dtype holding most of the weights' bytes (float32 when none)."""
    counts: dict[torch.dtype, int] = {}
    for header in headers:
        for entry in header.entries.values():
            if entry.dtype.is_floating_point:
                counts[entry.dtype] = counts.get(entry.dtype, 0) + entry.end - entry.begin
    return max(counts, key=lambda d: counts[d]) if counts else torch.float32


def held_bytes(headers: Iterable[SafetensorsHeader], dtype: torch.dtype | None = None) -> int:
    """Memory the weights take once loaded: as stored, or floating tensors as ``dtype``."""
    total = 0
    for header in headers:
        for entry in header.entries.values():
            size = entry.end - entry.begin
            if dtype is not None and entry.dtype.is_floating_point:
                size = size // entry.dtype.itemsize * dtype.itemsize
            total += size
    return total


class _Float32(nn.Module):
    """A parametrization: the held tensor, read as float32."""

    def forward(self, held: torch.Tensor) -> torch.Tensor:
        return held.float()


# Each embedding's hook that casts its output to float32 (a module is hooked once).
_EMBEDDING_HOOKS: weakref.WeakKeyDictionary[nn.Module, RemovableHandle] = (
    weakref.WeakKeyDictionary()
)


def _float32_output(_module: nn.Module, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
    return output.float()


def cast_embedding_output(module: nn.Embedding) -> None:
    """A 16-bit embedding's rows, looked up as stored, come out as float32 (once hooked)."""
    if module.weight.dtype != torch.float32 and module not in _EMBEDDING_HOOKS:
        _EMBEDDING_HOOKS[module] = module.register_forward_hook(_float32_output)


def _held_linear_forward(module: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """A parametrized ``nn.Linear``'s forward: its held weight read block by block
    (``float32_linear``), never as one whole float32 copy."""
    held = cast(torch.Tensor, cast(nn.ModuleDict, module.parametrizations)["weight"].original)
    return float32_linear(x, held, module.bias)


def _is_held_linear_forward(module: nn.Module) -> bool:
    forward = module.__dict__.get("forward")
    return getattr(forward, "__func__", None) is _held_linear_forward


def is_16bit(model: nn.Module) -> bool:
    return any(p.dtype in SIXTEEN_BIT for p in model.parameters())


def hold(model: nn.Module, dtype: torch.dtype | None) -> None:
    """Cast ``model``'s floating parameters to ``dtype`` (None: keep them as loaded)."""
    if dtype is not None:
        for param in model.parameters():
            if param.dtype.is_floating_point and param.dtype != dtype:
                param.data = param.data.to(dtype)


def compute_in_float32(model: nn.Module) -> None:
    """Run ``model`` in float32 whatever its held dtype (the module doc): 16-bit parameters
    of non-embedding modules read as float32 when used, embeddings' outputs cast.

    Idempotent; a float32 model is left as it is.
    """
    for module in list(model.modules()):
        if isinstance(module, parametrize.ParametrizationList):
            continue  # an earlier call's: its held tensor is read through it, never again
        if isinstance(module, nn.Embedding):
            if _computes_its_table(module):
                continue
            cast_embedding_output(module)
            continue
        plain_linear = isinstance(module, nn.Linear) and type(module).forward is nn.Linear.forward
        for name, param in list(module.named_parameters(recurse=False)):
            if param.dtype in SIXTEEN_BIT:
                parametrize.register_parametrization(module, name, _Float32(), unsafe=True)
                if name == "weight" and plain_linear:
                    module.forward = types.MethodType(_held_linear_forward, module)


def _computes_its_table(module: nn.Embedding) -> bool:
    """A 16-bit sinusoidal position table that the model computes at load (transformers'
    ``create_weight``, never stored: Marian's) is computed again in float32, as the
    float32 model has it (a few MB); True when ``module`` is one."""
    create = getattr(module, "create_weight", None)
    if not callable(create) or module.weight.dtype not in SIXTEEN_BIT:
        return False
    with torch.no_grad():
        module.weight.data = module.weight.data.float()
        module.weight.data = create().float()
    return True


def held_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s state as held (16-bit where stored so), under its checkpoint names."""
    marker = ".parametrizations."
    state = {}
    for key, tensor in model.state_dict().items():
        if marker in key:
            head, tail = key.split(marker, 1)
            key = f"{head}.{tail.removesuffix('.original')}"
        state[key] = tensor
    return state


def run_on(model: nn.Module, device: torch.device) -> None:
    """How 16-bit weights run on ``device``: in float32 on the CPU (``compute_in_float32``),
    in their own dtype elsewhere (a GPU's fast 16-bit arithmetic; the attention steps are
    float32 all the same, see ``DecoderSelfAttention.attend``)."""
    if device.type == "cpu":
        compute_in_float32(model)
        return
    for module in list(model.modules()):
        if _is_held_linear_forward(module):
            del module.forward
        if parametrize.is_parametrized(module):
            for name in list(cast(nn.ModuleDict, module.parametrizations)):
                parametrize.remove_parametrizations(module, name, leave_parametrized=False)
        handle = _EMBEDDING_HOOKS.pop(module, None)
        if handle is not None:
            handle.remove()


T = TypeVar("T")


def float32_copy(value: T) -> T:
    """A dataclass of tensors (a layer's weights) with its 16-bit tensors as float32;
    the same object when there are none (float32 weights)."""
    assert dataclasses.is_dataclass(value) and not isinstance(value, type)
    changes = {
        f.name: getattr(value, f.name).float()
        for f in dataclasses.fields(value)
        if isinstance(getattr(value, f.name), torch.Tensor)
        and getattr(value, f.name).dtype in (torch.float16, torch.bfloat16)
    }
    return dataclasses.replace(value, **changes) if changes else value


def read_in(model: nn.Module, private: bool = True) -> None:
    """Read every CPU weight now, a layer at a time, reporting ``("load", part, parts)``:
    a memory-mapped checkpoint is otherwise read from disk by its first forward pass (a
    minute for 16 GB), with no sign of why it is slow.  ``private``: each weight copied
    into the process's own memory as it is read, its file pages given back
    (``safetensors_io.private_copy``: under memory pressure the kernel would otherwise
    drop mapped pages and the next pass read them again); else its pages only touched."""
    parts: dict[int, list[torch.Tensor]] = {}
    seen: set[int] = set()
    for name, param in model.named_parameters():
        if param.device.type != "cpu" or param.data_ptr() in seen or param.numel() == 0:
            continue
        seen.add(param.data_ptr())
        match = LAYER_NUMBER.search(name)
        parts.setdefault(int(match.group(1)) if match else -1, []).append(param)
    with torch.no_grad():
        for done, key in enumerate(sorted(parts), start=1):
            for weight in parts[key]:
                if private:
                    weight.data = private_copy(weight.data)
                    continue
                step = max(PAGE_BYTES // weight.element_size(), 1)
                weight.detach().reshape(-1)[::step].sum()  # one value a page: the page is read
            report("load", done, len(parts))
