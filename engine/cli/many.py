"""Many runs on one command line (``slotwise trec-eval QRELS RUN…``, ``slotwise run --runs``,
``slotwise compare``): each argument a file, a directory (its files) or a quoted glob (its
matches), expanded in the order the shards of one input are (engine/io/shards.py: a
directory's files below it sorted by path, names starting with ``.`` or ``_`` skipped; a
glob's matches sorted), the arguments' runs one after the other."""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["expand_runs"]


def expand_runs(specs: Sequence[str]) -> list[str]:
    """The run files of ``specs``: a file (or ``-``, or a path that does not exist, which
    its reader refuses naming it) as given; a directory's files and a glob's matches,
    named as given (relative stays relative). A directory without files or a glob without
    a match is an :class:`~engine.errors.InputError` naming it."""
    from engine.io import shards

    found: list[str] = []
    for spec in specs:
        if spec == "-" or "://" in spec or not shards.is_sharded(spec):
            found.append(spec)
            continue
        paths = [shard.path for shard in shards.resolve(spec)]
        found += paths if os.path.isabs(spec) else [os.path.relpath(p) for p in paths]
    return found
