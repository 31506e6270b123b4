"""The one contract's matrix: every model kind × each of its stacks × each capability, below
and past the full-maps budget, against an oracle.

Models: GPT-2 and Llama (grouped-query attention) of the core, Qwen3 of the transformers
backend, the built-in BERT (MiniLM) and the encoder-decoders Marian, T5 (relative position
biases added to unscaled scores) and BART (learned positions), each with three stacks.
"Past the budget" is a server whose ``model_full_maps_bytes`` is 1 byte, so every
input is ``maps_path`` 'long' while staying cheap; each answer is checked against
transformers' eager attention (``output_attentions=True``), the same maps pooled or
cropped, or a direct computation (value-weighted maps from each layer's traced v and
its heads' slices of the output projection; head scores with ``scores``' definitions).
The 4,096-token cells are in test_long_api.py.  An encoder-decoder's ablation (any stack's
heads) and logit lens (its decoder) are read in the decoder's predictions of the target,
against transformers with the heads zeroed and its decoder states unembedded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from attention_core.analysis.scores import (
    attention_entropy,
    duplicate_token_score,
    first_token_share,
    previous_token_score,
)
from attention_core.analysis.value_norm import row_shares, value_weighted
from attention_core.models.families.bert.config import default_model_dir
from tests.models.checkpoints import make_gpt2, make_llama
from tests.models.hf_checkpoints import make_hf
from tests.models.seq2seq_checkpoints import eager_induction, make_seq2seq
from tests.requires import require

TEXT = "The cat sat on the mat, and the cat was tired because the mat was hard."
TARGET = "Die Katze sass auf der Matte."
BERT = "sentence-transformers/all-MiniLM-L6-v2"
MODELS = {"gpt2": "decoder", "llama": "decoder", "qwen3": "decoder", BERT: "encoder"}
# encoder-decoders: name -> (model type, config overrides).  "t5-tied" is T5 with tied
# embeddings (its decoder's states scaled by d_model**-0.5 before the LM head); only the
# analyses that read the LM head run on it.
SEQ2SEQ: dict[str, tuple[str, dict[str, Any]]] = {
    "marian": ("marian", {}),
    "t5": ("t5", {"d_kv": 12}),  # heads × d_kv = 48, not d_model (as T5 v1.1 small)
    "bart": ("bart", {}),
    "t5-tied": ("t5", {"tie_word_embeddings": True}),
}
ENCODER_DECODERS = ["marian", "t5", "bart"]  # the whole matrix
LM_HEADS = [*ENCODER_DECODERS, "t5-tied"]  # the analyses that read the LM head
STACKS = [(name, stack) for name, stack in MODELS.items()] + [
    (name, stack) for name in ENCODER_DECODERS for stack in ("encoder", "decoder", "cross")
]
ANSWER_KEY = {"encoder": "attentions", "decoder": "decoder_attentions", "cross": "cross_attentions"}
ATOL = 1e-5
LONG_TOKENS = 320  # the analyses' long text: ≈300 tokens, past the 'long' server's budget


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("matrix")
    make_gpt2(root / "gpt2", seed=1, n_positions=LONG_TOKENS)
    make_llama(root / "llama", seed=2, max_position_embeddings=LONG_TOKENS)  # 4 heads, 2 kv
    make_hf(root / "qwen3", "tiny-qwen3", seed=3, max_position_embeddings=LONG_TOKENS)
    for seed, (name, (model_type, overrides)) in enumerate(SEQ2SEQ.items(), start=4):
        if model_type != "t5":  # T5's positions are relative: no table, no limit
            overrides = {"max_position_embeddings": LONG_TOKENS, **overrides}
        make_seq2seq(root / name, model_type, seed=seed, **overrides)
    return root


def loaded(client: TestClient, name: str) -> Any:
    """The server's own loaded model ``name`` (the registry is built on first use)."""
    assert client.get("/api/models").status_code == 200
    return client.app.state.models.load(name)  # type: ignore[attr-defined]


def _client(models_dir: Path, **settings: Any) -> TestClient:
    return TestClient(create_app(Settings(models=str(models_dir), hf_cache=False, **settings)))


@pytest.fixture(scope="module", params=["short", "long"])
def served(request: pytest.FixtureRequest, models_dir: Path) -> Iterator[tuple[str, TestClient]]:
    """(length, client): 'long' puts every input past the full-maps budget."""
    extra: dict[str, Any] = {"max_ablation_cells": 2**24}  # each head of BERT at ≈300 tokens
    if request.param == "long":
        extra["model_full_maps_bytes"] = 1
    with _client(models_dir, **extra) as client:
        yield request.param, client


@pytest.fixture(scope="module")
def eager(models_dir: Path) -> dict[tuple[str, str], torch.Tensor]:
    """(model, stack) -> transformers' eager maps (L, H, T, S) of TEXT (and TARGET)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = require("transformers")
    with _client(models_dir) as client:
        model = {name: loaded(client, name) for name in [*MODELS, *ENCODER_DECODERS]}
    found: dict[tuple[str, str], torch.Tensor] = {}
    with torch.inference_mode():
        for name in ("gpt2", "llama", "qwen3"):
            hf = transformers.AutoModelForCausalLM.from_pretrained(
                models_dir / name, attn_implementation="eager", dtype=torch.float32
            ).eval()
            ids = torch.tensor([model[name].tokenize(TEXT).input_ids])
            found[(name, "decoder")] = torch.cat(hf(ids, output_attentions=True).attentions)
        bert = transformers.BertModel.from_pretrained(
            str(default_model_dir()), attn_implementation="eager"
        ).eval()
        ids = torch.tensor([model[BERT].tokenize(TEXT).input_ids])
        found[(BERT, "encoder")] = torch.cat(bert(ids, output_attentions=True).attentions)
        for name in ENCODER_DECODERS:
            out = seq2seq_eager(models_dir, name)(
                input_ids=torch.tensor([model[name].tokenize(TEXT).input_ids]),
                decoder_input_ids=torch.tensor([model[name].target_text(TARGET).input_ids]),
                output_attentions=True,
            )
            found[(name, "encoder")] = torch.cat(out.encoder_attentions)
            found[(name, "decoder")] = torch.cat(out.decoder_attentions)
            found[(name, "cross")] = torch.cat(out.cross_attentions)
    return found


def seq2seq_eager(models_dir: Path, name: str) -> torch.nn.Module:
    """transformers' own encoder-decoder ``name``, eager attention."""
    transformers = require("transformers")
    module: torch.nn.Module = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        models_dir / name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    return module


