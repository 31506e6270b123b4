"""Attribution patching, AtP* and one cell's QK decomposition vs one forward; rank correlations.

On a GPT-2-small-shaped random model, side by side with one forward pass; each
estimator's rank correlation with exact ablation.

    .venv/bin/python bench/bench_attribution.py [--rounds 3] [--threads 1] [--record]

Timings (medians of ``rounds``, each pair back to back, alternating which goes first):

- every head's attribution-patching estimate (``attribute``, one forward and one backward
  with the gradient kept at every head's context) at T = 128 and T = 1,024 vs one forward
  pass with the logits of every position at the same T: goal ≤ 3× (exact each-head
  ablation: 84.6× at T = 128, bench_heads.py);
- AtP* at T = 128, the same baseline;
- one cell's decomposition (``why``, layer 12, the last row and a column half-way) at
  T = 1,024 vs one forward: goal ≤ 1×.

Rank correlations (Spearman, the 144 or 8 heads' Δloss) of attribution patching, AtP* and
direct logit attribution with exact each-head ablation, and of |AtP*| and AtP*'s GradDrop
score (unsigned, what the paper ranks heads by) with |exact|: on the shipped tiny-bank-gpt's two
"money" sentences, the target the model's own next letter at the last position, and on the
random GPT-2-small shape at T = 64 (the text's next-token loss), zero and mean ablation.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_heads import FORWARDS, decoder, pair, text_of  # noqa: E402
from random_gpt2 import gpt2_small  # noqa: E402
from record import machine, record  # noqa: E402

from attention_core.analysis import head_model  # noqa: E402
from attention_core.analysis.attribution import Target, attribute  # noqa: E402
from attention_core.analysis.qk_decomposition import why  # noqa: E402
from attention_core.models import GPT2, Decoder  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "attention_core/models/builtin/tiny-bank-gpt"
MONEY = ("Kim counted the cash, then went to the bank ", "Ann needed a loan, then ran to the bank ")
RUN = ".venv/bin/python bench/bench_attribution.py [--rounds 3] [--threads 1] [--record]"


def rank_correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    ra, rb = (x.flatten().argsort().argsort().double() for x in (a, b))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra @ rb) / (ra.norm() * rb.norm()))


def correlations(d: Decoder, text: str, target_last: bool) -> dict[str, list[float]]:
    """Per estimator, its rank correlation with exact ablation, zero then mean."""
    heads = head_model(d)
    ids = heads.tokenize(text).ids
    target: Target = None
    if target_last:
        with torch.no_grad():
            final = heads.run(torch.tensor([list(ids)])).hidden[-1]  # type: ignore[attr-defined]
        target = (len(ids) - 1, int(heads.unembed(final[0, -1]).argmax()))  # type: ignore[attr-defined]
    out: dict[str, list[float]] = {
        "attribution patching": [],
        "AtP*": [],
        "direct logit": [],
        "|AtP*| with |exact|": [],
        "AtP* GradDrop score with |exact|": [],
    }
    for mode in ("zero", "mean"):
        exact = attribute(heads, ids, "exact", mode, target)
        star = attribute(heads, ids, "atp_star", mode, target)
        assert exact.exact is not None
        out["attribution patching"].append(rank_correlation(exact.estimate, exact.exact))
        out["AtP*"].append(rank_correlation(star.estimate, exact.exact))
        # Removing a head that writes +logit on the scored token raises the loss: same sign.
        out["direct logit"].append(rank_correlation(exact.direct, exact.exact))
        # The paper ranks heads by the unsigned GradDrop score: against the size of the effect.
        assert star.graddrop is not None
        out["|AtP*| with |exact|"].append(rank_correlation(star.estimate.abs(), exact.exact.abs()))
        out["AtP* GradDrop score with |exact|"].append(
            rank_correlation(star.graddrop, exact.exact.abs())
        )
    return out


def timings(d: Decoder, rounds: int) -> list[dict[str, object]]:
    heads = head_model(d)
    rows: list[dict[str, object]] = []
    for T, method, goal in (
        (128, "attribution_patching", "<= 3x"),
        (1024, "attribution_patching", "<= 3x"),
        (128, "atp_star", ""),
    ):
        ids = d.tokenize(text_of(d, T, T)).input_ids
        batch = torch.tensor([ids])

        def estimate(ids: list[int] = ids, method: str = method) -> object:
            return attribute(heads, ids, method, "zero")

        def forwards(batch: torch.Tensor = batch) -> object:
            with torch.inference_mode():
                return [d.model(batch) for _ in range(FORWARDS)]

        e, f5 = pair(rounds, estimate, forwards)
        f = f5 / FORWARDS
        print(f"{method} T={T}: {e:.0f} ms; one forward with logits: {f:.0f} ms; ratio {e / f:.2f}")
        rows.append(
            {
                "figure": f"every head's {method.replace('_', ' ')} estimate (144 heads), T = {T}",
                "value": round(e / f, 2),
                "unit": "x forward",
                "baseline": f"one forward with logits, T = {T}: {f:.0f} ms",
                "ratio": round(e / f, 2),
                "goal": goal or "",
                "note": f"{e:.0f} ms; exact each-head ablation: 84.6x at T = 128",
            }
        )
    ids = d.tokenize(text_of(d, 1024, 7)).input_ids
    batch = torch.tensor([ids])

    def cell() -> object:
        return why(heads, ids, 11, 0, 1023, 512)

    def forwards() -> object:
        with torch.inference_mode():
            return [d.model(batch) for _ in range(FORWARDS)]

    w, f5 = pair(rounds, cell, forwards)
    f = f5 / FORWARDS
    print(
        f"why (layer 12, row 1023) T=1024: {w:.0f} ms; one forward: {f:.0f} ms; ratio {w / f:.2f}"
    )
    rows.append(
        {
            "figure": "one cell's QK decomposition (layer 12 of 12, row 1023), T = 1,024",
            "value": round(w / f, 2),
            "unit": "x forward",
            "baseline": f"one forward with logits, T = 1,024: {f:.0f} ms",
            "ratio": round(w / f, 2),
            "goal": "<= 1x",
            "note": f"{w:.0f} ms",
        }
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--record", action="store_true", help="write bench/results/")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"load average {os.getloadavg()[0]:.2f}; threads {args.threads}")
    bank = Decoder.from_dir(SHIPPED, GPT2.from_pretrained, "gpt2")
    rows: list[dict[str, object]] = []
    for text in MONEY:
        for name, rhos in correlations(bank, text, True).items():
            print(f"tiny-bank-gpt {text!r}: {name} rho zero {rhos[0]:.2f} mean {rhos[1]:.2f}")
            rows.append(_rho_row(f"tiny-bank-gpt, {text.split(',')[0]!r}…", name, rhos))
    small = decoder(gpt2_small())
    text = text_of(small, 64, 3)
    for name, rhos in correlations(small, text, False).items():
        print(f"GPT-2-small shape, T=64: {name} rho zero {rhos[0]:.2f} mean {rhos[1]:.2f}")
        rows.append(_rho_row("GPT-2-small shape (random), T = 64, next-token loss", name, rhos))
    rows += timings(small, args.rounds)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    if args.record:
        command = " ".join([".venv/bin/python bench/bench_attribution.py", *sys.argv[1:]])
        for row in rows:
            row.update(machine=machine(), command=command)
            if not row.get("goal"):
                row.pop("goal", None)
        record("bench/bench_attribution.py", __doc__.split("\n")[0], RUN, rows)  # type: ignore[arg-type]


def _rho_row(where: str, name: str, rhos: list[float]) -> dict[str, object]:
    return {
        "figure": f"rank correlation with exact ablation: {name}, {where}",
        "value": f"{rhos[0]:.2f} / {rhos[1]:.2f}",
        "unit": "rho (zero / mean)",
        "note": "Spearman over every head's Δloss",
    }


if __name__ == "__main__":
    main()
