"""What a glance at a command line tells before its parser is built: the command it
names, and the TREC files it reads whole (the program parses them ahead)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

__all__ = ["files_to_read", "split_command"]

_GLOBAL_OPTIONS_WITH_VALUES = ("--config", "--log-format")


def files_to_read(argv: Sequence[str]) -> list[tuple[str, str]]:
    """The TREC files, and their kind ("qrels" or "run"), that a ``run`` or ``trec-eval``
    command line reads whole, as far as a glance at ``argv`` tells: ``run``'s ``--qrels``
    and ``--run`` (not streamed, no ``--subtopics``, each given once: not shards, and
    not read by Ray's workers), and ``trec-eval``'s last two arguments (no ``-R``). Only
    a guess: the command reads what its parser makes of the arguments, and takes a file
    parsed ahead only when it reads that file as that kind."""
    command, words = split_command(argv)
    if "-h" in words or "--help" in words:
        return []
    on_workers = "--executor=ray" in words or ("--executor", "ray") in itertools.pairwise(words)
    if command == "run" and not {"--stream", "--subtopics"} & set(words) and not on_workers:
        named = {"--qrels": "qrels", "--run": "run"}
        found = []
        for at, word in enumerate(words):
            option, equals, value = word.partition("=")
            if option in named and (equals or at + 1 < len(words)):
                found.append((value if equals else words[at + 1], named[option]))
        kinds = [kind for _, kind in found]
        return [(path, kind) for path, kind in found if kinds.count(kind) == 1]  # not shards
    if command == "trec-eval" and len(words) >= 2 and not any(w.startswith("-R") for w in words):
        qrels, run = words[-2:]
        if not qrels.startswith("-") and not run.startswith("-"):
            return [(qrels, "qrels"), (run, "run")]
    return []


def split_command(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """The command ``argv`` names (None if none) and the arguments after it."""
    words = list(argv)
    while words and words[0].startswith("-"):  # the options before the command
        if words.pop(0) in _GLOBAL_OPTIONS_WITH_VALUES and words:
            words.pop(0)
    return (words[0], words[1:]) if words else (None, [])
