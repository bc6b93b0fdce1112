"""Where a streamed TREC input breaks its grouping: ``--stream`` reads each query's lines
as one block, so a query whose lines come back after another query's is an error; this
names, for each such query, the file and line where it comes back and where its lines
began. Read on the error path only (a second pass over the named files)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from engine.errors import Problem
from engine.io import shards

__all__ = ["regrouped"]


def regrouped(spec: shards.Spec, queries: Collection[str]) -> list[Problem]:
    """For each of ``queries`` (ids a stream found twice), the first line of ``spec``'s
    TREC text where it comes back after other queries' lines; empty when none does (the
    repeat is then within one block of lines, which the stream names itself)."""
    wanted, found = set(queries), []
    first: dict[str, tuple[str, int]] = {}
    previous: str | None = None
    for shard in shards.resolve(spec):
        for number, line in enumerate(_lines(shards.open_stream(shard)), 1):
            fields = line.split(maxsplit=1)
            query = fields[0].decode("utf-8", errors="replace") if fields else None
            if query is None or query == previous:
                continue
            previous = query
            if query not in first:
                first[query] = (shard.name, number)
            elif query in wanted:
                wanted.discard(query)
                began = "{}:{}".format(*first[query])
                message = (
                    f"query {query!r} comes back here after other queries' lines (its lines "
                    f"began at {began}): --stream reads each query's lines together; sort the "
                    "file by query (`sort -s -k1,1`) or leave out --stream"
                )
                found.append(Problem(message, sample_id=query, source=shard.name, line=number))
                if not wanted:
                    return found
    return found


def _lines(stream: Any) -> Iterator[bytes]:
    """The stream's lines, read a MiB at a time."""
    rest = b""
    while chunk := stream.read(1 << 20):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest
