"""The notebook API's views: bertviz's ``head_view`` and ``model_view``, ``show`` (the
/model page's views of a model for a text) and ``explore`` (the explorer's pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from attention_core import AttentionSpec, get_preset, run
from attention_core.models.registry.model_registry import ModelRegistry

from ..convert import trace_to_json
from ..settings import Settings
from ..steps import HEAD_STEPS
from .attentions import (
    POOL_ABOVE,
    Section,
    is_causal,
    pretty_tokens,
    section_json,
    select,
    stack_attention,
)
from .render import NotebookView, deliver
from .served import served_section


def _sections(
    attention: Any,
    tokens: Sequence[str] | None,
    *,
    encoder_attention: Any,
    decoder_attention: Any,
    cross_attention: Any,
    encoder_tokens: Sequence[str] | None,
    decoder_tokens: Sequence[str] | None,
    include_layers: Sequence[int] | None,
    include_heads: Sequence[int] | None,
    prettify_tokens: bool,
) -> list[Section]:
    """bertviz's arguments as sections: ``attention`` and ``tokens``, or encoder-decoder ones."""
    tidy = pretty_tokens if prettify_tokens else tuple
    specs: list[tuple[str, str, Any, Sequence[str] | None, Sequence[str] | None]] = []
    if attention is not None:
        if any(a is not None for a in (encoder_attention, decoder_attention, cross_attention)):
            raise ValueError("pass attention, or encoder/decoder/cross attention, not both")
        specs.append(("attention", "Attention", attention, tokens, tokens))
    else:
        if encoder_attention is not None:
            specs.append(("encoder", "Encoder", encoder_attention, encoder_tokens, encoder_tokens))
        if decoder_attention is not None:
            specs.append(("decoder", "Decoder", decoder_attention, decoder_tokens, decoder_tokens))
        if cross_attention is not None:
            specs.append(
                ("cross", "Cross-attention", cross_attention, decoder_tokens, encoder_tokens)
            )
    if not specs:
        raise ValueError("no attention given: pass attention (and tokens), or encoder_attention…")
    sections = []
    for name, title, raw, queries, keys in specs:
        field = "attention" if name == "attention" else f"{name}_attention"
        full = stack_attention(raw, field)
        if queries is None or keys is None:
            raise ValueError(f"{field} needs its tokens")
        Tq, Tk = full.shape[-2:]
        if (len(queries), len(keys)) != (Tq, Tk):
            raise ValueError(
                f"{field}: maps are {Tq} × {Tk} tokens; the tokens given are "
                f"{len(queries)} × {len(keys)}"
            )
        maps, layers, heads = select(full, include_layers, include_heads, field)
        sections.append(
            Section(
                name=name,
                title=title,
                queries=tidy(queries),
                keys=tidy(keys),
                maps=maps,
                layers=layers,
                heads=heads,
                causal=name == "decoder" or (name == "attention" and is_causal(full)),
                self_attention=name != "cross",
                complete=maps.shape[:2] == full.shape[:2],
            )
        )
    return sections


def _maps_payload(
    view: str, title: str, sections: list[Section], pool_above: int, **extra: Any
) -> dict[str, Any]:
    return {
        "view": view,
        "title": title,
        "pool_above": pool_above,
        "sections": [section_json(s, pool_above) for s in sections],
        **extra,
    }