@dataclass(frozen=True)
class Cell:
    """One (model, stack) of the matrix on one server (short or long), with transformers'
    eager maps of that stack (L, H, T, S)."""

    length: str
    client: TestClient
    name: str
    stack: str
    want: torch.Tensor

    @property
    def key(self) -> str:
        """The answer's field holding this stack's maps."""
        return ANSWER_KEY[self.stack] if self.name in SEQ2SEQ else "attentions"

    @property
    def stack_body(self) -> dict[str, str]:
        """The request's ``stack`` (an encoder-decoder's), or nothing."""
        return {"stack": self.stack} if self.name in SEQ2SEQ else {}


@pytest.fixture(params=STACKS, ids=[f"{name}-{stack}" for name, stack in STACKS])
def cell(
    request: pytest.FixtureRequest,
    served: tuple[str, TestClient],
    eager: dict[tuple[str, str], torch.Tensor],
) -> Cell:
    name, stack = request.param
    length, client = served
    return Cell(length, client, name, stack, eager[(name, stack)])


def post(client: TestClient, name: str, path: str = "/api/model/attention", **body: Any) -> Any:
    request = {"model": name, "text": TEXT, **body}
    if name in SEQ2SEQ and path != "/api/model/generate":
        request["target"] = TARGET
    response = client.post(path, json=request)
    assert response.status_code == 200, response.text
    return response.json()


def max_pool(maps: torch.Tensor, block: list[int]) -> torch.Tensor:
    flat = maps.reshape(-1, 1, *maps.shape[-2:])
    pooled = torch.nn.functional.max_pool2d(flat, block, block, ceil_mode=True)
    return pooled.reshape(*maps.shape[:-2], *pooled.shape[-2:])


def close(got: Any, want: torch.Tensor) -> None:
    np.testing.assert_allclose(np.array(got, dtype=np.float32), want.numpy(), atol=ATOL, rtol=0)


