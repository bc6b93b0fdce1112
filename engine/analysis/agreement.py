"""How far an LLM judge agrees with people on graded relevance, measured as the papers
report it (UMBRELA, Upadhyay et al. 2024; the TREC 2024 RAG track's relevance report):

- Cohen's kappa with linear and with quadratic weights over the (sample, document) pairs
  both labelled, as ``sklearn.metrics.cohen_kappa_score(human, judge, weights=...)``
  computes it: the categories are the label values either side used, in order, and a
  disagreement weighs how many categories apart (linear) or its square (quadratic);
- Krippendorff's alpha, nominal, ordinal and interval, as the ``krippendorff`` package
  computes it (its value domain: the values either side used);
- the full confusion matrix (the human's grade by row, the judge's by column);
- Cohen's kappa of relevance (label > 0 on both sides), which reads labels on different
  scales too;
- per topic (sample): the pairs, exact agreement, mean absolute grade difference and
  quadratic kappa (on the categories of all pairs, as ``cohen_kappa_score(...,
  labels=every category)``: a grade keeps its distance in every topic); a topic with at least :data:`MIN_TOPIC_PAIRS` pairs whose kappa is
  below :data:`~engine.analysis.defaults.MIN_AGREEMENT` is named *unreliable* (a topic
  where both sides gave one grade alone has no kappa: it agrees, and is said so).

A kappa or alpha that is undefined (no pairs, one grade only) is ``None`` and said
"undefined", never 0. The gate reads the quadratic kappa (:data:`MIN_AGREEMENT`): a judge
below it cannot decide alone. Human-labelled pairs the judge has no label for are counted
and named (with the judge's reason where ``metadata.unjudged`` gives one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.analysis.defaults import MIN_AGREEMENT
from engine.evaluation.label_sources import HUMAN, SOURCES_KEY
from engine.evaluation.system_order import means_and_tau
from engine.io.columns import lengths, one_array

__all__ = [
    "LEVELS",
    "MIN_TOPIC_PAIRS",
    "Graded",
    "JudgeAgreement",
    "Level",
    "Mutual",
    "SystemOrder",
    "Topic",
    "graded_agreement",
    "judge_agreement",
    "krippendorff_alpha",
    "mutual_agreement",
    "system_order",
    "weighted_kappa",
]

Weights = Literal["linear", "quadratic"] | None
Level = Literal["nominal", "ordinal", "interval"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval")
#: The fewest pairs a topic needs before its agreement can name it unreliable.
MIN_TOPIC_PAIRS = 5
#: How many missing pairs the text names (JSON lists them all).
_NAMED = 10

FloatArray = npt.NDArray[np.float64]


def _codes(a: FloatArray, b: FloatArray) -> tuple[FloatArray, Any, Any]:
    categories = np.unique(np.concatenate([a, b]))
    return categories, np.searchsorted(categories, a), np.searchsorted(categories, b)


def _kappas(observed: FloatArray, weights: FloatArray) -> FloatArray:
    """Weighted kappa of each of the stacked (..., k, k) count tables (NaN: undefined)."""
    total = observed.sum(axis=(-2, -1), keepdims=True)
    expected = observed.sum(axis=-1)[..., :, None] * observed.sum(axis=-2)[..., None, :]
    expected = expected / np.where(total > 0, total, 1.0)
    chance = (weights * expected).sum(axis=(-2, -1))
    seen = (weights * observed).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance > 0, 1.0 - seen / chance, np.nan)


def _weights(k: int, weights: Weights) -> FloatArray:
    steps = np.arange(k, dtype=np.float64)
    distance = np.abs(steps[:, None] - steps[None, :])
    if weights is None:
        return (distance > 0).astype(np.float64)
    return distance if weights == "linear" else distance**2.0


def _defined(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def weighted_kappa(first: Any, second: Any, weights: Weights = "quadratic") -> float | None:
    """Cohen's kappa of two raters' labels of the same items, with ``linear`` or
    ``quadratic`` weights (None: unweighted); None when undefined (no items, or both
    raters giving one category alone)."""
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"two raters' labels differ in length: {a.size} and {b.size}")
    if not a.size:
        return None
    categories, i, j = _codes(a, b)
    k = categories.size
    observed = np.bincount(i * k + j, minlength=k * k).reshape(k, k).astype(np.float64)
    return _defined(float(_kappas(observed, _weights(k, weights))))


def krippendorff_alpha(data: Any, level: Level = "interval") -> float | None:
    """Krippendorff's alpha of ``data`` (raters x units, NaN where a rater gave no label)
    at the ``level`` of measurement, the value domain being the values given; None when
    undefined (fewer than two pairable values, or one value alone)."""
    matrix = np.asarray(data, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError("reliability data must be raters x units")
    present = ~np.isnan(matrix)
    pairable = present.sum(axis=0) >= 2
    matrix, present = matrix[:, pairable], present[:, pairable]
    values = np.unique(matrix[present])
    if values.size < 2:
        return None
    k = values.size
    units = np.broadcast_to(np.arange(matrix.shape[1]), matrix.shape)[present]
    codes = np.searchsorted(values, matrix[present])
    counts = np.zeros((matrix.shape[1], k))
    np.add.at(counts, (units, codes), 1.0)
    m = counts.sum(axis=1)
    scaled = counts / (m - 1.0)[:, None]
    coincidence = counts.T @ scaled - np.diag(scaled.sum(axis=0))
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    if level == "nominal":
        delta = 1.0 - np.eye(k)
    elif level == "interval":
        delta = (values[:, None] - values[None, :]) ** 2
    else:
        cumulative = np.concatenate([[0.0], np.cumsum(n_c)])
        lo, hi = (
            np.minimum.outer(np.arange(k), np.arange(k)),
            np.maximum.outer(np.arange(k), np.arange(k)),
        )
        delta = (cumulative[hi + 1] - cumulative[lo] - (n_c[:, None] + n_c[None, :]) / 2) ** 2
    expected = float((np.outer(n_c, n_c) * delta).sum())
    if expected == 0:
        return None
    return 1.0 - (n - 1.0) * float((coincidence * delta).sum()) / expected


def _number(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4f}"


def _grade(value: float) -> str:
    return f"{value:g}"


@attrs.frozen
class Topic:
    """One topic's (sample's) agreement: pairs both labelled, the share of exact
    agreements, the mean absolute grade difference and the quadratic kappa (None: both
    sides gave one grade alone)."""

    id: str
    pairs: int
    exact: float
    mean_difference: float
    kappa: float | None

    @property
    def unreliable(self) -> bool:
        """At least :data:`MIN_TOPIC_PAIRS` pairs and a kappa below :data:`MIN_AGREEMENT`."""
        return (
            self.pairs >= MIN_TOPIC_PAIRS and self.kappa is not None and self.kappa < MIN_AGREEMENT
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pairs": self.pairs,
            "exact": self.exact,
            "mean_absolute_difference": self.mean_difference,
            "quadratic_kappa": self.kappa,
            "unreliable": self.unreliable,
        }


@attrs.frozen
class Graded:
    """The graded agreement of a judge with people on the pairs both labelled (see the
    module's docstring for each measure)."""

    pairs: int
    categories: tuple[float, ...]
    confusion: tuple[tuple[int, ...], ...]
    """Rows: the human's grade; columns: the judge's; in the order of ``categories``."""
    kappa_linear: float | None
    kappa_quadratic: float | None
    kappa_binary: float | None
    alpha: Mapping[str, float | None]
    exact: float | None
    topics: tuple[Topic, ...]

    @property
    def unreliable(self) -> tuple[Topic, ...]:
        return tuple(topic for topic in self.topics if topic.unreliable)

    @property
    def one_grade(self) -> bool:
        """Both sides gave one and the same grade alone: no kappa is defined."""
        return len(self.categories) == 1

    def lines(self) -> list[str]:
        undefined = " (one grade only: kappa and alpha are undefined)" if self.one_grade else ""
        exact = "NA" if self.exact is None else f"{self.exact:.4f}"
        lines = [
            f"  graded agreement on {self.pairs:,} pairs{undefined}: exact {exact}",
            f"  Cohen's kappa  linear {_number(self.kappa_linear)}  quadratic "
            f"{_number(self.kappa_quadratic)}  of relevance (label > 0) "
            f"{_number(self.kappa_binary)}",
            "  Krippendorff's alpha  "
            + "  ".join(f"{level} {_number(self.alpha[level])}" for level in LEVELS),
        ]
        if self.categories:
            width = max(6, *(len(_grade(c)) + 1 for c in self.categories))
            head = "".join(f"{_grade(c):>{width}}" for c in self.categories)
            lines += ["  confusion (rows: human grade, columns: judge grade)", f"  {'':>6}{head}"]
            lines += [
                f"  {_grade(c):>6}" + "".join(f"{n:>{width}}" for n in row)
                for c, row in zip(self.categories, self.confusion, strict=True)
            ]
        unreliable = self.unreliable
        judged = sum(1 for t in self.topics if t.pairs >= MIN_TOPIC_PAIRS)
        lines.append(
            f"  per topic: {len(unreliable)} of {judged} topics with at least "
            f"{MIN_TOPIC_PAIRS} pairs have quadratic kappa below {MIN_AGREEMENT:g} "
            f"(unreliable){':' if unreliable else ''}"
        )
        lines += [
            f"    {t.id}  kappa {_number(t.kappa)}  exact {t.exact:.2f}  mean |difference| "
            f"{t.mean_difference:.2f}  on {t.pairs} pairs"
            for t in unreliable
        ]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "exact": self.exact,
            "cohen_kappa": {
                "linear": self.kappa_linear,
                "quadratic": self.kappa_quadratic,
                "binary": self.kappa_binary,
            },
            "krippendorff_alpha": dict(self.alpha),
            "confusion": {
                "categories": list(self.categories),
                "rows": "human",
                "columns": "judge",
                "counts": [list(row) for row in self.confusion],
            },
            "topics": {
                "min_pairs": MIN_TOPIC_PAIRS,
                "threshold": MIN_AGREEMENT,
                "rule": "unreliable: at least min_pairs pairs and quadratic kappa below threshold",
                "unreliable": [t.id for t in self.unreliable],
                "each": [t.to_dict() for t in self.topics],
            },
        }

    def to_markdown(self) -> str:
        rows = [
            "| measure | value |",
            "|---|---|",
            f"| pairs | {self.pairs} |",
            f"| Cohen's kappa, linear | {_number(self.kappa_linear)} |",
            f"| Cohen's kappa, quadratic | {_number(self.kappa_quadratic)} |",
            f"| Cohen's kappa, relevance (label > 0) | {_number(self.kappa_binary)} |",
            *(f"| Krippendorff's alpha, {lv} | {_number(self.alpha[lv])} |" for lv in LEVELS),
        ]
        grades = [_grade(c) for c in self.categories]
        confusion = [
            "",
            "| human \\ judge | " + " | ".join(grades) + " |",
            "|---|" + "---|" * len(grades),
            *(
                f"| {g} | " + " | ".join(map(str, row)) + " |"
                for g, row in zip(grades, self.confusion, strict=True)
            ),
        ]
        topics = ["", f"Unreliable topics (at least {MIN_TOPIC_PAIRS} pairs, quadratic kappa "
                  f"below {MIN_AGREEMENT:g}): " + (", ".join(t.id for t in self.unreliable) or "none")]  # fmt: skip
        return "\n".join([*rows, *(confusion if grades else []), *topics]) + "\n"


