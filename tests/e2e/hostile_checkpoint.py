"""A random GPT-2 whose every token is markup, in a directory whose name has markup
and quotes: what the pages must show as text and never run."""

from __future__ import annotations

from pathlib import Path

import torch

# Each is one whole token (no spaces: the tokenizer splits on spaces).
MARKUP = [
    "<img/src=x/onerror=window.__xss=1>",
    "<script>window.__xss=2</script>",
    '"><svg/onload=window.__xss=3>',
    "<b>bold</b>",
    "&lt;amp&amp;",
    "'onmouseover='window.__xss=4",
]
WORDS = ["the", "cat", "sat", "on", "mat", "bank", "river", "."]
NAME = "evil\"'<b>model"


def make_hostile_gpt2(directory: Path) -> Path:
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {token: i for i, token in enumerate(["<|endoftext|>", "[UNK]", *MARKUP, *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(["<|endoftext|>"])
    config = transformers.GPT2Config(
        vocab_size=len(vocab),
        n_positions=32,
        n_embd=16,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
        initializer_range=0.4,
    )
    torch.manual_seed(0)
    directory.mkdir(parents=True, exist_ok=True)
    transformers.GPT2LMHeadModel(config).save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory
