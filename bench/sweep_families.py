"""Every text model type transformers registers, tried as a new user would.

For each model type of transformers' causal-LM, masked-LM and seq2seq auto
mappings: its config's defaults shrunk as the listing's dry run shrinks them
(``hf.shrink.shrunk``: 2 layers, 4 to 16 heads, a 256-token vocabulary), a
random checkpoint written by ``save_pretrained`` with a small word-level
``tokenizer.json``, then listed and loaded by the app's registry and its maps
compared with transformers' eager attention (``output_attentions=True``) on
the same checkpoint, to 1e-5; an encoder-decoder's three stacks each.

Each type runs in a forked child with a time limit (``--timeout``), so one
that hangs or crashes is recorded as such; nothing is skipped silently.
Writes ``--out`` (JSON, one record per type; ``--types`` replaces those types'
rows of the last whole sweep), the table ``docs/model-types.md`` from it, and,
after a whole sweep, the summary figure (``bench/results/sweep_families.json``).  Run it from a
tree nobody edits while it runs (the children import lazily).

    PYTHONPATH=$PWD .venv/bin/python bench/sweep_families.py [--timeout 60] [--types a b]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.models.auto import modeling_auto  # noqa: E402
from transformers.utils import logging as transformers_logging  # noqa: E402

from attention_core.errors import SpecError  # noqa: E402
from attention_core.models import ModelRegistry  # noqa: E402
from attention_core.models.hf.language_model import auto_class, transformers_config  # noqa: E402
from attention_core.models.hf.shrink import VOCAB, shrunk  # noqa: E402
from attention_core.models.registry.backends import transformers_kind  # noqa: E402

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "family_sweep.json"
TABLE = BENCH.parent / "docs" / "model-types.md"
RUN = "PYTHONPATH=$PWD .venv/bin/python bench/sweep_families.py [--timeout 60] [--types a b]"
TEXT = " ".join(f"w{i}" for i in (5, 17, 42, 8, 99, 23, 61, 4, 77, 30, 12, 55))
TARGET = " ".join(f"w{i}" for i in (9, 33, 71, 14, 6))
ATOL = 1e-5


def model_types() -> list[str]:
    """The causal-LM, masked-LM and seq2seq auto mappings' model types."""
    names = (
        modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    )
    return sorted({t for mapping in names for t in mapping})


def word_tokenizer(directory: Path, vocab: int) -> None:
    """``w0`` … ``w{vocab-1}``, split on spaces: the ids the texts above name."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = {f"w{i}": i for i in range(vocab)}
    tokenizer = Tokenizer(models.WordLevel(vocab=words, unk_token="w3"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(directory / "tokenizer.json"))


def completed(defaults: dict[str, Any]) -> dict[str, Any]:
    """A default config's gaps that every real checkpoint fills: ``head_dim``,
    ``num_key_value_heads`` and ``vocab_size`` left None (Ministral, Nemotron, ESM)."""
    out = dict(defaults)
    heads, width = out.get("num_attention_heads"), out.get("hidden_size")
    if "head_dim" in out and out["head_dim"] is None and heads and width:
        out["head_dim"] = width // heads
    if "num_key_value_heads" in out and out["num_key_value_heads"] is None and heads:
        out["num_key_value_heads"] = heads
    if "vocab_size" in out and out["vocab_size"] is None:
        out["vocab_size"] = VOCAB
    return out


def make_checkpoint(model_type: str, directory: Path) -> tuple[str, Any]:
    """A random checkpoint of ``model_type`` with shrunk defaults; its kind and config."""
    defaults = completed(CONFIG_MAPPING[model_type]().to_dict())
    raw = {**shrunk(defaults), "model_type": model_type}
    try:
        kind = transformers_kind(raw, f"model_type {model_type!r}")
    except SpecError:  # refused by its kind (audio in): the listing must say so too
        seq2seq = modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
        kind = "encoder-decoder" if model_type in seq2seq else "decoder"
    if kind == "encoder-decoder" and raw.get("decoder_start_token_id") is None:
        raw["decoder_start_token_id"] = raw.get("pad_token_id") or 0  # as T5's checkpoints
    config = transformers_config(raw)
    auto = auto_class(model_type, kind) if kind != "encoder" else transformers.AutoModelForMaskedLM
    torch.manual_seed(0)
    model = auto.from_config(config)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    vocab = int(getattr(config.get_text_config(), "vocab_size", None) or VOCAB)
    word_tokenizer(directory, min(vocab, VOCAB))
    return kind, config


def eager_maps(directory: Path, kind: str, ids: list[int], target: list[int]) -> dict[str, Any]:
    """transformers' own eager attention maps of the checkpoint, per stack."""
    auto = auto_class(str(transformers.AutoConfig.from_pretrained(directory).model_type), kind)
    model = auto.from_pretrained(directory, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    with torch.inference_mode():
        if kind == "encoder-decoder":
            out = model(
                input_ids=torch.tensor([ids]),
                decoder_input_ids=torch.tensor([target]),
                output_attentions=True,
                use_cache=False,  # FSMT builds its causal mask only without a cache
            )
            return {
                "encoder": tuple(unbanded(a, len(ids)) for a in out.encoder_attentions),
                "decoder": out.decoder_attentions,
                "cross": out.cross_attentions,
            }
        extra = {"use_cache": False} if kind == "decoder" else {}
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, **extra)
        return {"encoder" if kind == "encoder" else "decoder": out.attentions}