def graded_agreement(human: Any, judge: Any, topics: Any) -> Graded:
    """The graded agreement of ``judge``'s labels with ``human``'s on the same pairs,
    each pair of topic ``topics[i]`` (see :class:`Graded`)."""
    a = np.asarray(human, dtype=np.float64)
    b = np.asarray(judge, dtype=np.float64)
    ids = np.asarray(topics, dtype=object).astype(str)
    if not a.shape == b.shape == ids.shape:
        raise ValueError(f"labels and topics differ in length: {a.size}, {b.size}, {ids.size}")
    categories, i, j = _codes(a, b)
    k = categories.size
    observed = np.bincount(i * k + j, minlength=k * k).reshape(k, k)
    table = observed.astype(np.float64)
    names, topic = np.unique(ids, return_inverse=True)
    per = np.zeros((names.size, k, k))
    np.add.at(per, (topic, i, j), 1.0)
    pairs = per.sum(axis=(1, 2))
    exact = np.trace(per, axis1=1, axis2=2) / np.maximum(pairs, 1)
    differences = np.bincount(topic, np.abs(a - b), minlength=names.size) / np.maximum(pairs, 1)
    kappas = _kappas(per, _weights(k, "quadratic")) if k else np.full(names.size, np.nan)
    return Graded(
        pairs=int(a.size),
        categories=tuple(float(c) for c in categories),
        confusion=tuple(tuple(int(n) for n in row) for row in observed),
        kappa_linear=_defined(float(_kappas(table, _weights(k, "linear")))) if k else None,
        kappa_quadratic=_defined(float(_kappas(table, _weights(k, "quadratic")))) if k else None,
        kappa_binary=weighted_kappa(a > 0, b > 0) if a.size else None,
        alpha={level: krippendorff_alpha(np.stack([a, b]), level) for level in LEVELS},
        exact=float(np.mean(a == b)) if a.size else None,
        topics=tuple(
            Topic(str(name), int(n), float(e), float(d), _defined(float(kappa)))
            for name, n, e, d, kappa in zip(names, pairs, exact, differences, kappas, strict=True)
        ),
    )


