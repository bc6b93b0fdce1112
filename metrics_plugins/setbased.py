"""The set-based family: what share of a query's best labeled evidence reached the K
prompt slots, order inside them ignored (RA-nWG, PROC, %PROC; see docs/set-based.md).

Labels are integer utility grades 1..5 over the sample's labeled slice ``U``; ``check``
reports any other label, and a pool that does not contain the top K, before scoring.
A retrieved document without a label has weight 0 and is neither evidence nor harm.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from engine import (
    Batch,
    MetricBase,
    MetricParameterError,
    Problem,
    bounded_number,
    optional_k,
    row_sums,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

GRADES: tuple[int, ...] = (1, 2, 3, 4, 5)
CLASSES: tuple[str, ...] = ("fine", "retrieval", "selection")
WORST = 5  # samples listed per problem class by DiagnosisAtK.summarize


# -- parameters ---------------------------------------------------------------------------


def _number(default: float, minimum: float | None = 0.0, *, strict: bool = False) -> Any:
    validator = bounded_number(-math.inf if minimum is None else minimum, exclusive_minimum=strict)
    return attrs.field(default=default, validator=validator, kw_only=True)


def _grade(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or value not in GRADES:
        raise MetricParameterError(f"{attribute.name} must be an integer 1..5, got {value!r}")


def _divide(numerator: FloatArray, denominator: FloatArray) -> FloatArray:
    """numerator / denominator; NA (NaN) where the denominator is 0 or NA."""
    out = np.full(np.broadcast(numerator, denominator).shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


# -- grades, weights and gains -------------------------------------------------------------


def _grade_index(labels: FloatArray) -> IntArray:
    """The grade 1..5 of each label as an index into a ``(Q, 6)`` weight table; 0 for an
    unlabeled document, padding, or a label outside the scale."""
    valid = np.isin(labels, GRADES)
    return np.where(valid, np.nan_to_num(labels), 0).astype(np.int64)


def _at(table: npt.NDArray[Any], labels: FloatArray) -> npt.NDArray[Any]:
    """``table[q, grade]`` for each label of row q: shape of ``labels``."""
    return np.take_along_axis(table, _grade_index(labels), axis=1)


def _top_sum(weights: FloatArray, cutoffs: IntArray) -> FloatArray:
    """Per row, the sum of its ``cutoff`` largest weights (all of them when fewer)."""
    ordered = -np.sort(-weights, axis=1)
    keep = np.arange(weights.shape[1])[None, :] < cutoffs[:, None]
    return row_sums(np.where(keep, ordered, 0.0))


@attrs.frozen
class Graded:
    """The set-based labels of a batch: each sample's ``grades`` when it has them, else
    its relevance labels. ``ranked``: at each rank, ``(Q, L)``; ``values``: the labeled
    slice U sorted descending, ``(Q, M)``; ``pool``: each distinct document of the pool
    (``actual_output.pool`` when given, else the ranked list ``D``), ``(Q, P)``. NaN where
    unlabeled and for padding."""

    ranked: FloatArray
    values: FloatArray
    pool: FloatArray

    @classmethod
    def of(cls, batch: Batch) -> Graded:
        """The batch's set-based labels (computed once per batch, shared by the family)."""
        return batch.shared((__name__, cls.__name__), lambda: cls._build(batch))

    @classmethod
    def _build(cls, batch: Batch) -> Graded:
        use = batch.has("grades")
        ranked = _choose(use, batch.ranked("grades"), batch.ranked_labels)
        values = _choose(use, batch.sorted_labels("grades"), batch.label_values)
        pool_of = {kind: batch.list_labels("pool", kind) for kind in ("grades", "relevance")}
        has_pool = batch.has("pool")
        pool = _choose(
            has_pool,
            _choose(use, pool_of["grades"], pool_of["relevance"]),
            _choose(use, batch.ranked("grades"), batch.ranked_labels),
        )
        return cls(ranked, values, pool)

    def counts(self) -> IntArray:
        """How many labels of each sample are each grade 1..5: shape ``(Q, 5)``."""
        return np.stack([(self.values == g).sum(axis=1) for g in GRADES], axis=1)