def unbanded(band: Any, keys: int) -> Any:
    """Longformer's (LED's) eager maps, (B, H, T, 2w + 1) per query's window of keys
    ``i - w`` … ``i + w``, as (B, H, T, T) maps (keys outside the text: never read)."""
    if band.shape[-1] == keys:
        return band
    w = (band.shape[-1] - 1) // 2
    full = band.new_zeros(*band.shape[:-1], keys)
    for i in range(band.shape[-2]):
        for k in range(band.shape[-1]):
            j = i + k - w
            if 0 <= j < keys:
                full[..., i, j] = band[..., i, k]
    return full


def our_maps(model: Any, kind: str) -> tuple[dict[str, Any], list[int], list[int]]:
    if kind == "encoder-decoder":
        maps = model.encode_pair(TEXT, TARGET)
        stacks = {
            "encoder": maps.layer_attentions,
            "decoder": maps.decoder_attentions,
            "cross": maps.cross_attentions,
        }
        return stacks, list(maps.source.input_ids), list(maps.target.input_ids)
    maps = model.encode(TEXT)
    stack = "encoder" if kind == "encoder" else "decoder"
    return {stack: maps.layer_attentions}, list(maps.tokenized.input_ids), []


def try_type(model_type: str, root: Path) -> dict[str, Any]:
    """One model type's record: status (equal, differs, refused, error) and why."""
    torch.set_num_threads(1)
    transformers_logging.disable_progress_bar()
    directory = root / model_type
    record: dict[str, Any] = {"model_type": model_type}
    try:
        kind, _ = make_checkpoint(model_type, directory)
    except Exception as exc:  # noqa: BLE001 - recorded: the sweep says what fails
        return {**record, "status": "no checkpoint", "reason": _text(exc)}
    record["kind"] = kind
    registry = ModelRegistry(include_package=False, builtin_dir=None, env_paths=[directory])
    (entry,) = registry.entries()
    record["backend"] = entry.backend
    if not entry.supported:
        return {**record, "status": "refused", "reason": entry.reason, "when": "listed"}
    try:
        model = registry.load(entry.name)
        ours, ids, target = our_maps(model, kind)
    except Exception as exc:  # noqa: BLE001
        listed = registry.entries()[0]
        return {
            **record,
            "status": "refused",
            "reason": _text(exc),
            "when": "loaded",
            "listed_after": listed.reason,
        }
    try:
        want = eager_maps(directory, kind, ids, target)
    except Exception as exc:  # noqa: BLE001
        return {**record, "status": "no eager reference", "reason": _text(exc)}
    worst = 0.0
    for stack, maps in ours.items():
        expected = want[stack]
        if expected is None or len(expected) != len(maps) or any(e is None for e in expected):
            return {
                **record,
                "status": "no eager reference",
                "reason": f"transformers' eager output has no {stack} attentions",
            }
        for got, ref in zip(maps, expected, strict=True):
            if tuple(got.shape) != tuple(ref[0].shape):
                return {
                    **record,
                    "status": "differs",
                    "reason": f"{stack} map {tuple(got.shape)} vs eager {tuple(ref[0].shape)}",
                }
            worst = max(worst, float((got - ref[0]).abs().max()))
    status = "equal" if worst <= ATOL else "differs"
    return {**record, "status": status, "max_abs_diff": worst}


