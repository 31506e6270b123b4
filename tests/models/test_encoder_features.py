"""Head average, rollout, hiding [CLS]/[SEP], word comparison, word vectors, transport."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
import torch

from attention_core.errors import SpecError
from attention_core.models import (
    UINT8_MAX_ABS_ERROR,
    Encoder,
    EncoderOutput,
    attention_rollout,
    decode_compact,
    encode_compact,
    head_average,
    hidden_tokens,
    hide_special,
    kept_tokens,
)

pytestmark = pytest.mark.model

HFRun = Callable[[tuple[int, ...], tuple[int, ...]], tuple[torch.Tensor, torch.Tensor]]

RIVER = "the river bank was muddy"
FINANCE = "the bank approved the loan"


@pytest.fixture(scope="module")
def river(encoder: Encoder) -> EncoderOutput:
    return encoder.encode(RIVER)


def test_head_average(river: EncoderOutput) -> None:
    avg = head_average(river.attentions)
    assert avg.shape == (6, 7, 7)
    torch.testing.assert_close(avg[2], river.attentions[2].sum(0) / 12)


def test_rollout_is_the_product_of_residual_mixed_layers(river: EncoderOutput) -> None:
    rollout = attention_rollout(river.attentions)
    assert rollout.shape == (6, 7, 7)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(6, 7))
    eye = torch.eye(7)
    mixed = [0.5 * a.mean(0) + 0.5 * eye for a in river.attentions]
    expected = mixed[0]
    for layer in range(1, 6):
        expected = mixed[layer] @ expected
    torch.testing.assert_close(rollout[-1], expected)
    torch.testing.assert_close(rollout[0], mixed[0])


def test_rollout_residual_extremes(river: EncoderOutput) -> None:
    torch.testing.assert_close(attention_rollout(river.attentions, residual=1.0)[-1], torch.eye(7))
    with pytest.raises(SpecError):
        attention_rollout(river.attentions, residual=1.5)


def test_hide_special_drops_and_renormalizes(river: EncoderOutput) -> None:
    special = river.tokenized.special
    hidden = hide_special(river.attentions, special)
    assert hidden.shape == (6, 12, 5, 5)
    assert kept_tokens(river.tokens, special) == ("the", "river", "bank", "was", "muddy")
    torch.testing.assert_close(hidden.sum(-1), torch.ones(6, 12, 5))
    inner = river.attentions[3, 4, 1:-1, 1:-1]
    torch.testing.assert_close(hidden[3, 4], inner / inner.sum(-1, keepdim=True))
    # Proportions between kept tokens are unchanged.
    ratio = river.attentions[0, 0, 2, 3] / river.attentions[0, 0, 2, 4]
    torch.testing.assert_close(hidden[0, 0, 1, 2] / hidden[0, 0, 1, 3], ratio)


def test_hidden_tokens_are_the_special_ones_and_the_first() -> None:
    assert hidden_tokens([True, False, False, True]) == (True, False, False, True)
    assert hidden_tokens([False, False, False]) == (True, False, False)  # a decoder's sink
    assert hidden_tokens([False, True], first=False) == (False, True)


def test_hide_special_on_rollout_and_errors(river: EncoderOutput) -> None:
    rollout = hide_special(attention_rollout(river.attentions), river.tokenized.special)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(6, 5))
    with pytest.raises(SpecError, match="every token is a special or the first token"):
        hide_special(torch.full((2, 2), 0.5), [True, True])
    with pytest.raises(SpecError, match="3 flags for 7 tokens"):
        hide_special(river.attentions, [False] * 3)


def test_compare_bank_in_two_texts(encoder: Encoder, hf_run: HFRun) -> None:
    result = encoder.compare_word(RIVER, FINANCE, "bank")
    assert result.span_a == (3, 4) and result.span_b == (2, 3)
    assert len(result.cosines) == 7
    # Layer 0: same word vector and segment, different position embedding
    # (position 3 vs 2), so close to but not exactly 1.
    assert 0.95 < result.cosines[0] < 0.9999
    # Context pulls the two "bank"s apart: the last layer is further than layer 0.
    assert result.cosines[-1] < result.cosines[0] - 0.1
    # Same numbers from Hugging Face's hidden states.
    a, b = encoder.tokenize(RIVER), encoder.tokenize(FINANCE)
    hidden_a = hf_run(a.input_ids, a.token_type_ids)[1][:, 3]
    hidden_b = hf_run(b.input_ids, b.token_type_ids)[1][:, 2]
    expected = torch.nn.functional.cosine_similarity(hidden_a, hidden_b, dim=-1)
    torch.testing.assert_close(torch.tensor(result.cosines), expected)


def test_same_position_gives_layer0_cosine_one(encoder: Encoder) -> None:
    result = encoder.compare_word("the bank was muddy", FINANCE, "bank")
    assert result.cosines[0] == pytest.approx(1.0, abs=1e-6)
    assert result.cosines[-1] < 0.95


def test_compare_word_split_into_pieces(encoder: Encoder) -> None:
    result = encoder.compare_word(
        "tokenization is hard", "we studied tokenization today", "Tokenization"
    )
    assert result.pieces == ("token", "##ization")
    assert result.span_a == (1, 3) and result.span_b == (3, 5)
    out_a = encoder.encode("tokenization is hard")
    out_b = encoder.encode("we studied tokenization today")
    expected = torch.nn.functional.cosine_similarity(
        out_a.hidden_states[:, 1:3].mean(1), out_b.hidden_states[:, 3:5].mean(1), dim=-1
    )
    torch.testing.assert_close(torch.tensor(result.cosines), expected.clamp(-1, 1))


def test_compare_word_absent_is_an_error(encoder: Encoder) -> None:
    with pytest.raises(SpecError, match="'loan'.*text_a") as error:
        encoder.compare_word(RIVER, FINANCE, "loan")
    assert error.value.field == "text_a"
    # Whole words only: "bank" is not inside "banking" (bank ##ing).
    with pytest.raises(SpecError) as error:
        encoder.compare_word(RIVER, "online banking works", "bank")
    assert error.value.field == "text_b"
    with pytest.raises(SpecError) as error:
        encoder.compare_word(RIVER, FINANCE, "  ")
    assert error.value.field == "word"


def test_word_vectors_are_embedding_rows(encoder: Encoder) -> None:
    vectors = encoder.word_vectors(["bank", "Tokenization", "loan"])
    assert vectors.shape == (3, 384)
    table = encoder.embeddings.word
    bank_id = encoder.tokenize("bank").input_ids[1]
    torch.testing.assert_close(vectors[0], table[bank_id])
    ids = encoder.tokenize("tokenization").input_ids[1:-1]
    assert len(ids) == 2
    torch.testing.assert_close(vectors[1], table[list(ids)].mean(0))
    with pytest.raises(SpecError) as error:
        encoder.word_vectors(["bank", ""])
    assert error.value.field == "words" and "words[1]" in error.value.message
    with pytest.raises(SpecError):
        encoder.word_vectors([])


@pytest.mark.parametrize("dtype", ["uint8", "float16"])
def test_compact_round_trip(river: EncoderOutput, dtype: str) -> None:
    layer = river.attentions[2]
    compact = encode_compact(layer, dtype)
    raw = base64.b64decode(compact.data)
    assert len(raw) == layer.numel() * (1 if dtype == "uint8" else 2)
    decoded = decode_compact(compact)
    assert decoded.shape == layer.shape
    bound = UINT8_MAX_ABS_ERROR if dtype == "uint8" else 2.0**-12
    assert (decoded - layer).abs().max().item() <= bound
    description = compact.describe()
    assert description["shape"] == [12, 7, 7] and description["max_abs_error"] == bound


def test_uint8_error_bound_is_tight() -> None:
    # Worst case: exactly half a step away from a representable value.
    weights = torch.tensor([0.5 / 255, 1.5 / 255, 1.0, 0.0])
    decoded = decode_compact(encode_compact(weights))
    assert (decoded - weights).abs().max().item() <= UINT8_MAX_ABS_ERROR + 1e-9
    assert decoded[2] == 1.0 and decoded[3] == 0.0
    with pytest.raises(SpecError):
        encode_compact(weights, "int4")