@attrs.frozen
class SystemOrder:
    """One metric's mean per system on the human-labelled samples under the human labels
    and under the judge's, and Kendall's tau-b between the two orders (as
    ``scipy.stats.kendalltau``; None: fewer than 2 systems, or a constant side)."""

    metric: str
    human: Mapping[str, float]
    judge: Mapping[str, float]
    tau: float | None

    def lines(self) -> list[str]:
        return [
            f"  {self.metric}: Kendall's tau {_number(self.tau)} between the systems' order "
            "under the human and the judge's labels",
            *(
                f"    {name}  human {self.human[name]:.4f}  judge {self.judge[name]:.4f}"
                for name in self.human
            ),
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "human": dict(self.human),
            "judge": dict(self.judge),
            "kendall_tau": self.tau,
        }


@attrs.frozen
class JudgeAgreement:
    """The judge's labels against the human ones on the ``pairs`` (sample, document)
    pairs both labelled, over ``samples`` samples: quadratic-weighted ``kappa``; the
    ``graded`` measures; the human-labelled pairs the judge gave no label (``missing``,
    ``sample/document``, with why where the judge's dataset says)."""

    kappa: float | None
    pairs: int
    samples: int
    binary: float | None = None
    """Cohen's kappa of relevance (label > 0) on the same pairs."""
    graded: Graded | None = None
    missing: tuple[str, ...] = ()
    rankings: tuple[SystemOrder, ...] = ()

    @property
    def sufficient(self) -> bool:
        """Whether the judge agrees well enough to decide without the human labels."""
        return self.kappa is not None and self.kappa >= MIN_AGREEMENT

    def describe(self) -> str:
        kappa = "NA" if self.kappa is None else f"{self.kappa:.2f}"
        if self.kappa is None and self.graded is not None and self.graded.one_grade:
            kappa = "undefined (one grade only)"
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

    def lines(self) -> list[str]:
        """The full report: the gate's line, the graded measures, the missing pairs."""
        lines = [self.line(), *(self.graded.lines() if self.graded is not None else [])]
        lines += [line for ranking in self.rankings for line in ranking.lines()]
        if self.missing:
            named = ", ".join(self.missing[:_NAMED])
            more = f" and {len(self.missing) - _NAMED} more" if len(self.missing) > _NAMED else ""
            lines.append(
                f"  {len(self.missing)} human-labelled pair(s) have no judge label (not asked, "
                f"or no answer: the judge's reason where it gave one; left out of the "
                f"measures): {named}{more}"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "weighted_kappa": self.kappa,
            "weights": "quadratic",
            "binary_kappa": self.binary,
            "pairs": self.pairs,
            "samples": self.samples,
            "threshold": MIN_AGREEMENT,
            "sufficient": self.sufficient,
            "graded": None if self.graded is None else self.graded.to_dict(),
            "missing": list(self.missing),
            "rankings": [ranking.to_dict() for ranking in self.rankings],
        }

    def to_markdown(self) -> str:
        graded = "" if self.graded is None else "\n" + self.graded.to_markdown()
        missing = (
            f"\n{len(self.missing)} human-labelled pair(s) without a judge label: "
            + ", ".join(self.missing)
            + "\n"
            if self.missing
            else ""
        )
        taus = "".join(
            f"- {r.metric}: Kendall's tau {_number(r.tau)} between the systems' order under "
            "the human and the judge's labels\n"
            for r in self.rankings
        )
        taus = "\n" + taus if taus else ""
        return f"### Judge agreement\n\n{self.line()}\n{graded}{missing}{taus}"


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


