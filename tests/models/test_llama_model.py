"""Our Llama family against transformers' own, on small random checkpoints made here.

transformers is the oracle (eager attention, ``output_attentions=True``); no
weights are downloaded: each checkpoint is a random config saved with
``save_pretrained``.  Variants cover the three model types, grouped-query
attention (4 query heads on 2 kv heads, 8 on 1), an explicit ``head_dim``,
biases, tied and untied embeddings, a bf16 checkpoint, and every supported
``rope_scaling`` kind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from attention_core import attention_with_steps
from attention_core.errors import SpecError
from attention_core.models import (
    LLAMA_MODEL_TYPES,
    Llama,
    LlamaConfig,
    load_safetensors,
    read_header,
)
from attention_core.models.base import decoder_lm as decoder_lm_module
from attention_core.models.families.rope import apply_rope
from tests.models.checkpoints import LLAMA_CLASSES as CLASSES
from tests.models.checkpoints import make_llama
from tests.requires import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = require("transformers")
torch.set_num_threads(1)

TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
VOCAB = 61
MAX_POSITIONS = 32

# name -> (model_type, config overrides); every config is small (hidden 32, 3 layers).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-gqa-4-on-2-tied": ("llama", {"tie_word_embeddings": True}),
    "llama-mqa-8-on-1-head-dim-6": (
        "llama",
        {"num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 6},
    ),
    "llama-mha-biases": (
        "llama",
        {"num_key_value_heads": 4, "attention_bias": True, "mlp_bias": True},
    ),
    "llama-bf16": ("llama", {"dtype": "bfloat16"}),
    "mistral-no-window": ("mistral", {"sliding_window": None}),
    "mistral-window-covers-context": ("mistral", {"sliding_window": MAX_POSITIONS}),
    "qwen2-tied": ("qwen2", {"tie_word_embeddings": True}),
    "qwen2-theta-1e6": ("qwen2", {"rope_theta": 1e6}),
    "rope-linear": ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
    "rope-dynamic": ("llama", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}),
    "rope-yarn": (
        "qwen2",
        {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 16,
            }
        },
    ),
    "rope-llama3": (
        "llama",
        {
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8,
            },
        },
    ),
}


def make_checkpoint(directory: Path, model_type: str, seed: int = 0, **overrides: Any) -> Path:
    """A random transformers checkpoint of ``model_type`` (hidden 32, 3 layers, 4 query heads
    on 2 kv heads, 32 positions, vocabulary 61) saved to ``directory``."""
    overrides = dict(overrides)
    dtype = torch.bfloat16 if overrides.pop("dtype", None) == "bfloat16" else torch.float32
    settings: dict[str, Any] = {
        "vocab_size": VOCAB,
        "intermediate_size": 40,
        "num_hidden_layers": 3,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "initializer_range": 0.02,
        **overrides,
    }
    return make_llama(directory, model_type=model_type, seed=seed, dtype=dtype, **settings)


def load_reference(directory: Path) -> torch.nn.Module:
    """A fresh transformers model (its dynamic RoPE remembers lengths, so never reuse one)."""
    model_type = json.loads((directory / "config.json").read_text())["model_type"]
    model_class = getattr(transformers, CLASSES[model_type][1])
    model = model_class.from_pretrained(directory, attn_implementation="eager", dtype=torch.float32)
    return model.eval()


def random_ids(length: int, seed: int, batch: int = 2) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    model_type, overrides = VARIANTS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    make_checkpoint(directory, model_type, **overrides)
    return directory, Llama.from_pretrained(directory)


@pytest.mark.parametrize("length", [1, 17, "context"])
def test_logits_attentions_hidden_states_match_transformers(checkpoint, length) -> None:
    directory, ours = checkpoint
    T = ours.config.max_positions if length == "context" else length
    ids = random_ids(T, seed=T)
    reference = load_reference(directory)
    with torch.inference_mode():
        got = ours(ids, output_attentions=True, output_hidden_states=True)
        want = reference(ids, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(got.logits, want.logits, **TOLERANCE)
    heads = ours.config.num_attention_heads
    assert len(got.attentions) == len(want.attentions) == 3
    for a, b in zip(got.attentions, want.attentions, strict=True):
        assert a.shape == (2, heads, T, T)  # per query head, also under GQA
        torch.testing.assert_close(a, b, **TOLERANCE)
    assert len(got.hidden_states) == len(want.hidden_states) == 4
    for a, b in zip(got.hidden_states, want.hidden_states, strict=True):
        torch.testing.assert_close(a, b, **TOLERANCE)


def test_the_context_of_each_variant() -> None:
    """What "the model's full context" is, per RoPE scaling (see ``RopeConfig.context_length``)."""
    contexts = {}
    for name, (model_type, overrides) in VARIANTS.items():
        raw = {"model_type": model_type, "max_position_embeddings": MAX_POSITIONS, **overrides}
        raw.pop("dtype", None)
        if model_type == "mistral" and "sliding_window" not in raw:
            raw["sliding_window"] = None
        contexts[name] = LlamaConfig.from_dict(raw).max_positions
    assert contexts == {
        **{name: 32 for name in VARIANTS if not name.startswith("rope-")},
        "rope-linear": 64,  # factor 2 x max_position_embeddings
        "rope-dynamic": 64,  # factor 2 x max_position_embeddings
        "rope-yarn": 64,  # factor 4 x original 16
        "rope-llama3": 64,  # factor 8 x original 8, above max_position_embeddings
    }


@pytest.mark.parametrize("kind", ["linear", "dynamic", "yarn", "llama3"])
def test_each_rope_scaling_changes_the_result_where_it_should(tmp_path: Path, kind: str) -> None:
    """The scaled model against the same weights unscaled: different at the full context
    (and at 17 tokens, except dynamic NTK, which leaves the first 32 positions alone)."""
    model_type, overrides = VARIANTS[f"rope-{kind}"]
    scaled = Llama.from_pretrained(make_checkpoint(tmp_path, model_type, **overrides))
    config = json.loads((tmp_path / "config.json").read_text())
    theta = config["rope_parameters"]["rope_theta"]
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    (tmp_path / "config.json").write_text(json.dumps(config))
    plain = Llama.from_pretrained(tmp_path)
    assert plain.config.max_positions == MAX_POSITIONS
    with torch.inference_mode():
        short_ids = random_ids(17, seed=1)
        short_diff = (scaled(short_ids).logits - plain(short_ids).logits).abs().max()
        long_ids = random_ids(MAX_POSITIONS, seed=2)
        long_diff = (scaled(long_ids).logits[:, -1] - plain(long_ids).logits[:, -1]).abs().max()
    if kind == "dynamic":
        assert short_diff == 0 and long_diff == 0  # up to max_position_embeddings: no change
    else:
        # Ten times the comparison's tolerance: a missing scaling would fail those tests.
        assert short_diff > 1e-4 and long_diff > 1e-4


def test_dynamic_scaling_past_the_original_length_changes_every_row(tmp_path: Path) -> None:
    """At 40 tokens the dynamic base grows, so even the first rows differ from a 32-token pass."""
    model_type, overrides = VARIANTS["rope-dynamic"]
    model = Llama.from_pretrained(make_checkpoint(tmp_path, model_type, **overrides))
    ids = random_ids(40, seed=4)
    with torch.inference_mode():
        long_pass = model(ids).logits[:, :32]
        short_pass = model(ids[:, :32]).logits
    assert (long_pass - short_pass).abs().max() > 1e-4


def test_causal_rows_sum_to_one_and_upper_triangle_is_zero(checkpoint) -> None:
    _, ours = checkpoint
    heads = ours.config.num_attention_heads
    with torch.inference_mode():
        out = ours(torch.arange(10)[None], output_attentions=True)
    upper = ~torch.ones(10, 10, dtype=torch.bool).tril()
    for weights in out.attentions:
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, heads, 10))
        assert bool((weights[..., upper] == 0).all())


def test_cached_decoding_equals_one_full_pass(checkpoint) -> None:
    """Prefill, then 1, 1 and a chunk of 7: every chunk as a full pass over the tokens so far.

    The sequence runs past ``max_position_embeddings`` where the context allows
    it, which is where dynamic scaling changes the frequencies under the cache.
    """
    directory, ours = checkpoint
    total = min(ours.config.max_positions, 40)
    sizes = [total - 9, 1, 1, 7]
    ids = random_ids(total, seed=3, batch=1)
    with torch.inference_mode():
        cache = ours.new_cache(max_length=total)
        parts = [
            ours(chunk, cache=cache, output_attentions=True, output_hidden_states=True)
            for chunk in ids.split(sizes, 1)
        ]
    assert cache.length == total
    start = 0
    for part in parts:
        stop = start + part.logits.shape[1]
        with torch.inference_mode():
            full = ours(ids[:, :stop], output_attentions=True, output_hidden_states=True)
        torch.testing.assert_close(part.logits, full.logits[:, start:stop], **TOLERANCE)
        for layer, weights in enumerate(part.attentions):
            assert weights.shape[-1] == stop  # the new rows see every cached key
            torch.testing.assert_close(
                weights, full.attentions[layer][:, :, start:stop, :stop], **TOLERANCE
            )
        for got, want in zip(part.hidden_states, full.hidden_states, strict=True):
            torch.testing.assert_close(got, want[:, start:stop], **TOLERANCE)
        start = stop
    # And the last chunk against transformers' full forward over the whole sequence.
    with torch.inference_mode():
        want = load_reference(directory)(ids).logits
    torch.testing.assert_close(parts[-1].logits, want[:, -sizes[-1] :], **TOLERANCE)


def test_trace_of_a_layer_is_the_attention_it_used(checkpoint) -> None:
    _, ours = checkpoint
    c = ours.config
    ids = torch.arange(7)[None]
    with torch.inference_mode():
        out = ours(ids, output_attentions=True, trace_layer=1)
        cos, sin = ours.rotary_angles(0, 7)
    trace = out.trace
    assert trace is not None and trace.layer == 1
    assert trace.x.shape == (1, 7, c.hidden_size)
    assert trace.q.shape == (1, c.num_attention_heads, 7, c.head_dim)
    assert trace.k.shape == trace.v.shape == (1, c.num_key_value_heads, 7, c.head_dim)
    assert trace.q_unrotated is not None and trace.k_unrotated is not None
    torch.testing.assert_close(trace.q, apply_rope(trace.q_unrotated, cos, sin))
    torch.testing.assert_close(trace.k, apply_rope(trace.k_unrotated, cos, sin))
    torch.testing.assert_close(trace.steps.attn_weights, out.attentions[1])
    block = ours.model.layers[1]
    again = attention_with_steps(
        trace.q, trace.k, trace.v, is_causal=True, scale=block.self_attn.scale, enable_gqa=True
    )
    torch.testing.assert_close(again.context_vec, trace.steps.context_vec)
    assert trace.steps.masked_scores[0, 0, 0, 1] == float("-inf")


def test_every_layer_goes_through_attention_with_steps(checkpoint, monkeypatch) -> None:
    _, ours = checkpoint
    calls = []

    def spy(*args, **kwargs):
        calls.append((kwargs.get("is_causal"), kwargs.get("enable_gqa"), args[0].shape[1]))
        return attention_with_steps(*args, **kwargs)

    monkeypatch.setattr(decoder_lm_module, "attention_with_steps", spy)
    with torch.inference_mode():
        ours(torch.arange(4)[None])
    c = ours.config
    grouped = c.num_key_value_heads < c.num_attention_heads
    assert calls == [(True, grouped, c.num_attention_heads)] * 3


@pytest.mark.parametrize(
    ("model_type", "overrides"),
    [
        ("llama", {"tie_word_embeddings": True}),
        ("llama", {"num_key_value_heads": 1, "attention_bias": True, "mlp_bias": True}),
        ("mistral", {"sliding_window": None}),
        ("qwen2", {"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}),
        ("llama", {"rope_scaling": {"rope_type": "dynamic", "factor": 3.0}}),
    ],
)
def test_saved_checkpoint_loads_in_transformers_with_the_same_logits(
    tmp_path: Path, model_type: str, overrides: dict[str, Any]
) -> None:
    """Ours -> save_pretrained -> transformers (and back) gives the same logits."""
    source = make_checkpoint(tmp_path / "source", model_type, seed=5, **overrides)
    ours = Llama.from_pretrained(source)
    saved = tmp_path / "saved"
    ours.save_pretrained(saved)
    config = json.loads((saved / "config.json").read_text())
    assert config["model_type"] == model_type
    assert config["architectures"] == [CLASSES[model_type][1]]
    keys = set(read_header(saved / "model.safetensors").entries)
    assert ("lm_head.weight" in keys) is (not ours.config.tie_word_embeddings)
    ids = random_ids(ours.config.max_positions, seed=6)
    with torch.inference_mode():
        want = ours(ids).logits
        torch.testing.assert_close(load_reference(saved)(ids).logits, want, **TOLERANCE)
        again = Llama.from_pretrained(saved)
        torch.testing.assert_close(again(ids).logits, want, rtol=0, atol=0)
    assert again.config == ours.config


def test_a_transformers_4_config_reads_like_its_transformers_5_form() -> None:
    """``rope_theta`` + ``rope_scaling`` with the old ``type`` key, as older checkpoints hold it."""
    old = LlamaConfig.from_dict(
        {
            "model_type": "llama",
            "rope_theta": 500000.0,
            "rope_scaling": {"type": "linear", "factor": 4.0},
            "num_key_value_heads": None,
            "head_dim": None,
        }
    )
    new = LlamaConfig.from_dict(
        {
            "model_type": "llama",
            "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 500000.0},
        }
    )
    assert old == new
    assert (new.rope.theta, new.rope.rope_type, new.rope.factor) == (500000.0, "linear", 4.0)
    assert new.num_key_value_heads == new.num_attention_heads == 32
    assert new.head_dim == 128


def test_family_defaults_follow_transformers() -> None:
    """Keys a config.json leaves out take the family's transformers defaults."""
    assert LLAMA_MODEL_TYPES == ("llama", "mistral", "qwen2")
    qwen = LlamaConfig.from_dict({"model_type": "qwen2", "sliding_window": 4096})
    assert (qwen.qkv_bias, qwen.o_proj_bias, qwen.max_positions) == (True, False, 32768)
    assert qwen.sliding_window is None  # only used with use_sliding_window
    mistral = LlamaConfig.from_dict({"model_type": "mistral", "sliding_window": None})
    assert (mistral.num_key_value_heads, mistral.max_positions) == (8, 131072)
    # Without the key, Mistral's sliding window is transformers' default 4096: refused.
    with pytest.raises(SpecError, match="sliding_window is 4096, shorter than the context"):
        LlamaConfig.from_dict({"model_type": "mistral"})


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"model_type": "gemma"}, "model_type 'gemma' is not a Llama-family type"),
        (
            {"model_type": "mistral", "sliding_window": 16, "max_position_embeddings": 32},
            r"sliding_window is 16, shorter than the context \(32 positions\)",
        ),
        (
            {"model_type": "qwen2", "use_sliding_window": True},
            "use_sliding_window is true: sliding-window attention is not supported",
        ),
        (
            {"model_type": "llama", "layer_types": ["full_attention", "sliding_attention"]},
            "only full attention is supported",
        ),
        (
            {"model_type": "llama", "rope_scaling": {"rope_type": "longrope", "factor": 2.0}},
            r"rope_scaling type 'longrope' is not supported \(supported: linear, dynamic",
        ),
        (
            {"model_type": "llama", "rope_scaling": {"type": "su", "factor": 2.0}},
            "rope_scaling type 'su' is not supported",
        ),
        (
            {"model_type": "llama", "rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
            "'llama3' needs low_freq_factor, high_freq_factor",
        ),
        (
            {"model_type": "llama", "rope_scaling": {"rope_type": "linear"}},
            "'linear' needs factor",
        ),
        (
            {"model_type": "llama", "partial_rotary_factor": 0.5},
            "partial_rotary_factor 0.5 is not supported",
        ),
        (
            {
                "model_type": "llama",
                "hidden_size": 48,
                "num_attention_heads": 6,
                "num_key_value_heads": 4,
            },
            r"num_attention_heads \(6\) is not a multiple of num_key_value_heads \(4\)",
        ),
        (
            {"model_type": "llama", "hidden_size": 20, "num_attention_heads": 4},
            "head_dim is 5; RoPE rotates pairs of dimensions",
        ),
        (
            {"model_type": "llama", "hidden_act": "swiglu-fancy"},
            "hidden_act 'swiglu-fancy' is not supported",
        ),
        ({"model_type": "llama", "vocab_size": "many"}, "vocab_size is 'many'; it must be"),
    ],
)
def test_unsupported_configs_are_refused_with_the_reason(raw: dict[str, Any], reason: str) -> None:
    with pytest.raises(SpecError, match=reason) as caught:
        LlamaConfig.from_dict(raw)
    assert caught.value.field == "model"


