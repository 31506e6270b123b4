"""Small random encoder-decoder checkpoints (T5, BART, Marian), made here (no download).

Each is transformers' random model from a tiny config (2 + 2 layers, d_model 32,
4 heads) written with ``save_pretrained``, beside a ``tokenizer.json`` trained by
``tokenizers`` on a few lines and a ``tokenizer_config.json`` naming
``PreTrainedTokenizerFast``, so ``AutoTokenizer`` loads the same tokenizer offline
(Marian's own tokenizer needs SentencePiece files; this one is what the app and
transformers both read).  Weights are drawn at 20x transformers' scale, as the
decoders' in ``checkpoints.py``: greedy decoding then has no near-ties.

The generation settings are the real checkpoints' kind: Marian starts the target
with ``<pad>`` and never writes it (``bad_words_ids``), BART starts with ``</s>``
and is forced to write ``<s>`` first; both are forced to end with ``</s>`` at the
length limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from tests.models.checkpoints import LINES, randomize_norms

# Target-side lines (the "translations"): the tokenizer learns both languages.
TARGET_LINES = [
    "Die Katze sass auf der Matte, weil sie muede war.",
    "Die Bank hat den Kredit bewilligt, und das Flussufer war schlammig.",
    "Ein Hund lief im Park; die Kinder lachten darueber.",
] * 4

# model type -> special tokens, in id order (id 0 first)
SPECIALS = {
    "t5": ["<pad>", "</s>", "<unk>"],
    "marian": ["</s>", "<unk>", "<pad>"],
    "bart": ["<s>", "<pad>", "</s>", "<unk>"],
}


def seq2seq_tokenizer(model_type: str, vocab_size: int = 200) -> Any:
    """A SentencePiece-style BPE (spaces as ``▁``): ``$A </s>`` (T5, Marian) or
    ``<s> $A </s>`` (BART), with the model type's special tokens first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = SPECIALS[model_type]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False
    )
    tokenizer.train_from_iterator(LINES + TARGET_LINES, trainer)
    ids = [("</s>", tokenizer.token_to_id("</s>"))]
    if model_type == "bart":
        ids.append(("<s>", tokenizer.token_to_id("<s>")))
        single, pair = "<s> $A </s>", "<s> $A </s> </s> $B </s>"
    else:
        single, pair = "$A </s>", "$A </s> $B </s>"
    tokenizer.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=ids
    )
    return tokenizer


def _tokenizer_config(model_type: str) -> dict[str, Any]:
    specials = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    if model_type == "bart":
        specials["bos_token"] = "<s>"
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 64, **specials}


def _config(model_type: str, vocab: dict[str, int], vocab_size: int, **overrides: Any) -> Any:
    import transformers

    eos, pad = vocab["</s>"], vocab["<pad>"]
    sizes: dict[str, Any]
    if model_type == "t5":
        sizes = {
            "d_model": 32,
            "d_kv": 8,
            "d_ff": 64,
            "num_layers": 2,
            "num_decoder_layers": 2,
            "num_heads": 4,
            "relative_attention_num_buckets": 8,
            "relative_attention_max_distance": 16,
            "feed_forward_proj": "gated-gelu",
            "tie_word_embeddings": False,
            "pad_token_id": pad,
            "eos_token_id": eos,
            "decoder_start_token_id": pad,
        }
        return transformers.T5Config(vocab_size=vocab_size, **{**sizes, **overrides})
    sizes = {
        "d_model": 32,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
        "max_position_embeddings": 64,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "forced_eos_token_id": eos,
        "init_std": 0.4,
    }
    if model_type == "bart":
        bos = vocab["<s>"]
        sizes |= {"bos_token_id": bos, "decoder_start_token_id": eos}
        return transformers.BartConfig(vocab_size=vocab_size, **{**sizes, **overrides})
    sizes |= {"decoder_start_token_id": pad, "scale_embedding": True}
    return transformers.MarianConfig(vocab_size=vocab_size, **{**sizes, **overrides})


def _generation_settings(model_type: str, vocab: dict[str, int]) -> dict[str, Any]:
    """What the real checkpoints' ``generation_config.json`` says beyond the token ids."""
    if model_type == "marian":
        return {"bad_words_ids": [[vocab["<pad>"]]]}
    if model_type == "bart":
        return {"forced_bos_token_id": vocab["<s>"]}
    return {}


