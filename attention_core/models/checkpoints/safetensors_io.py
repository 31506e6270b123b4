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
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import torch

from ...errors import SpecError
from .untrusted_json import parse_json, read_json

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
MAX_HEADER_DEPTH = 4  # {name: {"shape": [...]}} is 3 levels
MAX_TENSOR_DIMS = 8
HF_REPO_PREFIX = "models--"  # a Hugging Face cache repository (see discovery)
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# Each memory map ``load_safetensors`` made, by the address of its first byte (``private_copy``).
_MAPS: dict[int, weakref.ref[mmap.mmap]] = {}


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
    its header is not what the format promises: every entry a known dtype, a
    shape of non-negative integers, ``data_offsets`` within the file that span
    exactly dtype size × elements, no two tensors sharing a byte.
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
            text = f.read(header_len)
    except SpecError:
        raise
    except OSError as exc:
        raise _broken(path, f"cannot be read ({exc.strerror or exc})") from exc
    # name -> {dtype, shape, data_offsets}: 3 levels deep.
    raw = parse_json(text, f"{path.name}: the header is not valid JSON", max_depth=MAX_HEADER_DEPTH)
    if not isinstance(raw, dict):
        raise _broken(path, "the header is not a JSON object")
    metadata = raw.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise _broken(path, "__metadata__ is not a JSON object")
    entries = {name: _entry(path, name, info, 8 + header_len, size) for name, info in raw.items()}
    _check_disjoint(path, entries)
    return SafetensorsHeader(path, entries, {str(k): str(v) for k, v in metadata.items()})


def _shown(name: str) -> str:
    return repr(name if len(name) <= 64 else name[:64] + "…")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(path: Path, name: str, info: object, data_start: int, size: int) -> TensorEntry:
    """One header entry, checked (see ``read_header``)."""
    if not isinstance(info, dict) or not isinstance(info.get("dtype"), str):
        raise _broken(path, f"tensor {_shown(name)} has a malformed header entry")
    dtype = DTYPES.get(info["dtype"])
    if dtype is None:
        raise _broken(
            path,
            f"tensor {_shown(name)} has dtype {info['dtype'][:16]!r}; "
            f"the dtypes read are {', '.join(DTYPES)}",
        )
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_TENSOR_DIMS
        or not all(_is_int(s) and s >= 0 for s in shape)
    ):
        raise _broken(
            path,
            f"tensor {_shown(name)} has shape {str(shape)[:64]}; a shape is a list of at most "
            f"{MAX_TENSOR_DIMS} non-negative integers",
        )
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(o) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise _broken(
            path,
            f"tensor {_shown(name)} has data_offsets {str(offsets)[:64]}; they must be two "
            "integers, 0 <= begin <= end",
        )
    begin, end = offsets
    expected = _numel(tuple(shape)) * dtype.itemsize
    if end - begin != expected:
        raise _broken(
            path, f"tensor {_shown(name)} spans {end - begin} bytes; its shape needs {expected}"
        )
    if data_start + end > size:
        raise _broken(
            path,
            f"the file is truncated: tensor {_shown(name)} ends at byte {data_start + end} "
            f"but the file has {size}",
        )
    return TensorEntry(dtype, tuple(shape), data_start + begin, data_start + end)


def _check_disjoint(path: Path, entries: Mapping[str, TensorEntry]) -> None:
    """No byte belongs to two tensors (the format lays them out one after another)."""
    spans = sorted((e.begin, e.end, name) for name, e in entries.items() if e.end > e.begin)
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:], strict=False):
        if begin < end:
            raise _broken(path, f"tensors {_shown(first)} and {_shown(second)} overlap in the file")