def _choose(rows: BoolArray, yes: FloatArray, no: FloatArray) -> FloatArray:
    """Row by row, ``yes`` where ``rows`` else ``no``, NaN-padded to the wider of the two."""
    width = max(yes.shape[1], no.shape[1])
    out = np.full((rows.size, width), np.nan)
    out[rows, : yes.shape[1]] = yes[rows]
    out[~rows, : no.shape[1]] = no[~rows]
    return out


def _in_top_k(batch: Batch, labels: Graded, k: int | None, table: npt.NDArray[Any]) -> FloatArray:
    """Per sample, the sum of ``table[q, grade]`` over the labeled documents of ``D_K``."""
    return row_sums(np.where(batch.top_k(k), _at(table, labels.ranked), 0.0))


class _SetBased(MetricBase):
    """Shared by the family: grades 1..5 (``expected_output.grades``, else the relevance
    labels, which must then be grades), and ``k``."""

    family: ClassVar[str] = "set-based"
    requires: ClassVar[frozenset[str]] = frozenset({"grades"})
    k: int | None

    def check(self, batch: Batch) -> Iterable[Problem]:
        """A problem per set-based label that is not an integer grade 1..5, and per sample
        whose ``actual_output.pool`` lacks some of its top K."""
        graded = batch.has("grades")
        for kind, used in (("grades", graded), ("relevance", ~graded)):
            rows, docs, labels = batch.labels(kind)
            bad = ~np.isin(labels, GRADES) & used[rows]
            for index in np.flatnonzero(bad).tolist():
                row, doc = int(rows[index]), batch.doc_ids([docs[index]])[0]
                yield Problem(
                    f"set-based metrics need integer grades 1..5; got {labels[index]:g}",
                    sample_id=batch.sample_ids[row],
                    pointer=batch.label_pointer(row, kind, doc),
                )
        outside = batch.top_k(self.k) & ~batch.member("pool") & batch.has("pool")[:, None]
        cutoffs = batch.cutoffs(self.k)
        for row in np.flatnonzero(outside.any(axis=1)).tolist():
            missing = batch.doc_ids(batch.doc_codes[row][outside[row]])
            yield Problem(
                f"the pool must contain the top {cutoffs[row]} retrieved; "
                f"it lacks {', '.join(map(repr, missing))}",
                sample_id=batch.sample_ids[row],
                pointer="/actual_output/pool",
            )