def head_view(
    attention: Any = None,
    tokens: Sequence[str] | None = None,
    sentence_b_start: int | None = None,
    prettify_tokens: bool = True,
    layer: int | None = None,
    heads: Sequence[int] | None = None,
    encoder_attention: Any = None,
    decoder_attention: Any = None,
    cross_attention: Any = None,
    encoder_tokens: Sequence[str] | None = None,
    decoder_tokens: Sequence[str] | None = None,
    include_layers: Sequence[int] | None = None,
    html_action: str = "view",
    pool_above: int = POOL_ABOVE,
) -> NotebookView | None:
    """bertviz's head view: one layer, every head, lines from a token to what it reads.

    ``attention``: transformers' ``output_attentions`` (one (1, H, T, T) tensor per layer);
    ``layer``/``heads``: 0-based, the layer and the heads shown at first;
    ``html_action``: ``"view"`` (display) or ``"return"`` (the view: ``.data`` is its HTML)."""
    sections = _sections(
        attention,
        tokens,
        encoder_attention=encoder_attention,
        decoder_attention=decoder_attention,
        cross_attention=cross_attention,
        encoder_tokens=encoder_tokens,
        decoder_tokens=decoder_tokens,
        include_layers=include_layers,
        include_heads=None,
        prettify_tokens=prettify_tokens,
    )
    first = 0
    if layer is not None:
        shown = sections[0].layers
        if layer + 1 not in shown:
            raise ValueError(f"layer {layer} is not among the layers shown (0-based): {shown}")
        first = shown.index(layer + 1)
    payload = _maps_payload(
        "head",
        "Head view",
        sections,
        pool_above,
        layer=first,
        shown_heads=[h + 1 for h in heads] if heads is not None else None,
        sentence_b_start=sentence_b_start,
    )
    return deliver(NotebookView(payload), html_action)


def model_view(
    attention: Any = None,
    tokens: Sequence[str] | None = None,
    sentence_b_start: int | None = None,
    prettify_tokens: bool = True,
    display_mode: str = "light",
    encoder_attention: Any = None,
    decoder_attention: Any = None,
    cross_attention: Any = None,
    encoder_tokens: Sequence[str] | None = None,
    decoder_tokens: Sequence[str] | None = None,
    include_layers: Sequence[int] | None = None,
    include_heads: Sequence[int] | None = None,
    html_action: str = "view",
    pool_above: int = POOL_ABOVE,
) -> NotebookView | None:
    """bertviz's model view: every layer × every head as small maps; one opens large, and
    a token's weights in every head. ``include_layers``/``include_heads``: 0-based.
    ``display_mode`` is accepted for bertviz's calls; the view is light."""
    sections = _sections(
        attention,
        tokens,
        encoder_attention=encoder_attention,
        decoder_attention=decoder_attention,
        cross_attention=cross_attention,
        encoder_tokens=encoder_tokens,
        decoder_tokens=decoder_tokens,
        include_layers=include_layers,
        include_heads=include_heads,
        prettify_tokens=prettify_tokens,
    )
    payload = _maps_payload(
        "maps", "Model view", sections, pool_above, sentence_b_start=sentence_b_start
    )
    return deliver(NotebookView(payload), html_action)


# ---------- show: a model and a text ----------


def _registry_model(model: str | Path) -> tuple[ModelRegistry, str, Settings]:
    """The registry that knows ``model`` (a name, or the checkpoint directory at ``model``),
    the name it knows it by, and the server's settings (its limits)."""
    from ..model_registry import build_registry
    from ..settings import get_settings

    settings = get_settings()
    path = Path(model).expanduser()
    if path.is_dir():  # the server's limits for it, as for a model by name
        registry = ModelRegistry(
            include_package=False,
            builtin_dir=None,
            cli_paths=[path],
            max_tokens=settings.model_max_tokens,
            long_cache_bytes=settings.model_long_cache_bytes,
            max_model_bytes=settings.max_model_bytes,
        )
        entries = registry.entries()
        if len(entries) != 1:
            found = ", ".join(e.name for e in entries) or "none"
            raise ValueError(f"{path}: expected one checkpoint there; found {found}")
        return registry, entries[0].name, settings
    return build_registry(settings), str(model), settings


def _loaded_model(model: str | Path) -> Any:
    """The model ``_registry_model`` finds, loaded."""
    registry, name, _ = _registry_model(model)
    return registry.load(name)