MODEL_CLASSES = {
    "t5": "T5ForConditionalGeneration",
    "bart": "BartForConditionalGeneration",
    "marian": "MarianMTModel",
}


def make_seq2seq(
    directory: Path,
    model_type: str,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    **overrides: Any,
) -> Path:
    """A random ``model_type`` (t5, bart, marian) encoder-decoder with its tokenizer,
    saved in ``dtype``."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = seq2seq_tokenizer(model_type)
    vocab = tokenizer.get_vocab()
    size = overrides.pop("vocab_size", tokenizer.get_vocab_size())  # larger: ids unused
    config = _config(model_type, vocab, size, **overrides)
    torch.manual_seed(seed)
    model = getattr(transformers, MODEL_CLASSES[model_type])(config)
    with torch.no_grad():
        for param in model.parameters():
            if model_type == "t5" and param.dim() == 2:
                param.normal_(std=0.4)  # T5's init is tiny; BART and Marian's is init_std
        randomize_norms(model)
        bias = getattr(model, "final_logits_bias", None)  # BART, Marian: a buffer, zeros
        if bias is not None:
            bias.normal_(std=2.0)
    model.generation_config = transformers.GenerationConfig.from_model_config(config)
    model.generation_config.update(**_generation_settings(model_type, vocab))
    model.to(dtype).save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(_tokenizer_config(model_type), indent=2)
    )
    return directory


# name -> model type.  The directory name is the model's name.
SEQ2SEQ = {"tiny-t5": "t5", "tiny-bart": "bart", "tiny-marian": "marian"}

# Encoder-decoders that compute attention in their own code, each 2 + 2 layers, d_model 32
# (LED: Longformer's sliding-window encoder; BigBird-Pegasus: block-sparse, refused).
# BART's tokenizer: <s> 0, <pad> 1, </s> 2.
OWN_CODE_SEQ2SEQ: dict[str, dict[str, Any]] = {
    "fsmt": {"langs": ["en", "de"], "max_length": 32},
    "led": {"attention_window": [4, 4], "max_encoder_position_embeddings": 64},
    # BigBird-Pegasus: its encoder's block-sparse attention is its own code (no adapter).
    "bigbird_pegasus": {"block_size": 4, "num_random_blocks": 2},
}


def make_own_code_seq2seq(directory: Path, model_type: str) -> Path:
    """A random checkpoint of ``OWN_CODE_SEQ2SEQ`` (FSMT, LED...) with its tokenizer."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = seq2seq_tokenizer("bart")
    size = tokenizer.get_vocab_size()
    vocab = {"src_vocab_size": size, "tgt_vocab_size": size} if model_type == "fsmt" else {}
    config = transformers.AutoConfig.for_model(
        model_type,
        vocab_size=size,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        max_decoder_position_embeddings=64,
        bos_token_id=0,
        pad_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=2,
        **vocab,
        **OWN_CODE_SEQ2SEQ[model_type],
    )
    torch.manual_seed(0)
    transformers.AutoModelForSeq2SeqLM.from_config(config).save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(_tokenizer_config("bart"), indent=2)
    )
    return directory


def eager_induction(
    hf: Any, model: Any, stack: str, text: str, answer: dict[str, Any]
) -> torch.Tensor:
    """(L, H): ``induction_score`` of transformers' eager maps (``hf``) of a head-scores
    ``answer``'s repeated block: the source of the encoder stack (the decoder at its start
    token), or the decoder's input behind its start token (the source: ``text``)."""
    from attention_core.analysis.scores import induction_score

    ids = answer["induction_ids"]
    source, decoder_input = ids, [model.start_id]
    if stack == "decoder":
        source, decoder_input = list(model.tokenize(text).input_ids), ids
    with torch.inference_mode():
        out = hf(
            input_ids=torch.tensor([source]),
            decoder_input_ids=torch.tensor([decoder_input]),
            output_attentions=True,
        )
    maps = out.encoder_attentions if stack == "encoder" else out.decoder_attentions
    return induction_score(torch.cat(maps), answer["induction_start"], answer["induction_length"])
