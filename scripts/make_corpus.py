"""Write the default training text: simple English where "bank" means the river or the money.

Every sentence names its sense early (a fish, a boat, the reeds; the cash, a
loan, the rent), goes "... to the bank" with the same words either way, and
only then says something that fits one sense, starting with a letter that
only that sense's endings start with: so a character model can guess what
follows "bank " only by looking back at the deciding word, which is what a
trained attention head is seen doing.  Some sentences say nothing of banks.

The text is ours (CC0, see attention_core/training/data/README.md) and a
pure function of the seed:

    python scripts/make_corpus.py --seed 0 --out attention_core/training/data/bank_stories.txt
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent.parent / (
    "attention_core/training/data/bank_stories.txt"
)

SUBJECTS = [
    "Ann", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jo",
    "Kim", "Lea", "Max", "Nia", "Omar", "Pia", "Ravi", "Sam", "Tess", "Uma",
    "the boy", "the girl", "my aunt", "our cook", "the old man", "her uncle",
]  # fmt: skip
TRAVEL = ["went", "walked", "ran", "hurried", "drove"]
PLACES = ["to the bank", "down to the bank"]

SENSES: dict[str, dict[str, list[str]]] = {
    "river": {
        "cue": [
            "caught a fish", "rowed the boat", "fed the ducks", "cut some reeds",
            "swam in the river", "walked by the stream", "waded in the water",
            "dug in the mud", "cast a fishing line", "paddled the canoe",
        ],
        # Every river ending starts with b, u, n or o ...
        "after": [
            "beside the reeds", "by the cold water", "under the willows", "under a tall tree",
            "near the ducks", "near the old mill", "on the wet grass", "on the muddy side",
            "beneath the bridge", "next to the frogs",
        ],
    },
    "money": {
        "cue": [
            "counted the cash", "earned some money", "needed a loan", "saved the coins",
            "got a salary", "owed the rent", "wrote a cheque", "sold the car",
            "found a gold coin", "lost a wallet",
        ],
        # ... and every money ending with f, w, t or a: the first letter after "bank "
        # is decided by the cue word alone.
        "after": [
            "for a loan", "for the clerk", "with the cash", "with a cheque", "to pay the rent",
            "to open an account", "at the counter", "at noon to save", "and paid the interest",
            "and signed the forms",
        ],
    },
}  # fmt: skip
FILLERS = [
    "The sun was warm.", "It rained all night.", "The day was quiet.", "Then it was time for tea.",
    "Nobody said a word.", "The wind came from the west.", "It was a long week.",
    "Everyone was tired.", "The town was asleep.", "A dog barked twice.",
]  # fmt: skip


def sentence(rng: random.Random) -> str:
    """One sentence: the cue, the neutral way to the bank, then a sense-bound ending."""
    sense = SENSES[rng.choice(sorted(SENSES))]
    subject = rng.choice(SUBJECTS)
    text = (
        f"{subject} {rng.choice(sense['cue'])}, then {rng.choice(TRAVEL)} "
        f"{rng.choice(PLACES)} {rng.choice(sense['after'])}."
    )
    return text[0].upper() + text[1:]


def paragraph(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(3, 5)):
        parts.append(rng.choice(FILLERS) if rng.random() < 0.15 else sentence(rng))
    return " ".join(parts)


def make_corpus(seed: int, size: int) -> str:
    """Paragraphs, one a line, until the text holds about ``size`` characters."""
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    while total < size:
        line = paragraph(rng)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=300_000, help="characters, roughly")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    text = make_corpus(args.seed, args.size)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {len(text)} characters to {args.out}")


if __name__ == "__main__":
    main()