@attrs.frozen
class _Weighted(_SetBased):
    """Rarity-aware weights per grade: ``w5 = 1``, ``w4 = min(r4 / r5, cap4)``,
    ``w3 = min(r3 / r5, cap3)``, ``w2 = w1 = 0`` with ``r_g = b_g / p_g^alpha``."""

    k: int | None = optional_k()
    alpha: float = _number(1.0, minimum=None)
    b5: float = _number(1.0, strict=True)
    b4: float = _number(0.5)
    b3: float = _number(0.1)
    cap4: float = _number(1.0)
    cap3: float = _number(0.25)
    fallback_w4: float = _number(1.0)
    fallback_w3: float = _number(0.2)

    def weights(self, batch: Batch) -> FloatArray:
        """Weight of each grade per sample, shape ``(Q, 6)`` (column g = grade g; column 0,
        the weight of an unlabeled document, is 0)."""
        counts = Graded.of(batch).counts().astype(np.float64)
        n5 = counts[:, 4:5]
        # r_g / r5 = (b_g / b5) * (p5 / p_g)^alpha, and p5 / p_g = n5 / n_g
        present = (counts[:, 2:4] > 0) & (n5 > 0)
        ratio = np.zeros_like(counts[:, 2:4])
        with np.errstate(over="ignore", invalid="ignore"):
            np.divide(n5, counts[:, 2:4], out=ratio, where=present)
            np.power(ratio, self.alpha, out=ratio, where=present)
            ratio *= np.array([self.b3, self.b4]) / self.b5  # inf * 0 (b_g = 0): r_g = 0
        ranked = np.minimum(np.nan_to_num(ratio, nan=0.0), [self.cap3, self.cap4])
        fallback = np.array([self.fallback_w3, self.fallback_w4])
        table = np.zeros((counts.shape[0], 6))
        table[:, 3:5] = np.where(n5 > 0, ranked, fallback)
        table[:, 5] = 1.0
        return table

    def gains(
        self, batch: Batch, *, pool: bool = True
    ) -> tuple[FloatArray, FloatArray | None, FloatArray]:
        """Per sample: ``G_obs``, ``G_pool`` (None unless ``pool``) and ``G_oracle``."""
        labels = Graded.of(batch)
        table = self.weights(batch)
        cutoffs = batch.cutoffs(self.k)
        observed = _in_top_k(batch, labels, self.k, table)
        in_pool = _top_sum(_at(table, labels.pool), cutoffs) if pool else None
        oracle = _top_sum(_at(table, labels.values), cutoffs)
        return observed, in_pool, oracle

    def ratios(self, batch: Batch) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Per sample: RA-nWG, PROC and %PROC (NaN where NA)."""
        observed, in_pool, oracle = self.gains(batch)
        assert in_pool is not None
        ra_nwg, proc = _divide(observed, oracle), _divide(in_pool, oracle)
        return ra_nwg, proc, _divide(ra_nwg, proc)


@attrs.frozen
class RANWGAtK(_Weighted):
    """RA-nWG@K = G_obs / G_oracle: the top K's rarity-weighted gain over the best K-set of
    the labeled slice; NA when G_oracle = 0."""

    alias: ClassVar[str] = "ra-nwg-at-k"

    def score(self, batch: Batch) -> FloatArray:
        observed, _, oracle = self.gains(batch, pool=False)
        return _divide(observed, oracle)


@attrs.frozen
class PROCAtK(_Weighted):
    """PROC@K = G_pool / G_oracle: the best K-set of the pool over that of the labeled
    slice (the retrieval ceiling); NA when G_oracle = 0."""

    alias: ClassVar[str] = "proc-at-k"

    def score(self, batch: Batch) -> FloatArray:
        return self.ratios(batch)[1]


@attrs.frozen
class PctPROCAtK(_Weighted):
    """%PROC@K = RA-nWG / PROC: how much of the pool's ceiling the top K realised
    (selection efficiency); NA when PROC is NA or 0."""

    alias: ClassVar[str] = "pct-proc-at-k"

    def score(self, batch: Batch) -> FloatArray:
        return self.ratios(batch)[2]


def _count_at_least(batch: Batch, k: int | None, grade: int) -> FloatArray:
    """Per sample, the labeled documents of ``D_K`` with a grade >= ``grade``."""
    grades = np.array([[0, 1, 2, 3, 4, 5]]) >= grade
    return _in_top_k(batch, Graded.of(batch), k, grades).astype(np.float64)


@attrs.frozen
class NRecall4PlusAtK(_SetBased):
    """|{d in D_K: g >= 4}| / min(K, n4 + n5); NA when the slice has no grade >= 4."""

    alias: ClassVar[str] = "n-recall-4plus-at-k"
    k: int | None = optional_k()

    def score(self, batch: Batch) -> FloatArray:
        available = Graded.of(batch).counts()[:, 3:5].sum(axis=1)
        return _divide(
            _count_at_least(batch, self.k, 4),
            np.minimum(batch.cutoffs(self.k), available).astype(np.float64),
        )


@attrs.frozen
class NRecall5AtK(_SetBased):
    """|{d in D_K: g = 5}| / min(K, n5); NA when the slice has no grade 5."""

    alias: ClassVar[str] = "n-recall-5-at-k"
    k: int | None = optional_k()

    def score(self, batch: Batch) -> FloatArray:
        available = Graded.of(batch).counts()[:, 4]
        return _divide(
            _count_at_least(batch, self.k, 5),
            np.minimum(batch.cutoffs(self.k), available).astype(np.float64),
        )


@attrs.frozen
class Precision4PlusAtK(_SetBased):
    """|{d in D_K: g >= 4}| / K (K even when fewer were retrieved); never NA."""

    alias: ClassVar[str] = "precision-4plus-at-k"
    k: int | None = optional_k()

    def score(self, batch: Batch) -> FloatArray:
        return _count_at_least(batch, self.k, 4) / batch.cutoffs(self.k)


@attrs.frozen
class HarmAtK(_SetBased):
    """|{d in D_K: g <= harm_grade}| / K: the share of slots holding labeled junk or
    distractors (unlabeled documents are not harm); never NA."""

    alias: ClassVar[str] = "harm-at-k"
    higher_is_better: ClassVar[bool] = False
    k: int | None = optional_k()
    harm_grade: int = attrs.field(default=2, validator=_grade, kw_only=True)

    def score(self, batch: Batch) -> FloatArray:
        harmful = (np.arange(6) >= 1) & (np.arange(6) <= self.harm_grade)
        counted = _in_top_k(batch, Graded.of(batch), self.k, harmful[None, :]).astype(np.float64)
        return counted / batch.cutoffs(self.k)


@attrs.frozen
class DiagnosisAtK(_Weighted):
    """1 when a sample is fine, 0 when it has a retrieval problem (PROC < proc_threshold)
    or a selection problem (%PROC < pct_proc_threshold); NA when PROC is NA. The mean is
    the fine rate; ``details`` and ``summarize`` name the class."""

    alias: ClassVar[str] = "diagnosis-at-k"
    proc_threshold: float = _number(0.5)
    pct_proc_threshold: float = _number(0.5)

    def classify(self, batch: Batch) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
        """Per sample: the index into :data:`CLASSES` (-1 for NA), RA-nWG, PROC, %PROC."""
        ra_nwg, proc, pct_proc = self.ratios(batch)
        selection = np.where(np.isnan(pct_proc), 0.0, pct_proc) < self.pct_proc_threshold
        classes = np.where(proc < self.proc_threshold, 1, np.where(selection, 2, 0))
        return np.where(np.isnan(proc), -1, classes), ra_nwg, proc, pct_proc

    def score(self, batch: Batch) -> FloatArray:
        classes = self.classify(batch)[0]
        return np.where(classes < 0, np.nan, (classes == 0).astype(np.float64))

    def details(self, batch: Batch) -> Sequence[Mapping[str, Any] | None]:
        classes, ra_nwg, proc, pct_proc = self.classify(batch)
        names = [CLASSES[c] if c >= 0 else None for c in classes.tolist()]
        columns = [_nullable(a) for a in (proc, pct_proc, ra_nwg)]
        return [
            {"class": name, "proc": p, "pct_proc": pp, "ra_nwg": r}
            for name, p, pp, r in zip(names, *columns, strict=True)
        ]

    def summarize(self, batch: Batch, values: FloatArray) -> Mapping[str, Any]:
        """Samples per class (``na``: PROC is NA or the sample failed), the mean RA-nWG,
        PROC and %PROC with the class those means fall in, and the worst samples of
        each problem class (retrieval: lowest PROC; selection: lowest %PROC)."""
        classes, ra_nwg, proc, pct_proc = self.classify(batch)
        classes = np.where(np.isnan(values), -1, classes)
        means = {}
        for name, column in (("ra_nwg", ra_nwg), ("proc", proc), ("pct_proc", pct_proc)):
            kept = column[(classes >= 0) & ~np.isnan(column)]
            means[name] = round(float(kept.mean()), 6) if kept.size else None
        counts = {name: int((classes == c).sum()) for c, name in enumerate(CLASSES)}
        ids = np.array(batch.sample_ids, dtype=object)
        worst = {}
        for c, key in ((1, proc), (2, pct_proc)):
            rows = np.flatnonzero(classes == c)
            rows = rows[np.lexsort((ra_nwg[rows], key[rows]))][:WORST]
            worst[CLASSES[c]] = [
                {"id": i, "ra_nwg": r, "proc": p, "pct_proc": pp}
                for i, r, p, pp in zip(
                    ids[rows].tolist(),
                    *(_nullable(a[rows], 4) for a in (ra_nwg, proc, pct_proc)),
                    strict=True,
                )
            ]
        return {
            "counts": {**counts, "na": int((classes < 0).sum())},
            "mean": {**means, "class": self._overall(means)},
            "worst": worst,
        }

    def _overall(self, means: Mapping[str, float | None]) -> str | None:
        proc, pct_proc = means["proc"], means["pct_proc"]
        if proc is None:
            return None
        if proc < self.proc_threshold:
            return "retrieval"
        return "selection" if (pct_proc or 0.0) < self.pct_proc_threshold else "fine"


def _nullable(values: FloatArray, digits: int | None = None) -> list[float | None]:
    """Floats for JSON: NaN becomes None, optionally rounded."""
    rounded = values if digits is None else np.round(values, digits)
    return [None if math.isnan(v) else v for v in rounded.tolist()]