def _why(dataset: Any, missing: pa.Table) -> tuple[str, ...]:
    """``sample/doc`` of each missing pair, with the judge's reason where it gave one."""
    reasons: dict[tuple[str, str], str] = {
        (sample.id, str(doc)): str(why)
        for sample in dataset.samples
        if isinstance(sample.metadata.get("unjudged"), Mapping)
        for doc, why in sample.metadata["unjudged"].items()
    }
    found = []
    for sample, doc in zip(
        missing.column("id").to_pylist(), missing.column("doc").to_pylist(), strict=True
    ):
        why = reasons.get((sample, doc))
        found.append(f"{sample}/{doc}" + (f" ({why})" if why else ""))
    return tuple(found)


def judge_agreement(
    human: Any,
    judge: Any,
    systems: Mapping[str, Any] | None = None,
    metrics: Sequence[str] = (),
) -> JudgeAgreement:
    """The agreement of ``judge``'s relevance labels (a :class:`~engine.Dataset`, e.g.
    ``slotwise annotate --runs`` without ``--holes``) with ``human``'s on the pairs both
    labelled; labels ``judge`` records as a person's (its label sources) are left out.
    Human-labelled pairs of samples the judge's dataset has that it gave no label are
    named in ``missing``. With ``systems`` (name -> outputs) and ``metrics``: the
    systems' order under each set of labels (:func:`system_order`)."""
    judged = _labels(judge).join(_human_sourced(judge), keys=["id", "doc"], join_type="left anti")
    people_labels = _labels(human)
    both = people_labels.join(judged, keys=["id", "doc"], join_type="inner", right_suffix="_judge")
    both = both.sort_by([("id", "ascending"), ("doc", "ascending")])
    asked = people_labels.filter(pc.is_in(people_labels.column("id"), value_set=judge.columns.ids))
    missing = asked.select(["id", "doc"]).join(
        judged.select(["id", "doc"]), keys=["id", "doc"], join_type="left anti"
    )
    missing = missing.sort_by([("id", "ascending"), ("doc", "ascending")])
    people = both.column("label").to_numpy()
    labels = both.column("label_judge").to_numpy()
    graded = graded_agreement(people, labels, both.column("id").to_numpy(zero_copy_only=False))
    return JudgeAgreement(
        graded.kappa_quadratic,
        both.num_rows,
        len(pc.unique(both.column("id"))),
        graded.kappa_binary,
        graded,
        _why(judge, missing),
        system_order(human, judge, systems, metrics) if systems else (),
    )