def test_float32_weights_stay_memory_mapped(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, "qwen2", tie_word_embeddings=True)
    model = Llama.from_pretrained(tmp_path)
    attn = model.model.layers[0].self_attn
    assert not attn.q_proj.weight.requires_grad
    # Views of one map of the file: tensors lie as far apart in memory as in the file.
    entries = read_header(tmp_path / "model.safetensors").entries
    in_file = entries["model.layers.0.self_attn.q_proj.weight"].begin
    in_file -= entries["model.layers.0.self_attn.k_proj.weight"].begin
    assert attn.q_proj.weight.data_ptr() - attn.k_proj.weight.data_ptr() == in_file
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_too_long_a_sequence_names_the_limit(checkpoint) -> None:
    _, ours = checkpoint
    limit = ours.config.max_positions
    with pytest.raises(SpecError, match=f"{limit + 1} tokens; this model reads at most {limit}"):
        ours(torch.zeros(1, limit + 1, dtype=torch.long))


def test_a_truncated_weights_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, "llama")
    path = tmp_path / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(SpecError, match="model.safetensors: the file is truncated"):
        Llama.from_pretrained(tmp_path)


def test_weights_that_do_not_match_the_config_are_an_error(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, "mistral", sliding_window=None)
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_hidden_layers"] = 4
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecError, match="missing: model.layers.3"):
        Llama.from_pretrained(tmp_path)
    config["num_hidden_layers"], config["num_key_value_heads"] = 3, 4
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        SpecError, match="k_proj.weight' has shape \\(16, 32\\); config.json implies"
    ):
        Llama.from_pretrained(tmp_path)


