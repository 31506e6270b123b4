"""bench/README.md and docs/benchmarks.md are what scripts/bench_table.py writes from
bench/results/*.json, and every results file is well formed and names a real script."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.record import RESULTS, problems
from tests.docs.commands import ROOT


def test_the_committed_tables_are_the_scripts_output() -> None:
    result = subprocess.run(
        [sys.executable, ROOT / "scripts/bench_table.py", "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_results_file_is_well_formed_and_names_its_script() -> None:
    paths = sorted(RESULTS.glob("*.json"))
    assert len(paths) > 20
    for path in paths:
        document = json.loads(path.read_text(encoding="utf-8"))
        assert problems(document) == [], path.name
        if document["script"]:
            assert (ROOT / document["script"]).is_file(), path.name
            assert path.stem == (ROOT / document["script"]).stem
            for row in document["results"]:
                assert document["script"] in row["command"], (path.name, row["figure"])


def test_a_malformed_row_is_named() -> None:
    row = {"figure": "x", "value": True, "unit": "s", "date": "2026-11-27", "machine": "m"}
    document = {"script": "", "measures": "", "run": "", "results": [row]}
    assert problems(document) == [
        "results[0].value: missing or of the wrong type",
        "results[0].command: missing or of the wrong type",
    ]


def test_the_family_sweeps_figure_is_its_records_count() -> None:
    """The headline of the sweep in the tables is bench/family_sweep.json's summary (whose
    counts by status docs/model-types.md alone writes out)."""
    head = json.loads((ROOT / "bench/family_sweep.json").read_text(encoding="utf-8"))["summary"]
    (row,) = json.loads((RESULTS / "sweep_families.json").read_text(encoding="utf-8"))["results"]
    assert (row["value"], row["unit"]) == (head["equal"], f"of {head['tried']} types")
    assert sum(head["by_status"].values()) == head["tried"]
    types = (ROOT / "docs/model-types.md").read_text(encoding="utf-8")
    for status, count in head["by_status"].items():
        assert f"| {status} | {count} |" in types
