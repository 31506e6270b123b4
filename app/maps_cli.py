"""``attention-viz maps``: one text through a checkpoint, every map pooled, written to a file.

What /model's overview grid shows, for a notebook or a script: each layer's heads,
head average and rollout, max-pooled (``attention_core.models.pooling``) to at most
``--pool`` × ``--pool`` cells, as ``.npz`` (arrays) or ``.json`` (nested lists).  The
forward pass runs once; the progress bar on stderr counts its layers as they run (the
model's own progress reports), then the layers as each is pooled.  Errors (a missing
directory, a text past the model's limits) exit with 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from .terminal_bar import draw_bar

DEFAULT_POOL = 64


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from .schemas.model import MAX_POOL_CELLS

    maps = sub.add_parser(
        "maps",
        help="write a text's attention maps, pooled, as .npz or .json",
        description="Run a checkpoint on a text and write every layer's heads, head average "
        "and rollout, each max-pooled to at most POOL x POOL cells (a cell is the largest "
        "weight of its block).",
    )
    maps.add_argument("model", type=Path, help="a checkpoint directory")
    text = maps.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", help="the text")
    text.add_argument("--text-file", type=Path, help="a UTF-8 file holding the text")
    maps.add_argument(
        "--pool",
        type=int,
        default=DEFAULT_POOL,
        help=f"cells a side, 1..{MAX_POOL_CELLS} (default {DEFAULT_POOL})",
    )
    maps.add_argument("--out", type=Path, required=True, help="a .npz or .json file to write")
    maps.add_argument("--quiet", action="store_true", help="no progress on stderr")
    maps.set_defaults(func=run)


class ProgressBar:
    """Each stage's units so far (``forward``: the pass's layers as they run; ``pool``: the
    layers pooled): one redrawn line per stage on a terminal, a plain line each otherwise.

    ``report`` is an ``attention_core.progress`` callback: the forward pass's own
    reports draw it (an encoder-decoder's total: its encoder's and decoder's layers).
    """

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream, self.enabled = stream, enabled
        self.tty = stream.isatty()

    def report(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.tty:
            end = "\n" if done == total else ""
            self.stream.write(f"\r{draw_bar(done, total)} {stage:<7} layer {done}/{total}{end}")
        else:
            self.stream.write(f"{stage} layer {done}/{total}\n")
        self.stream.flush()


def _fail(message: str) -> int:
    sys.stderr.write(f"attention-viz maps: {message}\n")
    return 2


def pooled_maps(
    model: Any, text: str, cells: int, bar: ProgressBar | None = None
) -> dict[str, Any]:
    """Every layer's maps of ``text`` pooled to at most ``cells`` a side (numpy arrays),
    gathered during the model's one pass (``forward_stacks``) at any length; ``rollout``
    None past ``model_long_rollout_tokens``."""
    import numpy as np
    import torch

    from attention_core.models.base.contract import PassOptions
    from attention_core.models.maps.map_grid import MapQuery
    from attention_core.models.maps.pooling import POOL_REDUCE, Region, block_size
    from attention_core.models.maps.text_maps import TokenizedLike
    from attention_core.progress import reporting

    from .attention_answer import ROLLOUT_NOTE
    from .model_payloads import pooled
    from .settings import get_settings

    def view(rows: TokenizedLike, _first_is_sink: bool) -> MapQuery:
        T = len(rows.tokens)
        block = (block_size(T, cells), block_size(T, cells))
        return MapQuery(None, Region(0, T, 0, T), block, None)

    options = PassOptions(view=view, averages_up_to=get_settings().model_long_rollout_tokens)
    with torch.inference_mode(), reporting(bar.report if bar else None):
        stack = model.forward_stacks(text, options=options).stack()
    query = stack.query
    grids = stack.grids
    rollout = stack.rollout
    return {
        "tokens": list(stack.tokens),
        "pooled": {"block": list(query.block), "shape": list(query.shape), "reduce": POOL_REDUCE},
        "attentions": np.stack([g.heads.numpy() for g in grids]),  # (L, H, r, c)
        "head_average": np.stack([g.average.numpy() for g in grids]),  # (L, r, c)
        "rollout": (
            None if rollout is None else np.stack([pooled(r, query).numpy() for r in rollout])
        ),
        "rollout_note": None if rollout is not None else ROLLOUT_NOTE,
    }


def write(path: Path, model_name: str, result: dict[str, Any]) -> None:
    """``.npz``: the three arrays, ``tokens`` and ``meta`` (JSON); ``.json``: nested lists."""
    import numpy as np
    import orjson

    meta = {"model": model_name, "tokens": result["tokens"], "pooled": result["pooled"]}
    if result["rollout"] is None:  # an input past its rollout limit (app.attention_answer)
        meta["rollout_note"] = result["rollout_note"]
    if path.suffix == ".npz":
        arrays = {k: result[k] for k in ("attentions", "head_average", "rollout")}
        np.savez_compressed(
            path,
            **{k: v for k, v in arrays.items() if v is not None},
            tokens=np.array(result["tokens"], dtype=str),
            meta=np.array(orjson.dumps(meta).decode()),
        )
        return
    payload = {**meta, **{k: result[k] for k in ("attentions", "head_average", "rollout")}}
    path.write_bytes(orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY))


def run(args: argparse.Namespace) -> int:
    from attention_core import SpecError

    from .model_registry import build_registry
    from .schemas.model import MAX_POOL_CELLS
    from .settings import get_settings

    if args.out.suffix not in (".npz", ".json"):
        return _fail(f"--out {args.out}: write a .npz or a .json file")
    if not 1 <= args.pool <= MAX_POOL_CELLS:
        return _fail(f"--pool {args.pool}: it needs 1 to {MAX_POOL_CELLS} cells a side")
    directory = args.model.expanduser().resolve()
    if not directory.is_dir():
        return _fail(f"{args.model}: no such directory")
    try:
        text = args.text if args.text is not None else args.text_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"--text-file {args.text_file}: {exc}")
    settings = get_settings().model_copy(update={"serve_models": str(directory)})
    registry = build_registry(settings)
    entry = next((e for e in registry.entries() if Path(e.path).resolve() == directory), None)
    if entry is None or not entry.supported:
        reason = entry.reason if entry is not None else "not a checkpoint this app can read"
        return _fail(f"{args.model}: {reason}")
    try:
        model = registry.load(entry.name)
        if not model.info().layers:
            return _fail(f"{entry.name} has no attention layers: there are no maps to write")
        bar = ProgressBar(sys.stderr, enabled=not args.quiet)
        result = pooled_maps(model, text, args.pool, bar)
    except SpecError as exc:
        return _fail(str(exc))
    write(args.out, entry.name, result)
    L, H, rows, cols = result["attentions"].shape
    sys.stdout.write(
        f"{args.out}: {len(result['tokens'])} tokens, {L} layers x {H} heads, "
        f"maps pooled to {rows} x {cols}\n"
    )
    return 0
