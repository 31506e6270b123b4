"""Head-type scores of encoder-decoders (T5, BART): the encoder's and the decoder's
self-attention, equal to the definitions on transformers' eager maps; through the API, with
cross-attention, ablation, the logit lens and value-weighted maps refused by a 422 naming the
field."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.models.checkpoints import make_gpt2
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.models.test_head_analysis import reference_scores
from tests.requires import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SOURCE = "The cat sat on the mat, and the cat was tired because the mat was hard."
TARGET = "Die Katze sass auf der Matte, und die Katze war muede."
NAMES = {"tiny-t5": "t5", "tiny-bart": "bart"}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("scored-seq2seq")
    for name, model_type in NAMES.items():
        make_seq2seq(root / name, model_type)
    make_gpt2(root / "tiny-gpt2")
    return root


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    settings = Settings(models=str(models_dir), hf_cache=False)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def eager(models_dir: Path, name: str) -> Any:
    transformers = require("transformers")
    return transformers.AutoModelForSeq2SeqLM.from_pretrained(
        models_dir / name, attn_implementation="eager", local_files_only=True
    ).eval()


def eager_maps(
    model: Any, source: Sequence[int], decoder_input: Sequence[int], stack: str
) -> torch.Tensor:
    """(L, H, T, T) of one self-attention stack, transformers' eager weights."""
    with torch.inference_mode():
        out = model(
            input_ids=torch.tensor([list(source)]),
            decoder_input_ids=torch.tensor([list(decoder_input)]),
            output_attentions=True,
        )
    found = out.encoder_attentions if stack == "encoder" else out.decoder_attentions
    return torch.stack([a[0] for a in found]).double()


@pytest.mark.parametrize("name", sorted(NAMES))
@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_self_attention_scores_are_the_definitions_on_transformers_eager_maps(
    name: str, stack: str, models_dir: Path
) -> None:
    from attention_core.analysis.seq2seq_scores import score_stack
    from attention_core.models.hf.seq2seq import EncoderDecoder

    ours = EncoderDecoder.from_dir(models_dir / name, max_tokens=64)
    reference = eager(models_dir, name)
    scored, result = score_stack(ours, SOURCE, TARGET, stack, seed=3)
    assert scored == stack
    pair = ours.encode_pair(SOURCE, TARGET)
    source, decoder_input = pair.source.input_ids, pair.target.input_ids
    ids = source if stack == "encoder" else decoder_input
    assert len(set(ids)) < len(ids)  # repeats: the duplicate-token score is not trivial
    maps = eager_maps(reference, source, decoder_input, stack)
    expected = reference_scores(maps, ids)
    seq, start, R = result.induction_ids, result.induction_start, result.induction_length
    assert seq[start : start + R] == seq[start + R : start + 2 * R]
    if stack == "encoder":  # the block is the source; the decoder at its start token
        repeated = eager_maps(reference, seq, [ours.start_id], stack)
    else:  # the block is the decoder's input behind its start token
        assert seq[0] == ours.start_id and start == 1 and len(seq) == 1 + 2 * R
        repeated = eager_maps(reference, source, seq, stack)
    rows = torch.arange(start + R, start + 2 * R)
    expected["induction"] = repeated[..., rows, rows - R + 1].mean(-1)
    for score, value in result.scores.as_dict().items():
        torch.testing.assert_close(value.double(), expected[score], atol=2e-6, rtol=1e-5)


def test_the_api_scores_either_stack_and_refuses_the_rest_by_field(
    client: TestClient, models_dir: Path
) -> None:
    from attention_core.analysis.seq2seq_scores import score_stack
    from attention_core.models.hf.seq2seq import EncoderDecoder

    url = "/api/model/head-scores"
    encoder = client.post(url, json={"model": "tiny-bart", "text": SOURCE, "seed": 2})
    decoder = client.post(
        url,
        json={"model": "tiny-bart", "text": SOURCE, "target": TARGET, "stack": "decoder"},
    )
    assert encoder.status_code == decoder.status_code == 200, (encoder.text, decoder.text)
    enc, dec = encoder.json(), decoder.json()
    assert (enc["stack"], enc["causal"], dec["stack"], dec["causal"]) == (
        "encoder",
        False,
        "decoder",
        True,
    )
    assert dec["tokens"][1:4] != enc["tokens"][1:4]  # the target's rows, not the source's
    model = EncoderDecoder.from_dir(models_dir / "tiny-bart", max_tokens=512)
    _, expected = score_stack(model, SOURCE, TARGET, "decoder", seed=0)
    for score, value in expected.scores.as_dict().items():
        torch.testing.assert_close(torch.tensor(dec[score]), value.float())

    def refused(path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = client.post(path, json=body)
        assert response.status_code == 422, response.text
        (detail,) = response.json()["detail"]
        return detail  # type: ignore[no-any-return]

    cross = client.post(
        url, json={"model": "tiny-bart", "text": SOURCE, "target": TARGET, "stack": "cross"}
    )  # the scores that apply to cross-attention, the others named as not applying
    assert cross.status_code == 200, cross.text
    crossed = cross.json()
    assert crossed["not_applicable"] == ["previous_token", "duplicate_token", "induction"]
    assert crossed["previous_token"] is None and len(crossed["diagonal"]) == 2
    maps = torch.stack(model.encode_pair(SOURCE, TARGET).cross_attentions)  # (L, H, T, S)
    torch.testing.assert_close(torch.tensor(crossed["first_token"]), maps[..., 0].mean(-1))
    T, S = maps.shape[-2:]
    diagonal = ((torch.arange(T) + 0.5) * S / T).floor().long().clamp_max(S - 1)
    want = maps[..., torch.arange(T), diagonal].mean(-1)
    torch.testing.assert_close(torch.tensor(crossed["diagonal"]), want)
    bad = refused(url, {"model": "tiny-bart", "text": SOURCE, "stack": "sideways"})
    assert bad["loc"] == ["body", "stack"]
    alone = refused(url, {"model": "tiny-t5", "text": SOURCE, "stack": "decoder"})
    assert alone["loc"] == ["body", "target"]
    one_stack = refused(url, {"model": "tiny-gpt2", "text": SOURCE, "target": TARGET})
    assert one_stack["loc"] == ["body", "target"]
    # Ablation reads the decoder's predictions of a target; the lens the decoder's states.
    untargeted = refused(
        "/api/model/ablate", {"model": "tiny-t5", "text": SOURCE, "heads": [[1, 1]]}
    )
    assert untargeted["loc"] == ["body", "target"] and "give target" in untargeted["msg"]
    encoder_lens = {"model": "tiny-t5", "text": SOURCE, "stack": "encoder"}
    detail = refused("/api/model/logit-lens", encoder_lens)
    assert detail["loc"] == ["body", "stack"] and "never by the LM head" in detail["msg"]
    cell = {"layer": 1, "head": 1, "row": 1, "col": 0}
    why = client.post("/api/model/why", json={"model": "tiny-t5", "text": SOURCE, **cell})
    assert why.status_code == 200 and why.json()["stack"] == "encoder"  # test_stack_matrix.py
    weighted = client.post(
        "/api/model/attention",
        json={"model": "tiny-t5", "text": SOURCE, "measure": "value_norm"},
    )  # value-weighted maps of every stack (tests/models/test_stack_matrix.py checks them)
    assert weighted.status_code == 200, weighted.text
    assert len(weighted.json()["cross_attentions"]) == 2
