"""The benchmark's own code runs: ``benchmarks/run.py`` reaches into slotwise for its
floor (the primitives it times), so a move inside slotwise must not leave the benchmark
unable to run. Nothing here is timed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_floor_runs_on_a_small_corpus(tmp_path: Path) -> None:
    """Every primitive of the floor runs on a small generated corpus and reports seconds."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import corpus
        import run
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    qrels, ranked = corpus.write_files(tmp_path, 50, 20, 10_000, "deep")
    rows = run.floor(qrels, ranked)
    assert rows[:2] == ["| primitive | seconds |", "|---|---:|"]
    assert len(rows) == 2 + 8 + 4  # the primitives, then what a fresh process pays
    for row in rows[2:]:
        float(row.rsplit("|", 2)[1])  # a number of seconds in the last column


def test_the_least_pyarrow_program_runs_on_a_small_corpus(tmp_path: Path) -> None:
    """The pyarrow program the command line is set against reads, joins and sorts a small
    generated corpus without an error."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import corpus
        import run
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    qrels, ranked = corpus.write_files(tmp_path, 50, 20, 10_000, "deep")
    done = subprocess.run(
        [sys.executable, "-c", run.ARROW_SCRIPT, str(qrels), str(ranked)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
