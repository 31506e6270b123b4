"""Models larger than the memory they may take: layers spread over devices and disk.

A model whose weights (as held: ``weight_dtype``) exceed ``max_model_bytes``
is not refused when transformers and accelerate are installed and its
``model_type`` is one transformers runs: it loads through the transformers
backend with accelerate's ``device_map="auto"``, ``max_memory`` (the limit
per device) and ``offload_folder`` (what fits nowhere stays on disk and is
read in layer by layer as the forward pass reaches it).  The hand-written
families take that route too (their checkpoints use transformers' names);
every attention layer is still computed by the core (``hf.capture``), on the
layer's own device, and only what an answer needs comes back to the CPU.

``plan`` is what the listing shows, from the safetensors headers alone: how
many layers stay in memory, how many are read from disk each forward pass,
and about how long that takes.  accelerate makes the real map at load time.
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..checkpoints.safetensors_io import SafetensorsHeader
from ..checkpoints.weight_dtype import LAYER_NUMBER, dtype_name, size_text

OFFLOAD_DIR_SETTING = "ATTENTION_VIZ_OFFLOAD_DIR"
ACCELERATE_INSTALL = "pip install 'attention-viz[transformers]'"
# What a forward pass reads from disk per second, for the listing's estimate (a local SSD's
# sequential reads, after the page cache; a first pass from a cold disk is slower).
DISK_BYTES_PER_SECOND = 1.0e9


def default_offload_dir() -> Path:
    return Path(tempfile.gettempdir()) / "attention-viz-offload"


def can_offload() -> bool:
    """Whether the route exists here: transformers and accelerate both installed."""
    return all(
        importlib.util.find_spec(name) is not None for name in ("transformers", "accelerate")
    )


@dataclass(frozen=True)
class Placement:
    """How a model larger than its memory budget runs (see the module doc).

    ``memory_bytes``: the budget (``max_model_bytes``) given to accelerate as the
    CPU's ``max_memory`` (and the GPU's when ``device`` is one); ``layers_in_memory``
    and ``layers_on_disk``: the listing's estimate of accelerate's map.
    """

    dtype: torch.dtype
    device: str
    memory_bytes: int
    offload_folder: Path
    held_bytes: int
    layers_in_memory: int
    layers_on_disk: int
    disk_bytes: int

    def max_memory(self) -> dict[int | str, int]:
        if self.device == "cuda":
            return {0: self.memory_bytes, "cpu": self.memory_bytes}
        return {"cpu": self.memory_bytes}

    def from_pretrained_arguments(self) -> dict[str, Any]:
        """transformers' ``from_pretrained`` keywords that spread the model (accelerate)."""
        self.offload_folder.mkdir(parents=True, exist_ok=True)
        return {
            "device_map": "auto",
            "max_memory": self.max_memory(),
            "offload_folder": str(self.offload_folder),
        }

    @property
    def seconds_per_pass(self) -> float:
        """The listing's estimate of the disk reads alone, per forward pass."""
        return self.disk_bytes / DISK_BYTES_PER_SECOND

    def describe(self) -> str:
        """What the listing says of how the model runs."""
        where = "GPU and CPU memory" if self.device == "cuda" else "memory"
        return (
            f"larger than its {size_text(self.memory_bytes)} budget: accelerate's "
            f"device_map keeps about {self.layers_in_memory} layers in {where} and reads "
            f"{self.layers_on_disk} from disk ({size_text(self.disk_bytes)}) every "
            f"forward pass, about {self.seconds_per_pass:,.1f} s more each; "
            f"{dtype_name(self.dtype)} weights, transformers backend"
        )


def layer_bytes(headers: Iterable[SafetensorsHeader], itemsize: int | None) -> dict[int, int]:
    """Bytes per layer index (-1: the tensors of no layer: embeddings, head, final norm),
    floating tensors counted at ``itemsize`` bytes (None: as stored)."""
    found: dict[int, int] = {}
    for header in headers:
        for name, entry in header.entries.items():
            match = LAYER_NUMBER.search(name)
            layer = int(match.group(1)) if match else -1
            size = entry.end - entry.begin
            if itemsize is not None and entry.dtype.is_floating_point:
                size = size // entry.dtype.itemsize * itemsize
            found[layer] = found.get(layer, 0) + size
    return found


def plan(
    headers: Iterable[SafetensorsHeader],
    dtype: torch.dtype,
    memory_bytes: int,
    device: str = "cpu",
    offload_folder: Path | None = None,
) -> Placement | None:
    """How a model whose weights exceed ``memory_bytes`` would run; None when even its
    parts outside the layers (embeddings, head) do not fit the budget."""
    sizes = layer_bytes(headers, dtype.itemsize)
    rest = sizes.pop(-1, 0)
    free = memory_bytes - rest
    if free < 0 or not sizes:
        return None
    kept = 0
    for layer in sorted(sizes):
        if sizes[layer] > free:
            break
        free -= sizes[layer]
        kept += 1
    on_disk = sorted(sizes)[kept:]
    return Placement(
        dtype=dtype,
        device=device,
        memory_bytes=memory_bytes,
        offload_folder=offload_folder or default_offload_dir(),
        held_bytes=rest + sum(sizes.values()),
        layers_in_memory=kept,
        layers_on_disk=len(on_disk),
        disk_bytes=sum(sizes[layer] for layer in on_disk),
    )


def loaded_map(model: object) -> dict[str, str]:
    """accelerate's map of a loaded model (module -> device or ``disk``; {} when none)."""
    found = getattr(model, "hf_device_map", None)
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
