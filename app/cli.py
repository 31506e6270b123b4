"""The ``attention-viz`` command: serve the app, or print a trace as JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace

from . import train_cli
from .settings import get_settings


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    uvicorn.run(
        "app.main:create_app",
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
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the web app and JSON API")
    serve.add_argument("--host", default=settings.host)
    serve.add_argument("--port", type=int, default=settings.port)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--reload", action="store_true", help="restart on code changes (dev)")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(func=_serve)

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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.func
    return command(args)


if __name__ == "__main__":
    raise SystemExit(main())
