"""The ``slotwise`` command line (the commands: :mod:`engine.cli.commands`). Exit codes:
0 success, 2 bad input or usage, 1 internal error (a plugin that fails while scoring, a
bug), 130 interrupted.

This module imports little: the program starts parsing the TREC files its arguments
name while the rest of slotwise is imported (0.05-0.1 s of a command on a million-line
run, docs/scale.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from engine.cli.ahead import files_to_read

__all__ = ["main", "program"]


def program() -> NoReturn:
    """The ``slotwise`` program: :func:`main` on the command line's arguments, then the
    process ends with its exit code (:func:`process.exit_with`)."""
    # BLAS on one thread, unless the environment says otherwise: OpenBLAS's other thread
    # spins for nothing at numpy's import and after each call, on the core the files are
    # parsed on (0.14 CPU-s, 30 ms by the clock of a deep-qrels run); the command line
    # scores on threads of its own, each with BLAS on one thread (engine.cores).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from engine.cli import process

    reads = files_to_read(sys.argv[1:])
    if reads:
        from engine.io import trec_csv

        process.prepare()
        for path, kind in reads:
            trec_csv.read_ahead(path, kind)
    from engine.cli.commands import main as run_command

    process.exit_with(run_command(sys.argv[1:]))


def main(argv: Sequence[str] | None = None) -> int:
    """The ``slotwise`` command line on ``argv`` (default: the process's arguments);
    returns the exit code, as many times as it is called."""
    from engine.cli.commands import main as run_command

    return run_command(argv)
