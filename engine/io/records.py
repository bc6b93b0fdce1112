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

_LONG_FORM_KEYS = frozenset({"relevance", "utility", "answers", "groups"})


def _ids(values: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def _labels(value: Any) -> dict[str, float]:
    """A list of ids means label 1 for each; a map id -> number is graded."""
    if isinstance(value, Mapping):
        return dict(zip(map(str, value), map(float, value.values()), strict=True))
    return dict.fromkeys(_ids(value), 1.0)


def _utility(value: Mapping[str, Any]) -> dict[str, float]:
    """u directly, or u = (+1 if relevant else -1) * (1 - p_no_response)."""
    out = {}
    for doc, label in value.items():
        if isinstance(label, Mapping):
            sign = 1.0 if label["relevant"] else -1.0
            out[str(doc)] = sign * (1.0 - float(label["p_no_response"]))
        else:
            out[str(doc)] = float(label)
    return out


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

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> Sample:
        """Build from a sample that already passed ``sample.schema.json``."""
        expected = raw.get("expected_output")
        long_form = isinstance(expected, Mapping) and bool(_LONG_FORM_KEYS & expected.keys())
        fields: dict[str, Any] = {}
        if long_form:
            assert isinstance(expected, Mapping)
            if "relevance" in expected:
                fields["relevance"] = _labels(expected["relevance"])
            if "utility" in expected:
                fields["utility"] = _utility(expected["utility"])
            if "grades" in expected:
                fields["grades"] = {str(d): float(g) for d, g in expected["grades"].items()}
            if "answers" in expected:
                answers = expected["answers"]
                fields["answers"] = (answers,) if isinstance(answers, str) else tuple(answers)
            if "groups" in expected:
                fields["groups"] = {str(g): _ids(ids) for g, ids in expected["groups"].items()}
        elif expected is not None:
            fields["relevance"] = _labels(expected)
        return cls(
            id=str(raw["id"]),
            input=raw.get("input"),
            metadata=dict(raw.get("metadata") or {}),
            **fields,
        )

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

    @classmethod
    def from_raw(cls, raw: Any) -> Output:
        """Build from an ``actual_output`` that already passed ``outputs.schema.json``."""
        if not isinstance(raw, Mapping) and set(map(type, raw)) <= {str}:
            return cls(retrieved=tuple(raw))  # the common case: a bare list of string ids
        if isinstance(raw, Mapping):
            items, pool, cited = raw["retrieved"], raw.get("pool"), raw.get("cited")
        else:
            items, pool, cited = raw, None, None
        ids = tuple(str(i["id"]) if isinstance(i, Mapping) else str(i) for i in items)
        texts = tuple(i.get("text") if isinstance(i, Mapping) else None for i in items)
        return cls(
            retrieved=ids,
            texts=texts if any(t is not None for t in texts) else None,
            pool=_ids(pool) if pool is not None else None,
            cited=_ids(cited) if cited is not None else None,
        )


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
        )
        for sample_id, retrieved, text, pool, cited in zip(
            columns.column("id").to_pylist(),
            _id_lists(columns, "retrieved"),
            texts,
            _id_lists(columns, "pool"),
            _id_lists(columns, "cited"),
            strict=True,
        )
        if retrieved is not None
    }
