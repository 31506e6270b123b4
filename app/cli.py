"""The ``attention-viz`` command: serve the app, list the models, print a trace as JSON, train,
or write a text's pooled maps (``maps``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from . import maps_cli, train_cli
from .settings import get_settings
from .version import __version__

SERVE_MODELS_ENV = "ATTENTION_VIZ_SERVE_MODELS"


def _model_paths(paths: list[str] | None) -> str | None:
    """``--model`` paths for the registry (absolute, os.pathsep-joined); None if one is missing."""
    resolved = []
    for raw in paths or []:
        path = Path(raw).expanduser().resolve()
        if not path.is_dir():
            sys.stderr.write(f"attention-viz: --model {raw}: no such directory\n")
            return None
        resolved.append(str(path))
    return os.pathsep.join(resolved)


def _use_models(paths: list[str] | None) -> bool:
    """Hand ``--model`` paths to the app (its settings read them from the environment)."""
    value = _model_paths(paths)
    if value is None:
        return False
    if value:
        os.environ[SERVE_MODELS_ENV] = value  # inherited by uvicorn's workers too
        get_settings.cache_clear()
    return True


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    if not _use_models(args.model):
        return 2

    uvicorn.run(
        f"{__package__}.main:create_app",  # app.main in a checkout, attention_viz.main installed
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        reload=args.reload,
        log_level=args.log_level,
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    import orjson

    from attention_core import AttentionSpec, SpecError, get_preset, run

    from .convert import trace_to_json

    try:
        spec: AttentionSpec = get_preset(args.preset).spec
        if args.tokens:
            spec = replace(spec, tokens=tuple(args.tokens))
        if args.causal is not None:
            spec = replace(spec, causal=args.causal)
        if args.heads is not None:
            spec = replace(spec, num_heads=args.heads)
        payload = trace_to_json(run(spec), spec, args.steps)
    except SpecError as exc:
        sys.stderr.write(f"attention-viz: {exc}\n")
        return 2
    options = orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_INDENT_2 if args.indent else 0)
    sys.stdout.write(orjson.dumps(payload, option=options).decode() + "\n")
    return 0


def _models(args: argparse.Namespace) -> int:
    import orjson

    from .model_listing import listed
    from .model_registry import build_registry
    from .routes.model_page import count_of

    if not _use_models(args.model):
        return 2
    registry = build_registry(get_settings())
    entries = registry.entries()
    default = registry.default_name
    rows = [{**listed(e, registry, default).model_dump(), "path": str(e.path)} for e in entries]
    if args.json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    for row in rows:
        if row["supported"]:
            size = f"{count_of(row['layers'], 'layer')} x {count_of(row['heads'], 'head')}"
            if row["kv_heads"] != row["heads"]:
                size += f" ({row['kv_heads']} kv)"
            what = f"{row['family']:6} {size}, {row['parameters']:,} parameters"
        else:
            what = f"unsupported: {row['reason']}"
        mark = "*" if row["default"] else " "
        sys.stdout.write(f"{mark} {row['name']}  [{row['source']}]  {what}\n    {row['path']}\n")
    return 0


def _presets(_: argparse.Namespace) -> int:
    from attention_core import PRESETS

    for preset in PRESETS.values():
        sys.stdout.write(f"{preset.name:18} {preset.title}\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    settings = get_settings()
    parser = argparse.ArgumentParser(
        prog="attention-viz", description="Self-attention, step by step."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the web app and JSON API")
    serve.add_argument("--host", default=settings.host)
    serve.add_argument("--port", type=int, default=settings.port)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--reload", action="store_true", help="restart on code changes (dev)")
    serve.add_argument("--log-level", default="info")
    serve.add_argument(
        "--model",
        action="append",
        metavar="PATH",
        help="a checkpoint directory, or a directory of them (repeatable); "
        "added to ATTENTION_VIZ_MODELS",
    )
    serve.set_defaults(func=_serve)

    models = sub.add_parser("models", help="list the models the server would show")
    models.add_argument("--model", action="append", metavar="PATH", help="as for serve")
    models.add_argument("--json", action="store_true", help="JSON instead of a table")
    models.set_defaults(func=_models)

    run = sub.add_parser("run", help="print a preset's trace as JSON")
    run.add_argument("preset", help="a preset name (see `attention-viz presets`)")
    run.add_argument("--tokens", nargs="+", help="replace the preset's tokens")
    run.add_argument("--causal", action=argparse.BooleanOptionalAction, default=None)
    run.add_argument("--heads", type=int, help="number of heads")
    run.add_argument("--steps", nargs="+", help="only these steps (e.g. attn_weights output)")
    run.add_argument("--indent", action="store_true", help="pretty-print")
    run.set_defaults(func=_run)

    presets = sub.add_parser("presets", help="list the presets")
    presets.set_defaults(func=_presets)

    train_cli.add_parser(sub)
    maps_cli.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.func
    return command(args)


if __name__ == "__main__":
    raise SystemExit(main())
