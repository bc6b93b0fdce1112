"""``run --stream`` reads each query's TREC lines as one block: a query whose lines come
back after other queries' is an error naming the file, the line where it comes back and
the line where its lines began (not only the repeated id), with the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

QUERIES, DEPTH, MOVED = 3000, 100, 50  # 300,000 run lines: several of the stream's blocks


@pytest.fixture
def regrouped_run(tmp_path: Path) -> Path:
    """q0's last 50 lines moved to the end of the run, after every other query's."""
    lines = [
        f"q{query} Q0 doc-{rank} {rank + 1} {DEPTH - rank} system\n"
        for query in range(QUERIES)
        for rank in range(DEPTH)
    ]
    moved = lines[DEPTH - MOVED : DEPTH]
    del lines[DEPTH - MOVED : DEPTH]
    (tmp_path / "run.txt").write_text("".join(lines + moved))
    qrels = "".join(f"q{query} 0 doc-{query % DEPTH} 1\n" for query in range(QUERIES))
    (tmp_path / "qrels.txt").write_text(qrels)
    return tmp_path


def test_the_line_out_of_order_is_named(regrouped_run: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", "--qrels", "qrels.txt", "--run", "run.txt",
         "--metrics", "retrieval-map", "--stream"],
        capture_output=True, text=True, cwd=regrouped_run, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    comes_back = QUERIES * DEPTH - MOVED + 1  # the first moved line, after every other query
    run = regrouped_run / "run.txt"
    assert (
        f"{run}:{comes_back} sample 'q0': query 'q0' comes back here after other queries' "
        f"lines (its lines began at {run}:1): --stream reads each query's lines together; "
        "sort the file by query (`sort -s -k1,1`) or leave out --stream"
    ) in done.stderr
    assert "Traceback" not in done.stderr


def test_in_memory_the_same_file_scores(regrouped_run: Path) -> None:
    """Without --stream the lines are gathered by query: the file is valid input."""
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", "--qrels", "qrels.txt", "--run", "run.txt",
         "--metrics", "retrieval-map"],
        capture_output=True, text=True, cwd=regrouped_run, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