def load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of ``path`` as a view of one private memory map (no copy).

    The map is copy-on-write: writing to a tensor never touches the file.
    """
    header = read_header(path)
    if not header.entries:
        return {}
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    base = torch.frombuffer(mapped, dtype=torch.uint8, count=1).data_ptr()
    _MAPS[base] = weakref.ref(mapped, lambda _: _MAPS.pop(base, None))
    tensors = {}
    for name, entry in header.entries.items():
        count = _numel(entry.shape)
        if count == 0:
            tensors[name] = torch.empty(entry.shape, dtype=entry.dtype)
            continue
        flat = torch.frombuffer(mapped, dtype=entry.dtype, count=count, offset=entry.begin)
        tensors[name] = flat.view(entry.shape)
    return tensors


def private_copy(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` copied into this process's own memory.  When it is a view of one of
    ``load_safetensors``' maps, the whole pages it spans there are given back
    (``MADV_DONTNEED``): the file's pages leave the process (its resident memory stays
    about one copy) and the page cache may drop them, so a forward pass never waits on
    them being read again when memory runs short.  The map is copy-on-write and its
    tensors are never written, so a view still reading those bytes reads the file's."""
    copy = tensor.clone(memory_format=torch.contiguous_format)
    start = tensor.data_ptr()
    for base, ref in list(_MAPS.items()):
        mapped = ref()
        if mapped is None or not base <= start < base + len(mapped):
            continue
        first = -(-(start - base) // mmap.PAGESIZE) * mmap.PAGESIZE
        last = (start - base + tensor.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
        if last > first and tensor.is_contiguous() and hasattr(mapped, "madvise"):
            mapped.madvise(mmap.MADV_DONTNEED, first, last - first)
    return copy


def checkpoint_files(directory: Path) -> list[Path]:
    """The safetensors files of a checkpoint directory: one file, or the shards of an index.

    Only files inside ``directory`` are named (see ``contained``): a shard index
    naming ``../other/model.safetensors`` or an absolute path is refused.
    """
    index = directory / INDEX_FILE
    if index.is_file():
        weight_map = read_json(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise _broken(index, "is not a valid shard index (no weight_map object)")
        bad = [v for v in weight_map.values() if not _shard_name(v)]
        if bad:
            raise _broken(
                index,
                f"names the shard {str(bad[0])[:200]!r}; a shard is a file name inside the "
                "checkpoint directory",
            )
        names: list[str] = sorted(set(weight_map.values()))
        allowed = weight_roots(directory)
        missing = [n for n in names if not (directory / n).is_file()]
        if missing:
            raise _broken(index, f"names shard(s) that are missing: {', '.join(missing)}")
        return [contained(directory / n, allowed) for n in names]
    single = directory / SINGLE_FILE
    if single.is_file():
        return [contained(single, weight_roots(directory))]
    raise SpecError(
        f"{directory.name}: no {SINGLE_FILE} or {INDEX_FILE} (only safetensors weights are read)",
        field="model",
    )


def _shard_name(value: object) -> bool:
    """A relative path without ``..`` (subdirectories allowed), e.g. ``model-00001-of-00002``."""
    if not isinstance(value, str) or not value or "\x00" in value or "\\" in value:
        return False
    parts = PurePosixPath(value).parts
    return not PurePosixPath(value).is_absolute() and ".." not in parts and bool(parts)


def weight_roots(directory: Path) -> tuple[Path, ...]:
    """Where the weights of ``directory`` may really be (symlinks resolved): inside it, and
    for a Hugging Face cache snapshot (``models--org--name/snapshots/<rev>``, whose files
    link to ``../../blobs/<hash>``) that repository's ``blobs``."""
    roots = [directory.resolve()]
    repo = directory.parent.parent
    if directory.parent.name == "snapshots" and repo.name.startswith(HF_REPO_PREFIX):
        roots.append((repo / "blobs").resolve())
    return tuple(roots)


def contained(path: Path, roots: Sequence[Path]) -> Path:
    """``path`` if, symlinks resolved, it lies inside one of ``roots``; else a ``SpecError``."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise _broken(path, f"cannot be resolved ({exc})") from exc
    if not any(real.is_relative_to(root) for root in roots):
        raise _broken(path, "leads outside its checkpoint directory; only files inside it are read")
    return path


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
