"""How far an LLM judge agrees with people on graded relevance: Cohen's kappa with
quadratic weights over the (sample, document) pairs both labelled, as
``sklearn.metrics.cohen_kappa_score(human, judge, weights="quadratic")`` computes it (the
categories are the label values either side used, in order; a disagreement weighs the
square of how many categories apart the two labels are), beside Cohen's kappa of relevance
(label > 0 on both sides), which reads labels on different scales too. The gate reads the
weighted one
(:data:`~engine.analysis.defaults.MIN_AGREEMENT`): a judge below it cannot decide alone.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.analysis.defaults import MIN_AGREEMENT
from engine.evaluation.label_sources import HUMAN, SOURCES_KEY
from engine.io.columns import lengths, one_array

__all__ = ["JudgeAgreement", "judge_agreement", "weighted_kappa"]


def weighted_kappa(first: Any, second: Any) -> float | None:
    """Cohen's kappa with quadratic weights of two raters' labels of the same items
    (None when undefined: no items, or both raters giving one category alone)."""
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"two raters' labels differ in length: {a.size} and {b.size}")
    if not a.size:
        return None
    categories = np.unique(np.concatenate([a, b]))
    k = categories.size
    i, j = np.searchsorted(categories, a), np.searchsorted(categories, b)
    observed = np.zeros((k, k))
    np.add.at(observed, (i, j), 1.0)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / a.size
    steps = np.arange(k)
    weights = (steps[:, None] - steps[None, :]) ** 2.0
    chance = float((weights * expected).sum())
    if chance == 0:
        return None
    return 1.0 - float((weights * observed).sum()) / chance


@attrs.frozen
class JudgeAgreement:
    """The judge's labels against the human ones on the ``pairs`` (sample, document)
    pairs both labelled, over ``samples`` samples: quadratic-weighted ``kappa``."""

    kappa: float | None
    pairs: int
    samples: int
    binary: float | None = None
    """Cohen's kappa of relevance (label > 0) on the same pairs."""

    @property
    def sufficient(self) -> bool:
        """Whether the judge agrees well enough to decide without the human labels."""
        return self.kappa is not None and self.kappa >= MIN_AGREEMENT

    def describe(self) -> str:
        kappa = "NA" if self.kappa is None else f"{self.kappa:.2f}"
        binary = "NA" if self.binary is None else f"{self.binary:.2f}"
        return (
            f"weighted kappa {kappa} (of relevance, label > 0: {binary}) on {self.pairs:,} "
            f"pairs of {self.samples:,} samples"
        )

    def line(self) -> str:
        """The agreement as the gate prints it."""
        verdict = (
            "enough to decide alone"
            if self.sufficient
            else f"below {MIN_AGREEMENT:g}: the judge cannot give a verdict on its own"
        )
        return f"judge agreement with the human sample: {self.describe()} ({verdict})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "weighted_kappa": self.kappa,
            "weights": "quadratic",
            "binary_kappa": self.binary,
            "pairs": self.pairs,
            "samples": self.samples,
            "threshold": MIN_AGREEMENT,
            "sufficient": self.sufficient,
        }


def _labels(dataset: Any) -> pa.Table:
    """Every relevance label of ``dataset``: sample id, document id, label."""
    columns = dataset.columns
    relevance = columns.column("relevance")
    entries = pc.list_flatten(relevance)
    owners = np.repeat(np.arange(len(columns), dtype=np.int64), lengths(relevance))
    return pa.table(
        {
            "id": columns.ids.take(pa.array(owners)),
            "doc": one_array(columns.docs).take(entries.field("doc")),
            "label": entries.field("label").cast(pa.float64()),
        }
    )


def _human_sourced(dataset: Any) -> pa.Table:
    """The (sample id, document id) pairs whose label ``dataset`` records as a person's."""
    pairs = [
        (sample.id, doc)
        for sample in dataset.samples
        if SOURCES_KEY in sample.metadata
        for doc, source in sample.metadata[SOURCES_KEY].items()
        if source == HUMAN
    ]
    return pa.table(
        {"id": pa.array([p[0] for p in pairs], pa.string()), "doc": [p[1] for p in pairs]},
        schema=pa.schema([("id", pa.string()), ("doc", pa.string())]),
    )


def judge_agreement(human: Any, judge: Any) -> JudgeAgreement:
    """The agreement of ``judge``'s relevance labels (a :class:`~engine.Dataset`, e.g.
    ``slotwise annotate --runs`` without ``--holes``) with ``human``'s on the pairs both
    labelled; labels ``judge`` records as a person's (its label sources) are left out."""
    judged = _labels(judge).join(_human_sourced(judge), keys=["id", "doc"], join_type="left anti")
    both = _labels(human).join(judged, keys=["id", "doc"], join_type="inner", right_suffix="_judge")
    people = both.column("label").to_numpy()
    judge = both.column("label_judge").to_numpy()
    return JudgeAgreement(
        weighted_kappa(people, judge),
        both.num_rows,
        len(pc.unique(both.column("id"))),
        weighted_kappa(people > 0, judge > 0),  # two categories: weights change nothing
    )
