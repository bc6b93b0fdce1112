"""Inputs named as pipes: a FIFO, or bash's process substitution (``--run <(zcat
run.gz)``, a trec_eval habit). The readers look at a file's first bytes and then read it
from the start, which a pipe gives once; the command line copies each piped input once
and reads the copy, so the numbers are those of the same bytes in a regular file (before,
the command waited for ever for a second writer)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

QRELS = "010 0 0x1F 1\n010 0 d2 0\n10 0 d3 1\n11 0 d4 2\n"
RUN = "010 Q0 0x1F 1 2.0 r\n010 Q0 d2 2 1.0 r\n10 Q0 d2 1 1.0 r\n11 Q0 d4 1 3.0 r\n"
CLI = [sys.executable, "-m", "engine.cli"]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    return tmp_path


def _regular(files: Path, *argv: str) -> str:
    done = subprocess.run([*CLI, *argv], cwd=files, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_fifo_run_scores_as_the_file(files: Path) -> None:
    fifo = files / "run.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(RUN))
    writer.start()
    argv = ["run", "--qrels", "qrels.txt", "--metrics", "retrieval-map,P@1", "--format", "csv"]
    done = subprocess.run(
        [*CLI, *argv, "--run", "run.fifo"], cwd=files, capture_output=True, text=True, timeout=60
    )
    writer.join(10)
    assert done.returncode == 0, done.stderr
    assert done.stdout == _regular(files, *argv, "--run", "run.txt")


def test_process_substitution_in_trec_eval_and_run(files: Path) -> None:
    for argv, piped in (
        (["trec-eval", "-q", "qrels.txt", "run.txt"], ["trec-eval", "-q", "<(cat qrels.txt)", "<(cat run.txt)"]),
        (
            ["run", "--qrels", "qrels.txt", "--run", "run.txt", "--metrics", "retrieval-map", "--format", "csv"],
            ["run", "--qrels", "<(cat qrels.txt)", "--run", "<(cat run.txt)", "--metrics", "retrieval-map", "--format", "csv"],
        ),
    ):  # fmt: skip
        line = " ".join([*map(shlex.quote, CLI), *piped])
        done = subprocess.run(
            ["bash", "-c", line], cwd=files, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == _regular(files, *argv)


def test_documents_and_tables_through_pipes_are_told_by_their_bytes(files: Path) -> None:
    """A pipe has no suffix (``/dev/fd/63``), and documents and tables are read by theirs:
    the copy is named by what its bytes are (one JSON value: .json; lines of objects:
    .jsonl; Parquet), so `--outputs <(zcat outputs.jsonl.gz)` reads as the file (it was
    "unknown outputs format ''", naming the temporary copy)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    outputs = {"010": ["0x1F", "d2"], "10": ["d2"], "11": ["d4", "d9"]}
    (files / "outputs.json").write_text(json.dumps(outputs, indent=2))
    (files / "outputs.jsonl").write_text(
        "".join(json.dumps({"id": k, "actual_output": v}) + "\n" for k, v in outputs.items())
    )
    rows = [(q, d, -r) for q, docs in outputs.items() for r, d in enumerate(docs, 1)]
    queries, docs, scores = (list(column) for column in zip(*rows, strict=True))
    pq.write_table(
        pa.table({"query_id": queries, "doc_id": docs, "score": scores}), files / "run.parquet"
    )
    base = ["run", "--qrels", "qrels.txt", "--metrics", "retrieval-map,P@1", "--format", "csv"]
    expected = _regular(files, *base, "--run", "run.txt")
    for option, name in (
        ("--outputs", "outputs.json"),
        ("--outputs", "outputs.jsonl"),
        ("--run", "run.parquet"),
    ):
        assert _regular(files, *base, option, name) == expected, name
        line = " ".join([*map(shlex.quote, CLI), *base, option, f"<(cat {name})"])
        done = subprocess.run(
            ["bash", "-c", line], cwd=files, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected, name