def _labelled(dataset: Any, ids: Any) -> Any:
    """``dataset`` cut to the samples of ``ids`` that it has."""
    kept = pc.is_in(dataset.columns.ids, value_set=ids).to_numpy(zero_copy_only=False)
    return attrs.evolve(dataset, columns=dataset.columns.take(np.flatnonzero(kept)))


def system_order(
    human: Any, judge: Any, systems: Mapping[str, Any], metrics: Sequence[str]
) -> tuple[SystemOrder, ...]:
    """Per metric, each system's mean on the samples people labelled (relevance) under
    ``human``'s labels and under ``judge``'s (the judge's dataset as it is: a person's
    label where it keeps one), and Kendall's tau-b between the two orders."""
    relevance = human.columns.column("relevance")
    ids = human.columns.ids.filter(
        pc.fill_null(pc.greater(pc.list_value_length(relevance), 0), False)
    )
    people, judged = _labelled(human, ids), _labelled(judge, ids)
    return tuple(
        SystemOrder(metric, *means_and_tau(people, judged, systems, metric)) for metric in metrics
    )


@attrs.frozen
class Mutual:
    """Several judges' agreement among themselves: for each two judges, Cohen's kappa
    (linear, quadratic) on the pairs both graded; Krippendorff's alpha of all of them
    (a judge missing on a pair is missing data, as alpha reads it)."""

    names: tuple[str, ...]
    pairwise: tuple[tuple[str, str, int, float | None, float | None], ...]
    """(judge, judge, pairs both graded, linear kappa, quadratic kappa)."""
    alpha: Mapping[str, float | None]
    pairs: int

    def lines(self) -> list[str]:
        lines = [
            f"agreement among the {len(self.names)} judges on {self.pairs:,} pairs: "
            "Krippendorff's alpha  "
            + "  ".join(f"{level} {_number(self.alpha[level])}" for level in LEVELS)
        ]
        lines += [
            f"  {a} ~ {b}: Cohen's kappa linear {_number(linear)}  quadratic "
            f"{_number(quadratic)} on {n:,} pairs both graded"
            for a, b, n, linear, quadratic in self.pairwise
        ]
        return lines

    def text(self) -> str:
        return "\n".join(self.lines())

    def to_markdown(self) -> str:
        rows = [
            f"### Agreement among the judges ({self.pairs:,} pairs)",
            "",
            "| measure | value |",
            "|---|---|",
            *(f"| Krippendorff's alpha, {lv} | {_number(self.alpha[lv])} |" for lv in LEVELS),
            *(
                f"| {a} ~ {b}: Cohen's kappa linear / quadratic ({n} pairs) | "
                f"{_number(lin)} / {_number(quad)} |"
                for a, b, n, lin, quad in self.pairwise
            ),
        ]
        return "\n".join(rows) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "judges": list(self.names),
            "pairs": self.pairs,
            "krippendorff_alpha": dict(self.alpha),
            "pairwise": [
                {"judges": [a, b], "pairs": n, "linear_kappa": lin, "quadratic_kappa": quad}
                for a, b, n, lin, quad in self.pairwise
            ],
        }


def mutual_agreement(names: Any, grades: Any) -> Mutual:
    """The agreement among judges ``names`` of their ``grades`` (judges x pairs, NaN
    where a judge gave none), see :class:`Mutual`."""
    matrix = np.asarray(grades, dtype=np.float64)
    names = tuple(names)
    pairwise = []
    for first in range(len(names)):
        for second in range(first + 1, len(names)):
            both = ~np.isnan(matrix[first]) & ~np.isnan(matrix[second])
            a, b = matrix[first, both], matrix[second, both]
            pairwise.append(
                (
                    names[first],
                    names[second],
                    int(both.sum()),
                    weighted_kappa(a, b, "linear"),
                    weighted_kappa(a, b, "quadratic"),
                )
            )
    return Mutual(
        names,
        tuple(pairwise),
        {level: krippendorff_alpha(matrix, level) for level in LEVELS},
        int(matrix.shape[1]),
    )