def _text(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {message}"[:300]


def _child(model_type: str, root: str, conn: Any) -> None:
    try:
        conn.send(try_type(model_type, Path(root)))
    except BaseException as exc:  # noqa: BLE001 - anything: sent as the record
        conn.send({"model_type": model_type, "status": "error", "reason": _text(exc)})


def run(types: list[str], timeout: float) -> list[dict[str, Any]]:
    context = mp.get_context("fork")
    records = []
    with tempfile.TemporaryDirectory(prefix="family-sweep-") as root:
        for n, model_type in enumerate(types, 1):
            started = time.perf_counter()
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=_child, args=(model_type, root, send))
            child.start()
            send.close()
            if receive.poll(timeout):
                try:
                    record = receive.recv()
                except EOFError:
                    record = {"model_type": model_type, "status": "error", "reason": "crashed"}
            else:
                record = {
                    "model_type": model_type,
                    "status": "timeout",
                    "reason": f"over {timeout:.0f} s",
                }
            child.kill()
            child.join()
            record["seconds"] = round(time.perf_counter() - started, 2)
            records.append(record)
            print(
                f"[{n}/{len(types)}] {model_type}: {record['status']} "
                f"{record.get('reason') or record.get('max_abs_diff', '')}"[:200],
                flush=True,
            )
    return records


# A refusal's reason, in a few words: (words in the reason, the class).
REASON_CLASSES = (
    ("attention interface", "computes attention in its own code (no adapter)"),
    ("no attention heads", "no attention (state-space or mixing layers)"),
    ("no text language-model class", "not a text model the app opens"),
    ("reads sound", "an audio model (speech in)"),
    ("per-layer attribute", "per-layer configs (Gemma 4...): the app reads one config"),
    ("cannot read this config.json", "transformers refuses the shrunk config"),
    ("cannot build a model", "the dry run: transformers cannot build it"),
    ("a forward pass of", "the dry run: its forward pass fails"),
    ("must be an integer", "a size in config.json is not an integer"),
    ("own Python code", "needs its own code (trust_remote_code)"),
    ("encoder-decoders run on the CPU", "device"),
    ("compressed entries", "attends to entries that are not tokens (DeepSeek-V4)"),
    ("generic EncoderDecoderModel", "two models joined (transformers' EncoderDecoderModel)"),
)


def reason_class(reason: str) -> str:
    for words, name in REASON_CLASSES:
        if words in reason:
            return name
    return "other"


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    statuses = Counter(r["status"] for r in records)
    refused = Counter(
        reason_class(str(r.get("reason"))) for r in records if r["status"] == "refused"
    )
    return {
        "transformers": transformers.__version__,
        "tried": len(records),
        "equal": statuses.get("equal", 0),
        "by_status": dict(statuses.most_common()),
        "refused_by_reason": dict(refused.most_common()),
        # Listed supported, then refused when loaded: what the dry run must keep at 0.
        "refused_when_loaded": sum(1 for r in records if r.get("when") == "loaded"),
    }


