"""Read and write ``.safetensors`` files, memory-mapped, with errors that name the file.

The format is small enough to own: 8 bytes (little-endian u64) giving the
header's length, a JSON header mapping each tensor name to its ``dtype``,
``shape`` and ``data_offsets`` [begin, end) in the byte buffer that follows,
then that buffer.  Reading it ourselves lets the tensors be views of one
private (copy-on-write) memory map, so a float32 checkpoint costs no copy and
pages load on first touch, and lets a checkpoint be checked (truncated? bad
header?) by reading only its header, which is how the registry lists
directories without loading them.
"""

from __future__ import annotations

import json
import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import SpecError

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
# A header is a few hundred bytes per tensor; 100 MB would be a corrupt file.
MAX_HEADER_BYTES = 100 * 2**20
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


@dataclass(frozen=True)
class TensorEntry:
    dtype: torch.dtype
    shape: tuple[int, ...]
    begin: int  # byte offset in the file
    end: int


@dataclass(frozen=True)
class SafetensorsHeader:
    path: Path
    entries: dict[str, TensorEntry]
    metadata: dict[str, str]

    @property
    def parameters(self) -> int:
        return sum(_numel(e.shape) for e in self.entries.values())


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _broken(path: Path, why: str) -> SpecError:
    return SpecError(f"{path.name}: {why}", field="model")


def read_header(path: Path) -> SafetensorsHeader:
    """Parse and check the header of ``path`` without reading its tensors.

    Raises ``SpecError`` naming the file when it is unreadable, truncated, or
    its header is not what the format promises.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise _broken(path, f"the file is {size} bytes, too short to hold a header")
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > min(MAX_HEADER_BYTES, size - 8):
                raise _broken(
                    path, f"the header claims {header_len} bytes but the file has {size - 8}"
                )
            raw = json.loads(f.read(header_len))
    except SpecError:
        raise  # a ValueError too: already says what is wrong
    except OSError as exc:
        raise _broken(path, f"cannot be read ({exc.strerror or exc})") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise _broken(path, f"the header is not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise _broken(path, "the header is not a JSON object")
    data_start = 8 + header_len
    metadata = raw.pop("__metadata__", None) or {}
    entries: dict[str, TensorEntry] = {}
    for name, info in raw.items():
        try:
            dtype = DTYPES[info["dtype"]]
            shape = tuple(int(s) for s in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError) as exc:
            raise _broken(path, f"tensor {name!r} has a malformed header entry") from exc
        expected = _numel(shape) * dtype.itemsize
        if end - begin != expected or begin < 0:
            raise _broken(
                path, f"tensor {name!r} spans {end - begin} bytes; its shape needs {expected}"
            )
        if data_start + end > size:
            raise _broken(
                path,
                f"the file is truncated: tensor {name!r} ends at byte {data_start + end} "
                f"but the file has {size}",
            )
        entries[name] = TensorEntry(dtype, shape, data_start + begin, data_start + end)
    return SafetensorsHeader(path, entries, {str(k): str(v) for k, v in metadata.items()})


def load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of ``path`` as a view of one private memory map (no copy).

    The map is copy-on-write: writing to a tensor never touches the file.
    """
    header = read_header(path)
    if not header.entries:
        return {}
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    tensors = {}
    for name, entry in header.entries.items():
        count = _numel(entry.shape)
        if count == 0:
            tensors[name] = torch.empty(entry.shape, dtype=entry.dtype)
            continue
        flat = torch.frombuffer(mapped, dtype=entry.dtype, count=count, offset=entry.begin)
        tensors[name] = flat.view(entry.shape)
    return tensors


def checkpoint_files(directory: Path) -> list[Path]:
    """The safetensors files of a checkpoint directory: one file, or the shards of an index."""
    index = directory / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            names = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise _broken(index, f"is not a valid shard index ({exc})") from exc
        missing = [n for n in names if not (directory / n).is_file()]
        if missing:
            raise _broken(index, f"names shard(s) that are missing: {', '.join(missing)}")
        return [directory / n for n in names]
    single = directory / SINGLE_FILE
    if single.is_file():
        return [single]
    raise SpecError(
        f"{directory.name}: no {SINGLE_FILE} or {INDEX_FILE} (only safetensors weights are read)",
        field="model",
    )


def load_checkpoint_tensors(directory: Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint directory, memory-mapped, shards merged."""
    tensors: dict[str, torch.Tensor] = {}
    for path in checkpoint_files(directory):
        tensors.update(load_safetensors(path))
    return tensors


def save_safetensors(
    path: Path, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None
) -> None:
    """Write ``tensors`` as one safetensors file, widest dtypes first (keeps every tensor aligned).

    Written to a temporary name and renamed, so a reader never sees half a file.
    """
    header: dict[str, object] = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    blobs = []
    for name in sorted(tensors, key=lambda n: (-tensors[n].element_size(), n)):
        tensor = tensors[name].detach().to("cpu").contiguous()
        blob = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {
            "dtype": DTYPE_NAMES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)  # align the buffer to 8 bytes, as the reference does
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for blob in blobs:
            f.write(blob)
    partial.replace(path)
