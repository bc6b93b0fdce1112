"""trec_eval 10's own ``make quicktest``, every comparison of it, through ``slotwise
trec-eval``: the command lines are read from the vendored Makefile
(tests/data/trec_eval-10), run in this process, and their output must equal trec_eval's
expected file byte for byte. The same lines run through the binary built from that tree
check the oracle itself."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from engine.cli import main

pytestmark = pytest.mark.slow  # trec_eval built and its quicktest run

TREE = Path(__file__).resolve().parent / "data" / "trec_eval-10"


def _quicktest() -> list[tuple[list[str], str]]:
    """(arguments, expected file) of each ``./trec_eval ... | diff - EXPECTED`` line of
    the Makefile's quicktest target."""
    lines = (TREE / "Makefile").read_text().split("\nquicktest:", 1)[1].splitlines()
    cases = []
    for line in lines[1:]:
        if not line.startswith("\t"):
            break
        command, _, check = line.strip().partition("|")
        words = shlex.split(command)
        if words[0] == "./trec_eval":
            cases.append((words[1:], shlex.split(check)[-1]))
    return cases


CASES = _quicktest()


def test_the_makefile_has_fifteen_comparisons() -> None:
    assert len(CASES) == 15


@pytest.mark.parametrize(("args", "expected"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_slotwise_trec_eval_passes_quicktest(
    args: list[str],
    expected: str,
    capsysbinary: pytest.CaptureFixture[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(TREE)
    code = main(["trec-eval", *args])
    captured = capsysbinary.readouterr()
    assert code == 0, captured.err.decode()
    assert captured.out == (TREE / expected).read_bytes()


def test_the_built_binary_passes_quicktest(trec_eval_binary: Path) -> None:
    for args, expected in CASES:
        done = subprocess.run(
            [str(trec_eval_binary), *args], cwd=TREE, capture_output=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == (TREE / expected).read_bytes(), args