def test_a_plain_cache_is_refused_by_a_dynamic_model(tmp_path: Path) -> None:
    from attention_core.models import KVCache

    model_type, overrides = VARIANTS["rope-dynamic"]
    model = Llama.from_pretrained(make_checkpoint(tmp_path, model_type, **overrides))
    with pytest.raises(SpecError, match="needs the cache made by new_cache"):
        model(torch.arange(3)[None], cache=KVCache(3, 1, 2, 8, 8))


def test_a_dynamic_step_past_the_limit_traces_like_a_full_pass(tmp_path: Path) -> None:
    """Past max_position_embeddings a dynamic model recomputes from the cached tokens: the
    step's logits, maps and trace are the last rows of a full pass."""
    model_type, overrides = VARIANTS["rope-dynamic"]
    model = Llama.from_pretrained(make_checkpoint(tmp_path, model_type, **overrides))
    ids = random_ids(36, seed=8, batch=1)
    with torch.inference_mode():
        cache = model.new_cache()
        model(ids[:, :34], cache=cache)
        step = model(ids[:, 34:], cache=cache, num_logits=1, output_attentions=True, trace_layer=2)
        full = model(ids, output_attentions=True, trace_layer=2)
    assert cache.length == 36
    torch.testing.assert_close(step.logits, full.logits[:, -1:], **TOLERANCE)
    torch.testing.assert_close(step.attentions[2], full.attentions[2][:, :, -2:], **TOLERANCE)
    assert step.trace is not None and full.trace is not None
    assert step.trace.q.shape == (1, 4, 2, 8) and step.trace.k.shape == (1, 2, 36, 8)
    for name in ("attn_scores", "masked_scores", "attn_weights", "context_vec"):
        want = getattr(full.trace.steps, name)[..., -2:, :]
        torch.testing.assert_close(getattr(step.trace.steps, name), want, **TOLERANCE)
    torch.testing.assert_close(step.trace.x, full.trace.x[:, -2:], **TOLERANCE)


