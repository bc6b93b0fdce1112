"""Samples whose system retrieved several times (docs/agents.md): an output's ``hops``,
each a retrieval call in order of arrival, and a conversation's ``turns``.

An output ``{"hops": [{"query", "retrieved", "pool"?, "selected"?}, ...], "retrieved"?}``
is held in four output columns (:data:`HOP_COLUMNS`): ``hop_retrieved``, ``hop_pool``
and ``hop_selected`` (list of int32 document codes: every hop's list, one after the
other) and ``hops`` (list of struct ``{query, retrieved, pool, selected}``: per hop its
query and how many ids each of its lists holds, null for a list it does not have). An
output without hops has a null ``hops`` row: its ``retrieved`` is its only hop.

``retrieved`` is the final context; without it, each hop's selected ids (its retrieved
ids when it gives none) in order of arrival, each once (:func:`final_context`).

A sample ``{"id": "chat", "turns": [{"input", "expected_output", ...}, ...]}`` is a
conversation: :func:`expand_turns` makes each turn a sample of its own, id
``chat#<turn>``, with ``metadata.conversation`` and ``metadata.turn``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from engine.errors import Problem
from engine.io.columns import HOP_COLUMNS, list_array, offsets_of

__all__ = [
    "HOP_LISTS",
    "expand_turns",
    "final_context",
    "has_hops",
    "hop_columns",
    "hop_lists",
    "hop_problems",
    "raw_hops",
]

#: A hop's id lists, as its output columns name them (``hop_<name>``).
HOP_LISTS = ("retrieved", "pool", "selected")


def has_hops(actual: Any) -> bool:
    """Whether a raw ``actual_output`` lists hops."""
    return isinstance(actual, Mapping) and "hops" in actual


def _ids(items: Sequence[Any]) -> list[str]:
    """A validated ranked list's ids as strings (items ``{id, ...}`` or bare ids)."""
    return [str(i["id"]) if isinstance(i, Mapping) else str(i) for i in items]


def _selected(hop: Mapping[str, Any]) -> list[str]:
    """What of a hop went into the prompt: ``selected``, else its retrieved ids."""
    return list(map(str, hop["selected"])) if "selected" in hop else _ids(hop["retrieved"])


def final_context(actual: Mapping[str, Any]) -> list[Any]:
    """A validated output's ``retrieved``; with hops and without it, each hop's selected
    ids in order of arrival, each once."""
    if "retrieved" in actual:
        return list(actual["retrieved"])
    return list(dict.fromkeys(itertools.chain.from_iterable(map(_selected, actual["hops"]))))


def hop_problems(
    actual: Any, sample_id: str, source: str | None = None, line: int | None = None
) -> list[Problem]:
    """What a schema-valid output's hops get wrong: a hop's selected id that is in
    neither its retrieved ids nor its pool, and an id of the final context that no hop
    retrieved or pooled (an id of no hop)."""
    if not has_hops(actual):
        return []
    found: list[Problem] = []
    reached: set[str] = set()
    for index, hop in enumerate(actual["hops"]):
        own = set(_ids(hop["retrieved"])) | set(map(str, hop.get("pool", ())))
        reached |= own
        for place, doc in enumerate(map(str, hop.get("selected", ()))):
            if doc not in own:
                found.append(
                    Problem(
                        f"selected id {doc!r} is in neither this hop's retrieved ids nor its pool",
                        sample_id,
                        f"/actual_output/hops/{index}/selected/{place}",
                        source,
                        line,
                    )
                )
    for place, doc in enumerate(_ids(actual.get("retrieved", ()))):
        if doc not in reached:
            found.append(
                Problem(
                    f"id {doc!r} of the final context is in no hop (no hop retrieved or pooled it)",
                    sample_id,
                    f"/actual_output/retrieved/{place}",
                    source,
                    line,
                )
            )
    return found