STATUS_WORDS = {
    "equal": "opens; every map equals transformers' eager attention",
    "differs": "opens, but a map differs from transformers' eager attention",
    "refused": "listed unsupported, with the reason",
    "no checkpoint": "its default config shrunk could not make a checkpoint (sweep only)",
    "no eager reference": "opens; transformers' eager attention gives no maps to compare",
    "timeout": "over the sweep's time limit",
    "error": "the sweep's child failed",
}


def table(result: dict[str, Any]) -> str:
    """docs/model-types.md: the count, then one row per model type."""
    head = result["summary"]
    lines = [
        "# Model types",
        "",
        "<!-- Written by bench/sweep_families.py: run it again, do not edit this. -->",
        "",
        f"**{head['equal']} of {head['tried']} model types open and match transformers** "
        f"({head['transformers']}): every text model type of transformers' causal-LM, "
        "masked-LM and seq2seq auto mappings, each a random checkpoint of its default "
        "config shrunk as the listing's dry run shrinks a checkpoint's (`hf/shrink.py`: 2 "
        "layers, 4 to 16 heads of the config's own head size, a 256-token vocabulary), "
        "listed and loaded by the app and its maps compared with transformers' eager "
        "attention (`output_attentions=True`) to 1e-5. The listing's dry run decides: a "
        "type is never listed supported and then refused when loaded "
        f"({head.get('refused_when_loaded', 0)} types were). The rest, with the reasons:",
        "",
        "| status | types | meaning |",
        "|---|---|---|",
    ]
    for status, count in sorted(head["by_status"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {status} | {count} | {STATUS_WORDS.get(status, '')} |")
    lines += ["", "Refused, by reason:", "", "| reason | types |", "|---|---|"]
    for reason, count in sorted(head["refused_by_reason"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {reason} | {count} |")
    lines += [
        "",
        "| model type | kind | status | reason or largest difference |",
        "|---|---|---|---|",
    ]
    for r in result["records"]:
        why = r.get("reason") or (
            f"{r['max_abs_diff']:.1e}" if isinstance(r.get("max_abs_diff"), float) else ""
        )
        why = " ".join(str(why).split()).replace("|", "\\|")[:240]
        lines.append(f"| `{r['model_type']}` | {r.get('kind', '')} | {r['status']} | {why} |")
    lines += ["", f"Run: `{RUN}`", ""]
    return "\n".join(lines)


def record_summary(result: dict[str, Any], command: str) -> None:
    sys.path.insert(0, str(BENCH))
    from record import machine, record

    head = result["summary"]
    record(
        "bench/sweep_families.py",
        "Every text model type transformers registers: opens and equals eager attention, "
        "or the reason it is refused",
        RUN,
        [
            {
                "figure": "model types that open with every map equal to eager attention (1e-5)",
                "value": head["equal"],
                "unit": f"of {head['tried']} types",
                # The counts by status are written once: docs/model-types.md (from --out).
                "note": f"transformers {head['transformers']}; the rest, by status and "
                "reason: docs/model-types.md",
                "machine": machine(),
                "command": command,
            }
        ],
    )


def merged(out: Path, rerun: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of ``out`` (the last whole sweep) with the rerun types' rows replaced."""
    fresh = {r["model_type"]: r for r in rerun}
    old = json.loads(out.read_text())["records"] if out.exists() else []
    kept = [fresh.pop(r["model_type"], r) for r in old]
    return kept + list(fresh.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per model type")
    parser.add_argument("--types", nargs="*", help="only these model types")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    types = args.types or model_types()
    records = run(types, args.timeout)
    if args.types:  # a rerun of some types replaces their rows of the whole sweep's
        records = merged(args.out, records)
    result = {"summary": summary(records), "records": records}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    TABLE.write_text(table(result))
    if not args.types:  # the whole sweep: the recorded figure and the machine it ran on
        record_summary(result, "PYTHONPATH=$PWD " + " ".join(["python", *sys.argv]))
    print(json.dumps(result["summary"], indent=1))
    sys.exit(0)


if __name__ == "__main__":
    main()