def test_a_sharded_checkpoint_with_stored_rope_frequencies_loads(tmp_path: Path) -> None:
    """Shards (``model.safetensors.index.json``) and the ``rotary_emb.inv_freq`` buffers
    older checkpoints hold: the same model, and the buffers are not counted as parameters."""
    from attention_core.models import ModelRegistry
    from attention_core.models.checkpoints.safetensors_io import save_safetensors

    whole = make_checkpoint(tmp_path / "whole", "llama", seed=9)
    reference = load_reference(whole)
    sharded = tmp_path / "sharded"
    reference.save_pretrained(sharded, max_shard_size="20KB")
    shards = sorted(p.name for p in sharded.glob("*.safetensors"))
    assert len(shards) > 2 and (sharded / "model.safetensors.index.json").is_file()
    frequencies = {
        f"model.layers.{i}.self_attn.rotary_emb.inv_freq": torch.rand(4) for i in range(3)
    }
    save_safetensors(sharded / shards[0], {**load_safetensors(sharded / shards[0]), **frequencies})
    (sharded / "tokenizer.json").write_text((whole / "tokenizer.json").read_text())
    ids = random_ids(MAX_POSITIONS, seed=10)
    with torch.inference_mode():
        got = Llama.from_pretrained(sharded)(ids).logits
        torch.testing.assert_close(got, Llama.from_pretrained(whole)(ids).logits, rtol=0, atol=0)
    (entry,) = ModelRegistry(include_package=False, builtin_dir=None, env_paths=[sharded]).entries()
    assert entry.supported and entry.parameters == reference.num_parameters()
