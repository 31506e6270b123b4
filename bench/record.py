"""Recorded benchmark results: bench/results/NAME.json, one file per bench script.

The format (scripts/bench_table.py renders bench/README.md and docs/benchmarks.md
from these files; tests/docs/test_bench_table.py checks the files and the tables):

    {
      "script": "bench/bench_api.py",            # the script that measures them
      "measures": "JSON API req/s ...",          # one line: what it measures
      "run": ".venv/bin/python bench/bench_api.py [--rounds 3]",   # how to run it
      "results": [                               # the current figures, newest run
        {
          "figure": "flagship POST /api/attention, answer cache on",  # what was measured
          "value": 15078,                        # a number, or a short text ("0.77-0.83")
          "unit": "req/s",                       # of value ("" for a bare ratio)
          "baseline": "GET /healthz, same server, same run",  # optional: compared with
          "baseline_value": 7662,                # optional: the baseline's figure
          "ratio": 1.97,                         # optional: value / baseline_value
          "goal": ">= 0.85x",                    # optional: the issue's goal
          "note": "p99 2.7 ms",                  # optional: anything else to read with it
          "date": "2026-11-22",                  # when it was measured (UTC)
          "machine": "2 vCPUs, torch 2.13.0+cpu, load average 8-12",
          "command": ".venv/bin/python bench/bench_api.py --rounds 3"  # exactly as run
        }
      ]
    }

A script records its figures with :func:`record` (replacing the rows of the same
``figure``; older figures stay in git's history), then
``.venv/bin/python scripts/bench_table.py`` rewrites the tables.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
REQUIRED = {"figure": str, "value": (int, float, str), "unit": str, "date": str}
REQUIRED |= {"machine": str, "command": str}
OPTIONAL = {"baseline": str, "baseline_value": (int, float, str), "ratio": (int, float, str)}
OPTIONAL |= {"goal": str, "note": str}
FILE_KEYS = {"script": str, "measures": str, "run": str, "results": list}


def problems(document: Any) -> list[str]:
    """What is wrong with one results file (empty: it is well formed)."""
    if not isinstance(document, dict):
        return ["not a JSON object"]
    found = [
        f"{key}: missing or not {kind.__name__}"
        for key, kind in FILE_KEYS.items()
        if not isinstance(document.get(key), kind)
    ]
    found += [f"unknown key {k!r}" for k in document if k not in FILE_KEYS]
    for i, row in enumerate(document.get("results") or []):
        if not isinstance(row, dict):
            found.append(f"results[{i}]: not an object")
            continue
        for key, kind in REQUIRED.items():
            if not isinstance(row.get(key), kind) or isinstance(row.get(key), bool):
                found.append(f"results[{i}].{key}: missing or of the wrong type")
        for key in row:
            if key not in REQUIRED and key not in OPTIONAL:
                found.append(f"results[{i}]: unknown key {key!r}")
            elif key in OPTIONAL and not isinstance(row[key], OPTIONAL[key]):
                found.append(f"results[{i}].{key}: of the wrong type")
    return found


def machine(note: str = "") -> str:
    """This machine in a few words, with its load average at the call (the runs' noise)."""
    load = "/".join(f"{x:.1f}" for x in os.getloadavg()[:1])
    cpus = os.cpu_count() or 0
    words = f"{cpus} CPUs, Python {platform.python_version()}, load average {load}"
    try:
        import torch

        words += f", torch {torch.__version__}"
    except ImportError:
        pass
    return f"{words}; {note}" if note else words


def record(script: str, measures: str, run: str, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` into bench/results/<script's stem>.json, replacing same-named figures.

    Each row needs ``figure``, ``value``, ``unit``, ``machine`` (e.g. :func:`machine`) and
    ``command``; ``date`` defaults to today (UTC)."""
    path = RESULTS / f"{Path(script).stem}.json"
    old = json.loads(path.read_text()) if path.exists() else {"results": []}
    today = datetime.now(UTC).date().isoformat()
    new = [{"date": today, **row} for row in rows]
    names = {row["figure"] for row in new}
    kept = [row for row in old["results"] if row["figure"] not in names]
    document = {"script": script, "measures": measures, "run": run, "results": kept + new}
    wrong = problems(document)
    if wrong:
        raise ValueError(f"{path.name}: " + "; ".join(wrong))
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
