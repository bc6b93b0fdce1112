"""Samples and system outputs one at a time: the row view of :class:`~engine.io.columns.Columns`,
for work that goes sample by sample (annotation, meta-evaluation, conversions)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from engine.io.columns import Columns

__all__ = ["Output", "Sample", "outputs_of", "samples_of"]


@attrs.frozen
class Sample:
    """One validated sample. ``relevance`` is None when the sample carries no relevance labels."""

    id: str
    input: Any = None
    relevance: Mapping[str, float] | None = None
    utility: Mapping[str, float] | None = None
    grades: Mapping[str, float] | None = None
    answers: tuple[str, ...] | None = None
    groups: Mapping[str, tuple[str, ...]] | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def k(self) -> int | None:
        """The per-sample cutoff ``metadata.k``, if set."""
        k = self.metadata.get("k")
        return int(k) if k is not None else None


@attrs.frozen
class Output:
    """What the system put in its slots, rank 1 first, as given (duplicates included)."""

    retrieved: tuple[str, ...] = ()
    texts: tuple[str | None, ...] | None = None
    pool: tuple[str, ...] | None = None
    cited: tuple[str, ...] | None = None
    hops: tuple[Any, ...] | None = None
    """An agent's hops as raw output (``{query?, retrieved, pool?, selected?}`` each)."""

    def to_json(self) -> Any:
        """The ``actual_output`` that reads back as this output: a list of ids, or
        ``{retrieved, pool?, cited?, hops?}`` with ``{id, text}`` items where there are
        texts."""
        if self.texts is None and self.pool is None and self.cited is None and not self.hops:
            return list(self.retrieved)
        texts = self.texts or (None,) * len(self.retrieved)
        document: dict[str, Any] = {
            "retrieved": [
                doc if text is None else {"id": doc, "text": text}
                for doc, text in zip(self.retrieved, texts, strict=True)
            ]
        }
        if self.pool is not None:
            document["pool"] = list(self.pool)
        if self.cited is not None:
            document["cited"] = list(self.cited)
        if self.hops is not None:
            document["hops"] = [dict(hop) for hop in self.hops]
        return document


def _id_lists(columns: Columns, name: str) -> list[tuple[str, ...] | None]:
    docs = columns.docs.to_pylist()
    return [
        None if codes is None else tuple(docs[c] for c in codes)
        for codes in columns.column(name).to_pylist()
    ]


def _label_maps(columns: Columns, kind: str) -> list[dict[str, float] | None]:
    docs = columns.docs.to_pylist()
    return [
        None if entries is None else {docs[e["doc"]]: e["label"] for e in entries}
        for entries in columns.column(kind).to_pylist()
    ]


def samples_of(columns: Columns) -> list[Sample]:
    """One :class:`Sample` per row of a table of samples."""
    docs = columns.docs.to_pylist()
    groups = [
        None
        if entries is None
        else {e["group"]: tuple(docs[c] for c in e["docs"]) for e in entries}
        for entries in columns.column("groups").to_pylist()
    ]
    answers = columns.column("answers").to_pylist()
    return [
        Sample(
            id=sample_id,
            input=None if raw_input is None else json.loads(raw_input),
            relevance=relevance,
            utility=utility,
            grades=grades,
            answers=None if answer is None else tuple(answer),
            groups=group,
            metadata={} if metadata is None else json.loads(metadata),
        )
        for sample_id, raw_input, relevance, utility, grades, answer, group, metadata in zip(
            columns.column("id").to_pylist(),
            columns.column("input").to_pylist(),
            _label_maps(columns, "relevance"),
            _label_maps(columns, "utility"),
            _label_maps(columns, "grades"),
            answers,
            groups,
            columns.column("metadata").to_pylist(),
            strict=True,
        )
    ]


def outputs_of(columns: Columns) -> dict[str, Output]:
    """Sample id -> :class:`Output` for each row of a table of outputs that has one."""
    texts = columns.column("texts").to_pylist()
    return {
        sample_id: Output(
            retrieved=retrieved,
            texts=None if text is None else tuple(text),
            pool=pool,
            cited=cited,
            hops=hops,
        )
        for sample_id, retrieved, text, pool, cited, hops in zip(
            columns.column("id").to_pylist(),
            _id_lists(columns, "retrieved"),
            texts,
            _id_lists(columns, "pool"),
            _id_lists(columns, "cited"),
            _hops_of(columns),
            strict=True,
        )
        if retrieved is not None
    }


def _hops_of(columns: Columns) -> list[tuple[Any, ...] | None]:
    """Per row, its hops as raw output (None for an output without hops)."""
    from engine.io.hops import HOP_LISTS, raw_hops

    if not columns.has("hops") or not columns.valid("hops").any():
        return [None] * len(columns)
    lists = {name: _id_lists(columns, f"hop_{name}") for name in HOP_LISTS}
    return [
        None
        if hops is None
        else tuple(raw_hops(hops, {name: lists[name][row] or () for name in HOP_LISTS}))
        for row, hops in enumerate(columns.column("hops").to_pylist())
    ]
