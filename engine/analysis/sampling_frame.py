"""The sampling frame ``slotwise sample`` draws from (:func:`engine.analysis.sampling.draw`
draws): the units (a dataset's queries, or query-document pairs pooled from runs or
labelled in the dataset), the units people already labelled, and what a design draws
by: the strata (a metadata field's value, the judge's grade, a band of the systems'
disagreement) or the systems' disagreement as each query's uncertainty."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from engine.errors import InputError, Problem

if TYPE_CHECKING:
    import pyarrow as pa

    from engine.evaluation.api import Dataset

__all__ = [
    "Pooled",
    "Population",
    "bands",
    "cannot_draw",
    "disagreement",
    "grade_strata",
    "labelled_pairs",
    "labelled_queries",
    "metadata_strata",
    "population",
]

#: The label columns that make a query labelled.
LABEL_KINDS = ("relevance", "utility", "grades")


class Pooled(Protocol):
    """The pairs the runs' top documents pool (:func:`engine.annotate.holes.pool`): each
    pair's dataset row and document."""

    @property
    def rows(self) -> npt.NDArray[np.int64]: ...

    @property
    def docs(self) -> pa.Array: ...


@attrs.frozen
class Population:
    """The units a sample is drawn from: each unit's query, its document (pairs; None
    for query units), and each query's number of pooled pairs ({} without runs)."""

    queries: list[str]
    docs: list[str] | None
    pairs_per_query: dict[str, int]

    def labels_per_query(self, exclude: Collection[str]) -> float:
        """What labelling a query costs: the mean number of pooled pairs of the queries
        not excluded (1 when there are none)."""
        left = [self.pairs_per_query[q] for q in self.queries if q not in exclude]
        return float(np.mean(left)) if left and np.mean(left) > 0 else 1.0


def cannot_draw(message: str, source: str | None = None) -> InputError:
    """The error of a sample that cannot be drawn."""
    return InputError([Problem(message, source=source)], summary="cannot draw the sample")


def labelled_queries(dataset: Dataset) -> set[str]:
    """The queries with a relevance, utility or grades label."""
    columns = dataset.columns
    has = np.zeros(len(columns), dtype=np.bool_)
    for kind in LABEL_KINDS:
        has |= columns.column(kind).is_valid().to_numpy(zero_copy_only=False)
    return {sample_id for sample_id, labelled in zip(dataset.ids, has, strict=True) if labelled}


def labelled_pairs(dataset: Dataset) -> list[tuple[str, str]]:
    """The (query, document) pairs with a relevance label, in the dataset's order."""
    return [(s.id, doc) for s in dataset.samples for doc in (s.relevance or {})]


def population(dataset: Dataset, unit: str, pooled: Pooled | None) -> Population:
    """The ``unit`` units (``query`` or ``pair``) of ``dataset``: all its queries, or the
    ``pooled`` pairs (None: the pairs it labels)."""
    ids = dataset.ids
    if pooled is not None:
        queries = [ids[row] for row in pooled.rows.tolist()]
        docs = pooled.docs.to_pylist()
        counts = dict(zip(*np.unique(np.asarray(queries, dtype=object), return_counts=True),
                          strict=True)) if queries else {}  # fmt: skip
        pairs = {q: int(counts.get(q, 0)) for q in ids}
    else:
        labelled = labelled_pairs(dataset)
        queries, docs = [q for q, _ in labelled], [d for _, d in labelled]
        pairs = {}
    if unit == "query":
        return Population(list(ids), None, pairs)
    if not queries:
        raise cannot_draw("no pairs: give --runs to pool, or a dataset with relevance labels")
    return Population(queries, docs, pairs)


def disagreement(labels: Dataset, first: Path, second: Path, metric: str) -> dict[str, float]:
    """Per query, |``metric`` of the run ``first`` - of ``second``| under ``labels``; a
    query where either is NA is an error."""
    evaluation = labels.with_metrics([metric])
    one, other = evaluation.evaluate(first), evaluation.evaluate(second)
    label = one.labels[0]
    gap = np.abs(one.values(label) - other.values(label))
    missing = [q for q, v in zip(labels.ids, gap, strict=True) if np.isnan(v)]
    if missing:
        raise InputError(
            [Problem(f"{label} is NA for a run", q) for q in missing],
            summary="cannot compute the systems' disagreement",
        )
    return dict(zip(labels.ids, gap.tolist(), strict=True))


def bands(values: npt.NDArray[np.float64], bins: int) -> list[str]:
    """Each value's band: '|Δ|=0', else one of ``bins`` quantile bands of the positive
    values, named by its upper edge (bands whose edges coincide are one)."""
    positive = values[values > 0]
    if not positive.size:
        return ["|Δ|=0"] * values.size
    edges = np.unique(np.quantile(positive, np.linspace(0, 1, bins + 1)[1:]))
    at = np.minimum(np.searchsorted(edges, values, side="left"), edges.size - 1)
    return ["|Δ|=0" if v == 0 else f"|Δ|<={edges[i]:.3g}" for v, i in zip(values, at, strict=True)]


def metadata_strata(dataset: Dataset, field: str, queries: Sequence[str]) -> list[str]:
    """Each unit's stratum: its query's ``metadata.field`` (every query must have it)."""
    metadata = {s.id: s.metadata or {} for s in dataset.samples}
    if not any(field in m for m in metadata.values()):
        raise cannot_draw(f"no sample has the metadata field {field!r} to stratify by")
    lacking = sorted({q for q in queries if field not in metadata[q]})
    if lacking:
        raise InputError([Problem(f"no metadata field {field!r}", q, f"/metadata/{field}")
                          for q in lacking], summary="cannot stratify")  # fmt: skip
    return [str(metadata[q][field]) for q in queries]


def grade_strata(judge: Dataset, queries: Sequence[str], docs: Sequence[str]) -> list[str]:
    """Each pair's stratum: ``grade=G``, the judge's grade of it, else ``unjudged``."""
    grades = {s.id: s.relevance or {} for s in judge.samples}
    return [
        f"grade={grades.get(q, {})[d]:g}" if d in grades.get(q, {}) else "unjudged"
        for q, d in zip(queries, docs, strict=True)
    ]