def _transformers_section(model: Any, tokenizer: Any, text: str, text_b: str | None) -> Section:
    """A transformers model in memory: its eager attentions for the text."""
    encoded = (
        tokenizer(text, text_b, return_tensors="pt")
        if text_b
        else tokenizer(text, return_tensors="pt")
    )
    with torch.inference_mode():
        out = model(**encoded, output_attentions=True)
    attentions = getattr(out, "attentions", None)
    if not attentions or any(a is None for a in attentions):
        raise ValueError(
            "the model returned no attentions: load it with attn_implementation='eager'"
        )
    ids = encoded["input_ids"][0].tolist()
    tokens = pretty_tokens(tokenizer.convert_ids_to_tokens(ids))
    maps = stack_attention(tuple(attentions))
    types = encoded.get("token_type_ids")
    return Section(
        name="attention",
        title=type(model).__name__,
        queries=tokens,
        keys=tokens,
        maps=maps,
        layers=tuple(range(1, maps.shape[0] + 1)),
        heads=tuple(range(1, maps.shape[1] + 1)),
        causal=bool(getattr(model.config, "is_decoder", False)) or is_causal(maps),
        special=tuple(i in set(tokenizer.all_special_ids) for i in ids),
        token_type_ids=tuple(types[0].tolist()) if types is not None else None,
    )


# A heading quotes at most this many characters of each text.
TITLE_CHARS = 60


def _quoted(text: str) -> str:
    """“text”, or its start and how long it is."""
    if len(text) <= TITLE_CHARS:
        return f"“{text}”"
    return f"“{text[:TITLE_CHARS].rstrip()}…” ({len(text):,} characters)"


def _title(model: str, text: str, text_b: str | None) -> str:
    return f"{model}: {_quoted(text)}" + (f" / {_quoted(text_b)}" if text_b else "")


def show(
    model: Any,
    text: str,
    tokenizer: Any = None,
    *,
    text_b: str | None = None,
    html_action: str = "view",
    pool_above: int = POOL_ABOVE,
) -> NotebookView | None:
    """The /model page's views for a text: every layer × every head, one map large, the
    head mean and rollout, and a token's weights in every head.

    ``model``: a model name the registry knows (``attention-viz models``), a checkpoint
    directory, or a transformers model in memory (then ``tokenizer`` too)."""
    if tokenizer is not None or not isinstance(model, str | Path):
        if tokenizer is None:
            raise ValueError(
                "a transformers model needs its tokenizer: show(model, text, tokenizer)"
            )
        section = _transformers_section(model, tokenizer, text, text_b)
        title = _title(section.title, text, text_b)
    else:  # the server's builder and limits: pooled while gathered, never a full map held
        registry, name, settings = _registry_model(model)
        shown_name, served = served_section(registry, name, settings, text, text_b, pool_above)
        title = _title(shown_name, text, text_b)
        payload = {"view": "maps", "title": title, "pool_above": pool_above, "sections": [served]}
        return deliver(NotebookView(payload), html_action)
    payload = _maps_payload("maps", title, [section], pool_above)
    return deliver(NotebookView(payload), html_action)


# ---------- explore: the explorer's pipeline ----------


def explore(
    preset: str | AttentionSpec,
    steps: Sequence[str] | None = None,
    *,
    html_action: str = "view",
) -> NotebookView | None:
    """The explorer's pipeline for a preset (by name, e.g. ``"bank-raw"``) or a spec: the
    input vectors, each head's q, k, v, scores, weights and context vectors, the output."""
    spec = get_preset(preset).spec if isinstance(preset, str) else preset
    title = get_preset(preset).title if isinstance(preset, str) else "Attention, step by step"
    shown = list(HEAD_STEPS if steps is None else steps)
    unknown = [s for s in shown if s not in HEAD_STEPS]
    if unknown:
        raise ValueError(f"steps {unknown} unknown; the steps are {list(HEAD_STEPS)}")
    trace = trace_to_json(run(spec), spec, None)
    payload = {"view": "explore", "title": title, "trace": trace, "steps": shown}
    return deliver(NotebookView(payload), html_action)