def test_maps_heads_pool_and_region(cell: Cell) -> None:
    client, name, want, key = cell.client, cell.name, cell.want, cell.key
    whole = post(client, name)
    assert whole.get("maps_path", "full") == cell.length.replace("short", "full")
    for layer, maps in enumerate(whole[key]):
        close(maps, want[layer])
    one = post(client, name, heads=[2])
    for layer, maps in enumerate(one[key]):
        close(maps, want[layer, [1]])
    pooled = post(client, name, pool=4)
    for layer, maps in enumerate(pooled[key]):
        T, S = want.shape[-2:]
        block = [-(-T // 4), -(-S // 4)]
        close(maps, max_pool(want[layer], block))
    if cell.stack in ("encoder", "decoder") and name not in SEQ2SEQ or cell.stack == "encoder":
        region = post(client, name, rows=[2, 9], cols=[1, 6])
        for layer, maps in enumerate(region["attentions"]):
            close(maps, want[layer, :, 2:9, 1:6])


@pytest.mark.parametrize("name", [*MODELS, *ENCODER_DECODERS])
def test_stream_is_the_post(served: tuple[str, TestClient], name: str) -> None:
    _, client = served
    body = {"model": name, "text": TEXT, "pool": 4}
    if name in SEQ2SEQ:
        body["target"] = TARGET
    streamed = client.post("/api/model/attention/stream", json=body).text
    result = [m for m in streamed.strip().split("\n\n") if m.startswith("event: result")]
    assert json.loads(result[0].split("\n")[1].removeprefix("data: ")) == post(client, name, pool=4)


def test_value_norm(cell: Cell) -> None:
    """Each weight times its key's ‖v_j W_O^h‖, rows re-summed to 1, from each layer's full
    trace (its v and weights) and the model's heads' slices of the output projection."""
    client, name, stack = cell.client, cell.name, cell.stack
    model = loaded(client, name)
    answer = post(client, name, measure="value_norm")
    for layer, maps in enumerate(answer[cell.key]):
        if name in SEQ2SEQ:
            _, trace, _ = model.trace_stack(TEXT, TARGET, stack, layer)
        else:
            _, trace = model.trace(TEXT, layer)
        with torch.inference_mode():
            out = model.head_outputs(stack, layer)
            want = row_shares(value_weighted(trace.steps.attn_weights[0], trace.v[0], out))
        close(maps, want)


def test_head_scores(cell: Cell) -> None:
    client, name, stack, maps = cell.client, cell.name, cell.stack, cell.want
    scores = post(client, name, "/api/model/head-scores", **cell.stack_body)
    model = loaded(client, name)
    if stack == "cross":
        assert scores["not_applicable"] == ["previous_token", "duplicate_token", "induction"]
        T, S = maps.shape[-2:]
        diagonal = ((torch.arange(T) + 0.5) * S / T).floor().long().clamp_max(S - 1)
        close(scores["diagonal"], maps[..., torch.arange(T), diagonal].mean(-1))
    else:
        rows = model.target_text(TARGET) if stack == "decoder" and name in SEQ2SEQ else None
        ids = rows.input_ids if rows is not None else model.tokenize(TEXT).input_ids
        close(scores["previous_token"], previous_token_score(maps))
        close(scores["duplicate_token"], duplicate_token_score(maps, ids))
    close(scores["first_token"], first_token_share(maps))
    close(scores["entropy"], attention_entropy(maps))


def test_head_trace_whole_region_and_pooled(cell: Cell) -> None:
    """One head's steps recomputed from the layer the pass kept: the whole map, a region
    (rows and cols, every stack) and pooled, each equal to transformers' eager map."""
    client, name = cell.client, cell.name
    want = cell.want[1, 1]  # layer 2, head 2: (T, S)
    body: dict[str, Any] = {"layer": 2, "head": 2, **cell.stack_body}
    whole = post(client, name, "/api/model/head", **body)
    assert whole["region"] is None and whole["pooled"] is None
    close(whole["heads"][0]["attn_weights"], want)
    region = post(client, name, "/api/model/head", rows=[2, 5], cols=[1, 3], **body)
    assert region["region"] == {"rows": [2, 5], "cols": [1, 3]}
    close(region["heads"][0]["attn_weights"], want[2:5, 1:3])
    assert len(region["heads"][0]["q"]) == 3 and len(region["heads"][0]["k"]) == 2
    pooled = post(client, name, "/api/model/head", pool=4, **body)
    T, S = want.shape
    close(pooled["heads"][0]["attn_weights"], max_pool(want, [-(-T // 4), -(-S // 4)]))


# --- the analyses that read a model's outputs, not its maps ---------------------------------

OUT_PROJECTIONS = {
    "gpt2": "transformer.h.{}.attn.c_proj",
    "llama": "model.layers.{}.self_attn.o_proj",
    "qwen3": "model.layers.{}.self_attn.o_proj",
    BERT: "encoder.layer.{}.attention.output.dense",
}
FINAL_NORMS = {"gpt2": "transformer.ln_f", "llama": "model.norm", "qwen3": "model.norm"}


@pytest.fixture(scope="module")
def reference(models_dir: Path) -> dict[str, torch.nn.Module]:
    """transformers' own model of each decoder and of BERT, eager attention."""
    transformers = require("transformers")
    found: dict[str, torch.nn.Module] = {}
    for name in ("gpt2", "llama", "qwen3"):
        found[name] = transformers.AutoModelForCausalLM.from_pretrained(
            models_dir / name, attn_implementation="eager", dtype=torch.float32
        ).eval()
    found[BERT] = transformers.BertModel.from_pretrained(
        str(default_model_dir()), attn_implementation="eager"
    ).eval()
    return found


def analysed_text(length: str, client: TestClient, name: str) -> str:
    """TEXT (short), or TEXT repeated to ≈300 tokens of this model's (long)."""
    if length == "short":
        return TEXT
    model = loaded(client, name)
    text = TEXT
    while len(model.tokenize(text + " " + TEXT).input_ids) <= min(300, model.max_tokens):
        text += " " + TEXT
    assert len(model.tokenize(text).input_ids) > 250
    return text


@contextmanager
def heads_zeroed(
    module: torch.nn.Module, path: str, H: int, heads: list[tuple[int, int]]
) -> Iterator[None]:
    """Each (layer, head) (0-based)'s slice of the input of ``path.format(layer)`` (an output
    projection of ``H`` heads) zeroed while inside."""
    hooks = []
    for layer in sorted({layer for layer, _ in heads}):
        chosen = [h for l_, h in heads if l_ == layer]

        def zero(_m: Any, args: tuple[torch.Tensor, ...], chosen: list[int] = chosen) -> Any:
            x = args[0].clone()
            D = x.shape[-1] // H
            for h in chosen:
                x[..., h * D : (h + 1) * D] = 0
            return (x, *args[1:])

        target = module.get_submodule(path.format(layer))
        hooks.append(target.register_forward_pre_hook(zero))
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


def ablated_run(
    module: torch.nn.Module, name: str, ids: list[int], heads: list[tuple[int, int]]
) -> Any:
    """transformers' forward with each (layer, head) (0-based)'s slice of the output
    projection's input zeroed: the oracle of ablation."""
    H = int(module.config.num_attention_heads)
    with heads_zeroed(module, OUT_PROJECTIONS[name], H, heads), torch.inference_mode():
        return module(torch.tensor([ids]), output_hidden_states=True)


def next_logprobs(out: Any, ids: list[int]) -> torch.Tensor:
    logprobs = torch.log_softmax(out.logits[0].float(), dim=-1)
    return logprobs[:-1].gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


def sentence(out: Any) -> torch.Tensor:
    return out.last_hidden_state[0].mean(0)


@pytest.mark.parametrize("name", [*FINAL_NORMS, BERT])
def test_ablation_equals_transformers_with_the_heads_zeroed(
    served: tuple[str, TestClient], reference: dict[str, torch.nn.Module], name: str
) -> None:
    """One head, two heads together and each head alone, at ≈20 and ≈300 tokens (past the
    full-maps budget): the ablated forward holds no map (``context_pass``)."""
    length, client = served
    text = analysed_text(length, client, name)
    ids = list(loaded(client, name).tokenize(text).input_ids)
    module = reference[name]
    clean = ablated_run(module, name, ids, [])
    for heads in ([(0, 1)], [(0, 0), (1, 2)]):
        answer = post(
            client, name, "/api/model/ablate", text=text, heads=[[a + 1, b + 1] for a, b in heads]
        )
        out = ablated_run(module, name, ids, heads)
        if name == BERT:
            want = torch.nn.functional.cosine_similarity(sentence(out), sentence(clean), dim=0)
            assert answer["embedding_cosine"] == pytest.approx(float(want), abs=1e-5)
            continue
        close(answer["logprobs_before"], next_logprobs(clean, ids))
        close(answer["logprobs_after"], next_logprobs(out, ids))
        assert answer["loss_after"] == pytest.approx(
            float(-next_logprobs(out, ids).mean()), abs=1e-5
        )
    grid = post(client, name, "/api/model/ablate", text=text, each_head=True)["each_head"]
    H = int(module.config.num_attention_heads)
    for layer, head in [(0, 0), (1, H - 1)]:
        out = ablated_run(module, name, ids, [(layer, head)])
        if name == BERT:
            want = torch.nn.functional.cosine_similarity(sentence(out), sentence(clean), dim=0)
        else:
            want = next_logprobs(clean, ids).mean() - next_logprobs(out, ids).mean()
        assert grid[layer][head] == pytest.approx(float(want), abs=1e-5)


@pytest.mark.parametrize("name", list(FINAL_NORMS))
def test_logit_lens_equals_transformers_hidden_states_unembedded(
    served: tuple[str, TestClient], reference: dict[str, torch.nn.Module], name: str
) -> None:
    length, client = served
    text = analysed_text(length, client, name)
    ids = list(loaded(client, name).tokenize(text).input_ids)
    module = reference[name]
    hidden = ablated_run(module, name, ids, []).hidden_states
    lens = post(client, name, "/api/model/logit-lens", text=text)
    assert lens["layers"] == len(hidden) - 1
    norm = module.get_submodule(FINAL_NORMS[name])
    for layer in range(1, len(hidden)):
        with torch.inference_mode():
            state = hidden[layer][0] if layer == len(hidden) - 1 else norm(hidden[layer][0])
            probs = torch.softmax(module.lm_head(state).float(), dim=-1)
        top = probs.topk(5, dim=-1)
        close(lens["top_probs"][layer - 1], top.values)
        assert lens["top_ids"][layer - 1] == top.indices.tolist()


def test_the_logit_lens_of_an_encoder_says_why_it_has_none(served: tuple[str, TestClient]) -> None:
    _, client = served
    response = client.post("/api/model/logit-lens", json={"model": BERT, "text": TEXT})
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"][-1] == "model" and "language-modelling head" in detail["msg"]


@pytest.mark.parametrize("name", list(FINAL_NORMS))
def test_generation_writes_greedily_and_its_maps_are_transformers_over_what_it_read(
    served: tuple[str, TestClient], reference: dict[str, torch.nn.Module], name: str
) -> None:
    """At ≈20 and ≈300 tokens (past the full-maps budget): the written ids are transformers'
    argmax at each step, and the maps are transformers' eager maps of the prompt's ids and
    the written ones (the generation keeps no map; one long pass rebuilds them)."""
    length, client = served
    text = analysed_text(length, client, name)
    prompt = list(loaded(client, name).tokenize(text).input_ids)
    body = {"model": name, "prompt": text, "max_new_tokens": 4, "layers": [2]}
    response = client.post("/api/model/generate", json=body)
    assert response.status_code == 200, response.text[:300]
    answer = response.json()
    ids = prompt + answer["generated_ids"]
    with torch.inference_mode():
        out = reference[name](torch.tensor([ids]), output_attentions=True)
    written = out.logits[0, len(prompt) - 1 : -1].argmax(-1).tolist()
    assert answer["generated_ids"] == written
    close(answer["attentions"][0], out.attentions[1][0])
    assert answer["maps_path"] == ("long" if length == "long" else "full")


def eager_maps(module: torch.nn.Module, ids: list[int]) -> tuple[torch.Tensor, ...]:
    """transformers' eager attentions of ``ids``, (1, H, T, T) per layer."""
    with torch.inference_mode():
        return tuple(module(torch.tensor([ids]), output_attentions=True).attentions)


@pytest.mark.parametrize("name", [*FINAL_NORMS, BERT])
def test_why_a_cell_equals_transformers_map_at_any_length(
    served: tuple[str, TestClient], reference: dict[str, torch.nn.Module], name: str
) -> None:
    """One cell's decomposition at ≈20 and ≈300 tokens (its forward holds no map): the
    weight is transformers' eager map there, the score differences between two cells of a
    row are its log-ratios, and the components add up to the score."""
    length, client = served
    text = analysed_text(length, client, name)
    ids = list(loaded(client, name).tokenize(text).input_ids)
    maps = eager_maps(reference[name], ids)
    T = len(ids)
    row, cols = T - 2, (T // 3, T - 3)
    answers = [
        post(client, name, "/api/model/why", text=text, layer=2, head=2, row=row, col=col)
        for col in cols
    ]
    want = maps[1][0, 1, row]
    for answer, col in zip(answers, cols, strict=True):
        assert answer["weight"] == pytest.approx(float(want[col]), abs=1e-5)
        assert float(np.sum(answer["grid"])) == pytest.approx(answer["score"], abs=1e-3)
    log_ratio = float(torch.log(want[cols[0]] / want[cols[1]]))
    assert answers[0]["score"] - answers[1]["score"] == pytest.approx(log_ratio, abs=1e-3)


def seq2seq_maps(
    hf: torch.nn.Module, source: list[int], decoder_input: list[int], stack: str
) -> torch.Tensor:
    """transformers' eager maps of one stack, (L, H, T, S)."""
    with torch.inference_mode():
        out = hf(
            input_ids=torch.tensor([source]),
            decoder_input_ids=torch.tensor([decoder_input]),
            output_attentions=True,
        )
    key = {"encoder": "encoder_attentions", "decoder": "decoder_attentions"}
    return torch.cat(getattr(out, key.get(stack, "cross_attentions")))


@pytest.mark.parametrize("name", ENCODER_DECODERS)
@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_seq2seq_why_a_cell_equals_transformers_map_on_each_stack(
    served: tuple[str, TestClient],
    seq2seq_reference: dict[str, torch.nn.Module],
    stack: str,
    name: str,
) -> None:
    """The encoder-decoders' three stacks (post-norm Marian and BART, pre-norm T5 with its
    relative position bias) at ≈20 and ≈300 source tokens (the forward holds no map): the
    weight is transformers' eager map there, two cells' score difference is the log-ratio
    of their weights, and the components (with T5's score bias, a term of its own) add up
    to the score; cross-attention's keys are the encoder output's components, its queries
    the decoder stream's."""
    length, client = served
    model, text = loaded(client, name), analysed_text(length, client, name)
    source, target = list(model.tokenize(text).input_ids), model.target_text(TARGET)
    maps = seq2seq_maps(seq2seq_reference[name], source, list(target.input_ids), stack)
    want = maps[1, 1]  # layer 2, head 2: (T, S)
    T, S = want.shape
    row = T - 2  # its two heaviest keys (T5's unscaled scores leave others at 0 in float32)
    cols = tuple(int(c) for c in want[row].topk(2).indices)
    cell = {"stack": stack, "layer": 2, "head": 2, "row": row}
    answers = [post(client, name, "/api/model/why", text=text, col=col, **cell) for col in cols]
    for answer, col in zip(answers, cols, strict=True):
        assert answer["stack"] == stack and len(answer["tokens"]) == T
        assert answer["weight"] == pytest.approx(float(want[row, col]), abs=1e-5)
        bias = answer["score_bias"]
        assert (bias is None) == (name != "t5" or stack == "cross")
        total = float(np.sum(answer["grid"])) + (bias or 0.0)
        assert total == pytest.approx(answer["score"], abs=1e-3)
        listed = sum(pair["value"] for pair in answer["contributions"])
        assert listed + answer["rest"] + (bias or 0.0) == pytest.approx(answer["score"], abs=1e-4)
        keys = answer["key_components"] or answer["components"]
        assert np.shape(answer["grid"]) == (len(answer["components"]), len(keys))
    if stack == "cross":
        assert "L2 H1" in answers[0]["components"] and "L1 cross H4" in answers[0]["components"]
        assert answers[0]["key_components"][0] == "encoder embedding"
        assert "encoder L2 MLP" in answers[0]["key_components"]
    else:
        assert answers[0]["key_components"] is None
    log_ratio = float(torch.log(want[row, cols[0]] / want[row, cols[1]]))
    assert answers[0]["score"] - answers[1]["score"] == pytest.approx(log_ratio, abs=1e-3)


def test_marian_why_refuses_a_cell_outside_its_stack_naming_the_field(
    served: tuple[str, TestClient], eager: dict[tuple[str, str], torch.Tensor]
) -> None:
    """A decoder cell after its row, a cross-attention column past the source, a row past
    the source, a layer the stack lacks: 422 on that field; a one-stack model refuses
    ``stack`` and ``target``."""
    _, client = served
    T, S = eager[("marian", "cross")].shape[-2:]
    cell = {"model": "marian", "text": TEXT, "target": TARGET, "layer": 1, "head": 1}
    bad = [
        ({"stack": "decoder", "row": 1, "col": 2}, "col"),
        ({"stack": "cross", "row": 1, "col": S}, "col"),
        ({"stack": "encoder", "row": S, "col": 0}, "row"),
        ({"stack": "cross", "row": 0, "col": 0, "layer": 3}, "layer"),
    ]
    for body, field in bad:
        response = client.post("/api/model/why", json={**cell, **body})
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][-1] == field
    one = {"model": "gpt2", "text": TEXT, "layer": 1, "head": 1, "row": 2, "col": 1}
    for extra, field in (({"stack": "cross"}, "stack"), ({"target": TARGET}, "target")):
        response = client.post("/api/model/why", json={**one, **extra})
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][-1] == field


def patching_oracle(module: torch.nn.Module, name: str, ids: list[int]) -> torch.Tensor:
    """(L, H): transformers' gradient of the mean next-token loss at each head's slice of
    the output projection's input, times minus that slice (zero ablation), summed."""
    config = module.config
    L, H = int(config.num_hidden_layers), int(config.num_attention_heads)
    contexts: list[torch.Tensor] = []
    hooks = []
    for layer in range(L):

        def keep(_m: Any, args: tuple[torch.Tensor, ...]) -> None:
            args[0].retain_grad()
            contexts.append(args[0])

        target = module.get_submodule(OUT_PROJECTIONS[name].format(layer))
        hooks.append(target.register_forward_pre_hook(keep))
    try:
        with torch.enable_grad():
            for p in module.parameters():
                p.requires_grad_(False)
            embeds = module.get_input_embeddings()(torch.tensor([ids])).requires_grad_(True)
            logits = module(inputs_embeds=embeds).logits[0].float()
            loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]))
            loss.backward()
    finally:
        for hook in hooks:
            hook.remove()
    grid = []
    for z in contexts:
        g, zz = z.grad[0].view(len(ids), H, -1), z.detach()[0].view(len(ids), H, -1)
        grid.append((g * -zz).sum(dim=(0, 2)))
    return torch.stack(grid)


@pytest.mark.parametrize("name", list(FINAL_NORMS))
def test_attribution_equals_transformers_gradients_at_any_length(
    served: tuple[str, TestClient], reference: dict[str, torch.nn.Module], name: str
) -> None:
    """Attribution patching at ≈20 and ≈300 tokens (its gradient pass holds blocks of
    rows, never a map): every head's estimate is transformers' autograd gradient at the
    head's context times the zero ablation's change; ``exact`` is transformers with each
    head zeroed."""
    length, client = served
    text = analysed_text(length, client, name)
    ids = list(loaded(client, name).tokenize(text).input_ids)
    module = reference[name]
    answer = post(client, name, "/api/model/attribute", text=text, method="exact")
    close(answer["estimate"], patching_oracle(module, name, ids))
    clean = ablated_run(module, name, ids, [])
    out = ablated_run(module, name, ids, [(1, 1)])
    want = next_logprobs(clean, ids).mean() - next_logprobs(out, ids).mean()
    assert answer["exact"][1][1] == pytest.approx(float(want), abs=1e-5)


@pytest.fixture(scope="module")
def seq2seq_reference(models_dir: Path) -> dict[str, torch.nn.Module]:
    """transformers' own model of each encoder-decoder, eager attention."""
    return {name: seq2seq_eager(models_dir, name) for name in SEQ2SEQ}


@pytest.mark.parametrize("name", ENCODER_DECODERS)
def test_seq2seq_generation_writes_greedily_and_its_stacks_are_transformers_over_it(
    served: tuple[str, TestClient], seq2seq_reference: dict[str, torch.nn.Module], name: str
) -> None:
    """At ≈20 and ≈300 source tokens (past the full-maps budget): the written ids are
    transformers' greedy ``generate``; the generation keeps no map and its three stacks
    (whole, one head, pooled) are transformers' eager maps of the source and the start
    token with every written id."""
    length, client = served
    hf = seq2seq_reference[name]
    text = analysed_text(length, client, name)
    source = torch.tensor([loaded(client, name).tokenize(text).input_ids])
    with torch.inference_mode():
        expected = hf.generate(source, do_sample=False, num_beams=1, max_new_tokens=6)
        out = hf(input_ids=source, decoder_input_ids=expected, output_attentions=True)
    body = {"model": name, "prompt": text, "max_new_tokens": 6, "layers": [2]}
    answers = {}
    for shape in ({}, {"heads": [3]}, {"pool": 4}):
        response = client.post("/api/model/generate", json={**body, **shape})
        assert response.status_code == 200, response.text[:300]
        answers[len(answers)] = response.json()
    whole, one, pooled = answers.values()
    assert whole["generated_ids"] == expected[0, 1:].tolist()
    assert whole["maps_path"] == ("long" if length == "long" else "full")
    stacks = {
        "attentions": out.encoder_attentions[1][0],
        "decoder_attentions": out.decoder_attentions[1][0],
        "cross_attentions": out.cross_attentions[1][0],
    }
    for key, want in stacks.items():
        close(whole[key][0], want)
        close(one[key][0], want[[2]])
        T, S = want.shape[-2:]
        close(pooled[key][0], max_pool(want, [-(-T // 4), -(-S // 4)]))


@pytest.mark.parametrize("name", ENCODER_DECODERS)
@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_seq2seq_induction_equals_transformers_maps_of_the_repeated_block(
    served: tuple[str, TestClient],
    seq2seq_reference: dict[str, torch.nn.Module],
    stack: str,
    name: str,
) -> None:
    """The induction score of the self-attention stacks, summed block by block from a
    pass that holds no map, equals ``induction_score`` of transformers' eager maps of the
    repeated block (the source, or the decoder's input behind its start token; the
    decoder's source ≈300 tokens past the full-maps budget)."""
    length, client = served
    text = analysed_text(length, client, name)
    scores = post(
        client, name, "/api/model/head-scores", text=text, stack=stack, induction_length=20
    )
    model = loaded(client, name)
    close(scores["induction"], eager_induction(seq2seq_reference[name], model, stack, text, scores))


# Each stack's output projections (T5's: ``o`` of SelfAttention and EncDecAttention).
BART_OUT = {
    "encoder": "model.encoder.layers.{}.self_attn.out_proj",
    "decoder": "model.decoder.layers.{}.self_attn.out_proj",
    "cross": "model.decoder.layers.{}.encoder_attn.out_proj",
}
T5_OUT = {
    "encoder": "encoder.block.{}.layer.0.SelfAttention.o",
    "decoder": "decoder.block.{}.layer.0.SelfAttention.o",
    "cross": "decoder.block.{}.layer.1.EncDecAttention.o",
}


def seq2seq_ablated(
    hf: torch.nn.Module, source: list[int], decoder_input: list[int], stack: str, heads: Any
) -> Any:
    """transformers' encoder-decoder with each (layer, head) of ``stack`` (0-based) zeroed
    just before its output projection: the oracle of an encoder-decoder's ablation."""
    H = int(hf.config.num_attention_heads)
    paths = T5_OUT if hf.config.model_type == "t5" else BART_OUT
    with heads_zeroed(hf, paths[stack], H, heads), torch.inference_mode():
        return hf(
            input_ids=torch.tensor([source]),
            decoder_input_ids=torch.tensor([decoder_input]),
            output_hidden_states=True,
        )


@pytest.mark.parametrize("name", LM_HEADS)
@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_seq2seq_ablation_equals_transformers_with_the_heads_zeroed(
    served: tuple[str, TestClient],
    seq2seq_reference: dict[str, torch.nn.Module],
    stack: str,
    name: str,
) -> None:
    """One head, two heads together and each head alone of any stack, read in the decoder's
    log-probabilities of the target's tokens, at ≈20 and ≈300 source tokens (the forward
    holds no map)."""
    length, client = served
    model, text = loaded(client, name), analysed_text(length, client, name)
    source, target = list(model.tokenize(text).input_ids), model.target_text(TARGET)
    labels = torch.tensor(target.labels)

    def logprobs(heads: list[tuple[int, int]]) -> torch.Tensor:
        hf = seq2seq_reference[name]
        out = seq2seq_ablated(hf, source, list(target.input_ids), stack, heads)
        return torch.log_softmax(out.logits[0].float(), -1).gather(-1, labels[:, None])[:, 0]

    clean = logprobs([])
    for heads in ([(0, 1)], [(0, 0), (1, 2)]):
        pairs = [[a + 1, b + 1] for a, b in heads]
        answer = post(client, name, "/api/model/ablate", text=text, heads=pairs, stack=stack)
        assert answer["stack"] == stack and answer["tokens"] == list(target.tokens)
        close(answer["logprobs_before"], clean)
        close(answer["logprobs_after"], logprobs(heads))
        assert answer["loss_after"] == pytest.approx(float(-logprobs(heads).mean()), abs=1e-5)
    each = post(client, name, "/api/model/ablate", text=text, each_head=True, stack=stack)
    grid = each["each_head"]
    for layer, head in [(0, 0), (1, 3)]:
        want = clean.mean() - logprobs([(layer, head)]).mean()
        assert grid[layer][head] == pytest.approx(float(want), abs=1e-5)


def unembedded(hf: torch.nn.Module, name: str, state: torch.Tensor, last: bool) -> torch.Tensor:
    """A decoder state (after a layer) through the LM head as transformers' forward reads the
    last one: T5's final norm (the last state has had it) and, tied, the scale d_model**-0.5;
    BART's and Marian's ``final_logits_bias`` (their decoders have no final norm)."""
    if name in ("t5", "t5-tied"):
        state = state if last else hf.decoder.final_layer_norm(state)
        scale = hf.config.d_model**-0.5 if name == "t5-tied" else 1.0
        logits: torch.Tensor = hf.lm_head(state * scale)
        return logits
    bias: torch.Tensor = hf.final_logits_bias
    return hf.lm_head(state) + bias


@pytest.mark.parametrize("name", LM_HEADS)
def test_seq2seq_logit_lens_equals_transformers_decoder_states_unembedded(
    served: tuple[str, TestClient], seq2seq_reference: dict[str, torch.nn.Module], name: str
) -> None:
    """After each decoder layer, transformers' decoder hidden state through the LM head
    (``unembedded``); the last layer's is the model's own logits.  The encoder's and the
    cross stack's lens say why they have none.  At ≈20 and ≈300 source tokens."""
    length, client = served
    model, hf = loaded(client, name), seq2seq_reference[name]
    text = analysed_text(length, client, name)
    source, target = list(model.tokenize(text).input_ids), model.target_text(TARGET)
    out = seq2seq_ablated(hf, source, list(target.input_ids), "decoder", [])
    lens = post(client, name, "/api/model/logit-lens", text=text)
    hidden = out.decoder_hidden_states
    assert lens["layers"] == len(hidden) - 1 and lens["stack"] == "decoder"
    for layer in range(1, len(hidden)):
        with torch.inference_mode():
            logits = unembedded(hf, name, hidden[layer][0], layer == len(hidden) - 1)
        top = torch.softmax(logits.float(), dim=-1).topk(5, dim=-1)
        close(lens["top_probs"][layer - 1], top.values)
        assert lens["top_ids"][layer - 1] == top.indices.tolist()
    own = torch.softmax(out.logits[0].float(), dim=-1).topk(5, dim=-1)
    close(lens["top_probs"][-1], own.values)
    assert lens["top_ids"][-1] == own.indices.tolist()
    for stack, why in (("encoder", "never by the LM head"), ("cross", "stack 'decoder' reads")):
        response = client.post(
            "/api/model/logit-lens",
            json={"model": name, "text": TEXT, "target": TARGET, "stack": stack},
        )
        assert response.status_code == 422, response.text
        (detail,) = response.json()["detail"]
        assert detail["loc"][-1] == "stack" and why in detail["msg"]


def seq2seq_patching_oracle(
    hf: torch.nn.Module, source: list[int], decoder_input: list[int], labels: list[int]
) -> dict[str, torch.Tensor]:
    """Per stack (L, H): transformers' autograd gradient of the target's mean −log p at each
    head's slice of the output projection's input, times minus that slice (zero ablation),
    summed over positions."""
    H = int(hf.config.num_attention_heads)
    paths = T5_OUT if hf.config.model_type == "t5" else BART_OUT
    contexts: dict[tuple[str, int], torch.Tensor] = {}
    hooks = []
    for stack, path in paths.items():
        for layer in range(2):

            def keep(_m: Any, args: tuple[torch.Tensor, ...], key: Any = (stack, layer)) -> None:
                args[0].retain_grad()
                contexts[key] = args[0]

            hooks.append(hf.get_submodule(path.format(layer)).register_forward_pre_hook(keep))
    try:
        with torch.enable_grad():
            out = hf(
                input_ids=torch.tensor([source]), decoder_input_ids=torch.tensor([decoder_input])
            )
            logp = torch.log_softmax(out.logits[0].float(), -1)
            loss = -logp.gather(-1, torch.tensor(labels)[:, None]).mean()
            loss.backward()
    finally:
        for hook in hooks:
            hook.remove()
        hf.zero_grad(set_to_none=True)
    grids = {}
    for stack in paths:
        rows = []
        for layer in range(2):
            z = contexts[(stack, layer)]
            g, zz = z.grad[0].view(z.shape[1], H, -1), z.detach()[0].view(z.shape[1], H, -1)
            rows.append((g * -zz).sum(dim=(0, 2)))
        grids[stack] = torch.stack(rows)
    return grids


@pytest.mark.parametrize("name", LM_HEADS)
@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_seq2seq_attribution_equals_transformers_gradients_on_every_stack(
    served: tuple[str, TestClient],
    seq2seq_reference: dict[str, torch.nn.Module],
    stack: str,
    name: str,
) -> None:
    """Attribution patching of an encoder-decoder at ≈20 and ≈300 source tokens (one
    forward holding no map, one backward): every stack's estimate is transformers' autograd
    gradient at each head's context times the zero ablation's change, for the decoder's
    loss on the target; with ``exact`` the chosen stack's grid is transformers with each
    head zeroed, and the confirmed heads are those of the largest |estimate|, exactly."""
    length, client = served
    model, text = loaded(client, name), analysed_text(length, client, name)
    hf = seq2seq_reference[name]
    source, target = list(model.tokenize(text).input_ids), model.target_text(TARGET)
    decoder_input = list(target.input_ids)
    want = seq2seq_patching_oracle(hf, source, decoder_input, list(target.labels))
    body = {"method": "exact", "stack": stack, "confirm_top": 2}
    answer = post(client, name, "/api/model/attribute", text=text, **body)
    assert answer["stack"] == stack and answer["tokens"] == list(target.tokens)
    for key, grid in want.items():
        close(answer["stacks"][key], grid)
    close(answer["estimate"], want[stack])
    labels = torch.tensor(target.labels)

    def loss(heads: list[tuple[int, int]]) -> float:
        out = seq2seq_ablated(hf, source, decoder_input, stack, heads)
        logp = torch.log_softmax(out.logits[0].float(), -1)
        return float(-logp.gather(-1, labels[:, None]).mean())

    assert answer["loss"] == pytest.approx(loss([]), abs=1e-5)
    for layer, head in [(0, 0), (1, 3)]:
        want_exact = loss([(layer, head)]) - loss([])
        assert answer["exact"][layer][head] == pytest.approx(want_exact, abs=1e-5)
    order = np.argsort(-np.abs(np.array(answer["estimate"])).ravel())[:2]
    confirmed = answer["confirmed"]
    assert [(c["layer"] - 1) * 4 + c["head"] - 1 for c in confirmed] == order.tolist()
    for c in confirmed:
        exact = answer["exact"][c["layer"] - 1][c["head"] - 1]
        assert c["exact"] == pytest.approx(exact, abs=1e-5)


def test_marian_attribution_says_why_it_needs_a_target_and_refuses_atp_star(
    served: tuple[str, TestClient],
) -> None:
    _, client = served
    body = {"model": "marian", "text": TEXT}
    cases = [
        ({}, "target", "give target"),
        ({"target": {"position": 1, "token": None}}, "target", "the decoder's text"),
        ({"target": TARGET, "method": "atp_star"}, "method", "attribution_patching or exact"),
        ({"target": TARGET, "stack": "sideways"}, "stack", ""),
    ]
    for extra, field, words in cases:
        response = client.post("/api/model/attribute", json={**body, **extra})
        assert response.status_code == 422, response.text
        (detail,) = response.json()["detail"]
        assert detail["loc"][-1] == field and words in detail["msg"]
    one = {"model": "gpt2", "text": TEXT}
    for extra, field in (({"stack": "cross"}, "stack"), ({"target": TARGET}, "target")):
        response = client.post("/api/model/attribute", json={**one, **extra})
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][-1] == field


def test_seq2seq_exact_attribution_over_its_limit_is_refused_on_method(models_dir: Path) -> None:
    """``exact`` ablates each head of the stack: past ATTENTION_VIZ_MAX_ABLATION_CELLS a 422
    on ``method`` with the limit, before any work; attribution patching still answers."""
    body = {"model": "marian", "text": TEXT, "target": TARGET, "stack": "decoder"}
    with _client(models_dir, max_ablation_cells=100) as client:
        response = client.post("/api/model/attribute", json={**body, "method": "exact"})
        assert response.status_code == 422, response.text
        (detail,) = response.json()["detail"]
        assert detail["loc"] == ["body", "method"] and detail["ctx"]["limit"] == 100
        assert detail["msg"].startswith("exact costs the decoder stack's")
        assert client.post("/api/model/attribute", json=body).status_code == 200


def direct_oracle(
    hf: torch.nn.Module, name: str, source: list[int], decoder_input: list[int], labels: Any
) -> dict[str, torch.Tensor]:
    """Per decoder-side stack (L, H): each head's output (its context slice times its slice
    of transformers' output projection) carried through every later norm of the decoder
    stream with the norm's divisor held at the forward's value (Marian's and BART's
    LayerNorms after each sublayer, T5's final RMSNorm and its tied scale), dotted with
    lm_head's row of the target's token, the mean over positions."""
    H = int(hf.config.num_attention_heads)
    t5 = hf.config.model_type == "t5"
    paths = T5_OUT if t5 else BART_OUT
    L = int(hf.config.num_decoder_layers if t5 else hf.config.decoder_layers)
    if t5:
        norms = ["decoder.final_layer_norm"]
        sublayer = {"decoder": [norms[0]] * L, "cross": [norms[0]] * L}
    else:
        names = ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm")
        norms = [f"model.decoder.layers.{n}.{k}" for n in range(L) for k in names]
        sublayer = {"decoder": norms[0::3], "cross": norms[1::3]}
    seen: dict[str, torch.Tensor] = {}
    contexts: dict[tuple[str, int], torch.Tensor] = {}
    hooks = []
    for path in norms:

        def norm_in(_m: Any, args: tuple[torch.Tensor, ...], path: str = path) -> None:
            seen[path] = args[0][0].float()

        hooks.append(hf.get_submodule(path).register_forward_pre_hook(norm_in))
    for stack in ("decoder", "cross"):
        for layer in range(L):

            def keep(_m: Any, args: tuple[torch.Tensor, ...], key: Any = (stack, layer)) -> None:
                contexts[key] = args[0][0].float()

            hooks.append(
                hf.get_submodule(paths[stack].format(layer)).register_forward_pre_hook(keep)
            )
    try:
        with torch.inference_mode():
            hf(input_ids=torch.tensor([source]), decoder_input_ids=torch.tensor([decoder_input]))
    finally:
        for hook in hooks:
            hook.remove()

    def through(path: str, v: torch.Tensor) -> torch.Tensor:
        module, x = hf.get_submodule(path), seen[path]
        if t5:  # RMSNorm: weight · v / rms(x)
            rms = x.pow(2).mean(-1, keepdim=True).add(module.variance_epsilon).sqrt()
            return module.weight * v / rms
        sigma = x.var(-1, unbiased=False, keepdim=True).add(module.eps).sqrt()
        return module.weight * (v - v.mean(-1, keepdim=True)) / sigma

    scale = hf.config.d_model**-0.5 if t5 and name == "t5-tied" else 1.0
    W_U = hf.lm_head.weight.detach().float()[labels] * scale  # (T, C)
    grids = {}
    with torch.inference_mode():
        for stack in ("decoder", "cross"):
            rows = []
            for layer in range(L):
                W = hf.get_submodule(paths[stack].format(layer)).weight.float()  # (C, H·D)
                z = contexts[(stack, layer)]
                D = z.shape[-1] // H
                heads = []
                for h in range(H):
                    v = z[:, h * D : (h + 1) * D] @ W[:, h * D : (h + 1) * D].T  # (T, C)
                    for path in norms[norms.index(sublayer[stack][layer]) :]:
                        v = through(path, v)
                    heads.append((v * W_U).sum(-1).mean())
                rows.append(torch.stack(heads))
            grids[stack] = torch.stack(rows)
    return grids


@pytest.mark.parametrize("name", LM_HEADS)
def test_seq2seq_direct_logit_attribution_equals_a_direct_computation(
    served: tuple[str, TestClient], seq2seq_reference: dict[str, torch.nn.Module], name: str
) -> None:
    """The decoder's and cross-attention's heads' direct logit attribution equals
    ``direct_oracle`` from transformers' modules; the encoder's heads have none (null)."""
    length, client = served
    model, text = loaded(client, name), analysed_text(length, client, name)
    hf = seq2seq_reference[name]
    source, target = list(model.tokenize(text).input_ids), model.target_text(TARGET)
    labels = torch.tensor(target.labels)
    want = direct_oracle(hf, name, source, list(target.input_ids), labels)
    for stack, grid in want.items():
        answer = post(client, name, "/api/model/attribute", text=text, stack=stack)
        close(answer["direct"], grid)
    assert post(client, name, "/api/model/attribute", text=text)["direct"] is None