def hop_lists(outputs: Sequence[Any]) -> tuple[list[list[str]], list[list[Any] | None]]:
    """Of validated outputs (in row order): every hop's ids per list of
    :data:`HOP_LISTS` (all rows' hops one after the other), and per row its hops as
    ``(query, retrieved count, pool count or None, selected count or None)`` (None for
    an output without hops)."""
    flat: list[list[str]] = [[], [], []]
    rows: list[list[Any] | None] = []
    for actual in outputs:
        if not has_hops(actual):
            rows.append(None)
            continue
        row = []
        for hop in actual["hops"]:
            retrieved = _ids(hop["retrieved"])
            pool = None if "pool" not in hop else list(map(str, hop["pool"]))
            selected = None if "selected" not in hop else list(map(str, hop["selected"]))
            for into, ids in zip(flat, (retrieved, pool, selected), strict=True):
                into.extend(ids or ())
            row.append(
                {
                    "query": hop.get("query"),
                    "retrieved": len(retrieved),
                    "pool": None if pool is None else len(pool),
                    "selected": None if selected is None else len(selected),
                }
            )
        rows.append(row)
    return flat, rows


def hop_columns(rows: Sequence[list[Any] | None], codes: Sequence[Any]) -> dict[str, pa.Array]:
    """The :data:`HOP_COLUMNS` of :func:`hop_lists`' ``rows``, given the document codes
    of its flat lists (``codes``: one int32 array per list of :data:`HOP_LISTS`)."""
    hops = pa.array(rows, HOP_COLUMNS["hops"])
    columns: dict[str, pa.Array] = {"hops": hops}
    for name, part in zip(HOP_LISTS, codes, strict=True):
        sizes = [sum(h[name] or 0 for h in row) if row else 0 for row in rows]
        mask = np.array([row is None for row in rows], dtype=np.bool_)
        values = pa.array(np.asarray(part, dtype=np.int32), pa.int32())
        columns[f"hop_{name}"] = list_array(offsets_of(sizes), values, mask)
    return columns


def raw_hops(hops: Sequence[Mapping[str, Any]], lists: Mapping[str, Sequence[str]]) -> list[Any]:
    """One row's hops as raw output (for writing outputs back): ``hops`` as the ``hops``
    column holds them, ``lists`` each hop list's ids (``retrieved``, ``pool``,
    ``selected``) of the row."""
    at = dict.fromkeys(HOP_LISTS, 0)
    found = []
    for hop in hops:
        raw: dict[str, Any] = {} if hop["query"] is None else {"query": hop["query"]}
        for name in HOP_LISTS:
            count = hop[name]
            if count is not None:
                raw[name] = list(lists[name][at[name] : at[name] + count])
                at[name] += count
        found.append(raw)
    return found


def expand_turns(
    raw: Mapping[str, Any], source: str | None = None, line: int | None = None, path: Any = ()
) -> tuple[list[dict[str, Any]], list[Problem]]:
    """A schema-valid conversation sample as one sample per turn (``<id>#<turn>``,
    ``metadata.conversation`` and ``metadata.turn`` set), or the problems of its turns:
    turn numbers that do not count 1, 2, 3, ... in order, ``turns`` beside the sample's
    own ``input`` or ``expected_output``, and a ``metadata.conversation`` or
    ``metadata.turn`` given (slotwise sets them)."""
    sample_id = str(raw["id"])
    prefix = "/" + "/".join(map(str, path)) if path else ""
    problems = [
        Problem(
            f"a conversation's {key} goes in each of its turns, not beside them",
            sample_id,
            f"{prefix}/{key}",
            source,
            line,
        )
        for key in ("input", "expected_output")
        if key in raw
    ]
    problems += [
        Problem(
            f"metadata.{key} is the conversation's own (slotwise sets it on each turn)",
            sample_id,
            f"{where}/metadata/{key}",
            source,
            line,
        )
        for where, meta in (
            (prefix, raw.get("metadata", {})),
            *((f"{prefix}/turns/{i}", t.get("metadata", {})) for i, t in enumerate(raw["turns"])),
        )
        for key in ("conversation", "turn")
        if key in meta
    ]
    samples = []
    for index, turn in enumerate(raw["turns"]):
        number = turn.get("turn", index + 1)
        if number != index + 1:
            problems.append(
                Problem(
                    f"turn {number} is out of order: turn {index + 1} goes here "
                    "(turns count 1, 2, 3, ... in order)",
                    sample_id,
                    f"{prefix}/turns/{index}/turn",
                    source,
                    line,
                )
            )
        metadata = {
            **raw.get("metadata", {}),
            **turn.get("metadata", {}),
            "conversation": sample_id,
            "turn": index + 1,
        }
        sample = {"id": f"{sample_id}#{index + 1}", "metadata": metadata}
        sample.update({k: turn[k] for k in ("input", "expected_output") if k in turn})
        samples.append(sample)
    return samples, problems
