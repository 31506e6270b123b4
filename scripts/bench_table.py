"""Write bench/README.md and docs/benchmarks.md from the recorded results, bench/results/*.json.

    .venv/bin/python scripts/bench_table.py          # rewrite both
    .venv/bin/python scripts/bench_table.py --check  # exit 1 if either is not up to date

The format of a results file is in bench/record.py (and in the page this writes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from record import RESULTS, problems  # noqa: E402

OUTPUTS = {"bench": ROOT / "bench/README.md", "docs": ROOT / "docs/benchmarks.md"}

HEADER = """\
# Benchmarks

<!-- Written by scripts/bench_table.py from bench/results/*.json: edit those, not this. -->

Run by hand, never in CI. Each script measures side by side in one run
(alternating, so that the machine's load hits both sides alike) and reports
ratios: the project's machines are shared 2-vCPU boxes, so read the ratios and
the load average beside each figure. These are the current figures, one row per
figure, newest run; earlier runs, profiles and the reasoning behind each change
are in git's history of `bench/README.md` (the lab diary it was until issue 33).

To add or update a figure, do not edit this page: record it in
`bench/results/<script>.json` (the format is under "Recording a result" at the
end) and run `.venv/bin/python scripts/bench_table.py`.
"""

FORMAT = """\
## Recording a result

Each bench script keeps its current figures in `bench/results/<script>.json`;
`scripts/bench_table.py` turns them into this page (`bench/README.md` and
`docs/benchmarks.md`, both committed; `tests/docs/test_bench_table.py` fails when
either differs from what the script writes, or when a results file is malformed).
A script records with `bench/record.py`:

```py
from record import machine, record  # bench/ is on sys.path when run as bench/x.py

record(
    "bench/bench_x.py",
    "what it measures, one line",
    ".venv/bin/python bench/bench_x.py [--rounds 3]",
    [
        {
            "figure": "what was measured",
            "value": 1.23,
            "unit": "s",
            "baseline": "what it is compared with",
            "baseline_value": 1.5,
            "ratio": 0.82,
            "goal": "<= 1.0x",
            "note": "anything to read with it",
            "machine": machine(),
            "command": ".venv/bin/python bench/bench_x.py --rounds 3",
        }
    ],
)
```

then runs `.venv/bin/python scripts/bench_table.py`. A row replaces the row of
the same `figure`; `date` defaults to today (UTC). Required: `figure`, `value`
(a number or a short text such as `"0.77-0.83"`), `unit`, `date`, `machine`,
`command`; optional: `baseline`, `baseline_value`, `ratio`, `goal`, `note`.
"""


def load() -> list[dict[str, Any]]:
    documents = []
    for path in sorted(RESULTS.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        wrong = problems(document)
        if wrong:
            raise SystemExit(f"{path.relative_to(ROOT)}: " + "; ".join(wrong))
        documents.append(document)
    return sorted(documents, key=lambda document: not document["script"])  # by hand: last


def cell(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def value_cell(row: dict[str, Any]) -> str:
    return f"**{cell(row['value'])}** {cell(row['unit'])}".strip()


def baseline_cell(row: dict[str, Any]) -> str:
    words = cell(row.get("baseline", ""))
    if "baseline_value" in row:
        words += f": {cell(row['baseline_value'])}"
    return words


def figure_cell(row: dict[str, Any]) -> str:
    note = f"<br>*{cell(row['note'])}*" if "note" in row else ""
    return cell(row["figure"]) + note


def section(document: dict[str, Any]) -> list[str]:
    script = document["script"]
    lines = [f"### `{Path(script).name}`" if script else "### Without a script", ""]
    lines.append(document["measures"])
    if document["run"]:
        lines += ["", f"Run: `{document['run']}`"]
    if not document["results"]:
        return [*lines, "", "No figure recorded yet.", ""]
    lines += [
        "",
        "| figure | value | compared with | ratio | goal | measured |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    runs: list[tuple[str, str, str]] = []  # (date, machine, command), numbered below
    for row in document["results"]:
        run = (row["date"], row["machine"], row["command"])
        if run not in runs:
            runs.append(run)
        cells = [
            figure_cell(row),
            value_cell(row),
            baseline_cell(row),
            cell(row.get("ratio", "")),
            cell(row.get("goal", "")),
            f"{row['date']} ({runs.index(run) + 1})",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for number, (date, machine, command) in enumerate(runs, 1):
        lines.append(f"{number}. {date}, {cell(machine)}: `{cell(command)}`")
    return [*lines, ""]


def scripts_table(documents: list[dict[str, Any]]) -> list[str]:
    lines = ["## The scripts", "", "| script | measures | run |", "| --- | --- | --- |"]
    for document in documents:
        if document["script"]:
            name = Path(document["script"]).name
            run = f"`{cell(document['run'])}`"
            lines.append(f"| `{name}` | {cell(document['measures'])} | {run} |")
    return [*lines, ""]


def render(documents: list[dict[str, Any]]) -> str:
    lines = [HEADER, "## Current figures", ""]
    for document in documents:
        lines += section(document)
    lines += scripts_table(documents)
    return "\n".join(lines) + "\n" + FORMAT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    args = parser.parse_args()
    text = render(load())
    stale = [path for path in OUTPUTS.values() if path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run scripts/bench_table.py")
        raise SystemExit(1 if stale else 0)
    for path in stale:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
