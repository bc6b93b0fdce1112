"""What a new user trips over on the command line: closed pipes, stream titles, the
metrics listing's width, validating TREC files, and the quickstart's README steps."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
DATA = Path(__file__).resolve().parent / "data"


def _slotwise(*arguments: str, cwd: Path = QUICKSTART, closed: bool = False) -> tuple[int, str]:
    """Run ``python -m engine.cli`` in a subprocess: its exit status and stderr; with
    ``closed``, its stdout is a pipe whose reader has already gone (``| head``)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", *arguments],
        cwd=cwd,
        stdout=subprocess.PIPE if closed else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if closed:
        assert process.stdout is not None
        process.stdout.close()
    _, err = process.communicate()
    return process.returncode, err


@pytest.fixture(scope="module")
def results_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("results")
    paths = []
    for system in ("bm25", "hybrid-rerank"):
        paths.append(str(folder / f"{system}.json"))
        arguments = ["run", "quickstart", "--outputs", f"outputs/{system}.json"]
        code, err = _slotwise(*arguments, "--format", "json", "--output", paths[-1])
        assert code == 0, err
    return paths


class TestClosedPipe:
    @pytest.mark.parametrize(
        "arguments",
        [
            ["run", "quickstart"],
            ["run", "quickstart", "--format", "json"],
            ["metrics"],
        ],
    )
    def test_exit_141_quietly(self, arguments):
        """`slotwise ... | head`: the reader went away; exit 141 (as C tools), no message."""
        code, err = _slotwise(*arguments, closed=True)
        assert (code, err) == (141, "")

    def test_compare(self, results_files):
        code, err = _slotwise("compare", *results_files, closed=True)
        assert (code, err) == (141, "")


def test_stream_title_counts_the_samples(capsys):
    """--stream keeps no rows in memory, yet its table's title gives the real count."""
    arguments = ["run", "--qrels", str(DATA / "trec_eval" / "qrels.test"), "--run"]
    arguments += [str(DATA / "trec_eval" / "results.test"), "--metrics", "retrieval-map"]
    assert main([*arguments, "--stream"]) == 0
    streamed = capsys.readouterr().out
    assert main(arguments) == 0
    in_memory = capsys.readouterr().out
    title = in_memory.splitlines()[0].strip()
    assert title.endswith("samples)") and "(0 samples)" not in title
    assert streamed.splitlines()[0].strip() == title


def test_metrics_fit_the_terminal(monkeypatch):
    """On a 120-column terminal the metrics table is at most 120 columns wide, every
    alias whole on one line."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["metrics"]) == 0
    lines = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue()).splitlines()
    assert max(map(len, lines)) <= 120
    assert any("│ retrieval-ndcg-at-k " in line for line in lines)
