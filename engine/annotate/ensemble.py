"""Several judges as one: each judge labels the same pooled pairs
(:func:`~engine.annotate.holes.fill_holes` once per judge), and their grades are combined
per pair.

- ``majority``: the grade most judges gave; a tie goes to the **lower** grade (a pair
  the judges split on is not called more relevant than half of them said).
- ``mean``: the mean of the judges' grades rounded to the nearest integer grade, a half
  going **down** (1.5 -> 1), for the same reason.

A judge that gave no grade for a pair (an unreadable answer, a failed call) is missing
for that pair and said so: the rule combines the judges that answered; a pair no judge
answered is left unlabelled (``metadata.unjudged``, each judge's reason).

Written with the labels, in each sample's metadata (document -> value):

- ``label_sources[doc]``: ``RULE(SOURCE_A|SOURCE_B|...)``;
- ``judges[doc]``: each judge's grade, ``null`` where it gave none, e.g.
  ``{"gpt-4o": 2, "llama-3.1-70b": 1}``;
- ``judge_spread[doc]``: the highest grade the judges gave for the pair minus the
  lowest (0: they agree, or one answered alone), the judges' disagreement, which
  ``slotwise sample --active`` can read as the judge's uncertainty
  (:meth:`Ensemble.uncertainty` writes it as that command's ``--uncertainty`` file).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from engine.annotate.records import long_form, mark_human, set_relevance, set_unjudged, sources_of

__all__ = ["JUDGES_KEY", "RULES", "SPREAD_KEY", "Ensemble", "combine", "combine_grades"]

RULES = ("majority", "mean")
#: The metadata key mapping documents to each judge's grade (null: it gave none).
JUDGES_KEY = "judges"
#: The metadata key mapping documents to the judges' spread (highest - lowest grade).
SPREAD_KEY = "judge_spread"

FloatArray = npt.NDArray[np.float64]


def combine_grades(grades: Any, rule: str) -> tuple[FloatArray, FloatArray]:
    """The combined grade and the spread of each column of ``grades`` (judges x pairs,
    NaN where a judge gave none); NaN for both where no judge answered."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; rules: {', '.join(RULES)}")
    matrix = np.asarray(grades, dtype=np.float64)
    answered = ~np.isnan(matrix)
    some = answered.any(axis=0)
    filled = np.where(answered, matrix, 0.0)
    count = answered.sum(axis=0)
    high = np.where(answered, matrix, -np.inf).max(axis=0, initial=-np.inf)
    low = np.where(answered, matrix, np.inf).min(axis=0, initial=np.inf)
    spread = np.where(some, high - low, np.nan)
    if rule == "mean":
        mean = filled.sum(axis=0) / np.maximum(count, 1)
        return np.where(some, np.ceil(mean - 0.5), np.nan), spread
    values = np.unique(matrix[answered])
    votes = ((matrix[:, :, None] == values[None, None, :]) & answered[:, :, None]).sum(axis=0)
    chosen = values[np.argmax(votes, axis=1)] if values.size else np.zeros(matrix.shape[1])
    return np.where(some, chosen, np.nan), spread  # argmax: the first, lowest, of a tie


@attrs.define
class Ensemble:
    """What combining found: the judges' names and label sources, every pair any judge
    was asked about (``pairs``: ``sample/doc``), their grades (judges x pairs, NaN where
    a judge gave none), and the counts."""

    rule: str
    names: tuple[str, ...]
    sources: tuple[str, ...]
    pairs: list[tuple[str, str]] = attrs.field(factory=list)
    grades: FloatArray = attrs.field(factory=lambda: np.zeros((0, 0)))
    written: int = 0
    unjudged: list[str] = attrs.field(factory=list)

    @property
    def source(self) -> str:
        return f"{self.rule}({'|'.join(self.sources)})"

    def missing(self) -> dict[str, int]:
        """Per judge, the pairs it gave no grade for."""
        return {
            name: int(n)
            for name, n in zip(self.names, np.isnan(self.grades).sum(axis=1), strict=True)
        }

    def uncertainty(self, unit: str = "pair") -> list[dict[str, Any]]:
        """The judges' disagreement as ``slotwise sample --active --uncertainty`` reads it
        (``{query_id, doc_id, uncertainty}`` a pair; ``{query_id, uncertainty}`` a query):
        a pair's is the standard deviation of the judges' grades (ddof 0: 0 where they
        agree or one answered alone; a pair no judge answered gets the most any pair can
        have, half the range of the grades given); a query's is the mean of its pairs'."""
        answered = ~np.isnan(self.grades)
        count = answered.sum(axis=0)
        filled = np.where(answered, self.grades, 0.0)
        mean = filled.sum(axis=0) / np.maximum(count, 1)
        spread = np.sqrt(
            (np.where(answered, filled - mean, 0.0) ** 2).sum(axis=0) / np.maximum(count, 1)
        )
        given = self.grades[answered]
        most = (given.max() - given.min()) / 2 if given.size else 0.0
        spread = np.where(count > 0, spread, most)
        if unit == "pair":
            return [
                {"query_id": q, "doc_id": d, "uncertainty": float(u)}
                for (q, d), u in zip(self.pairs, spread, strict=True)
            ]
        names, at = np.unique(
            np.array([q for q, _ in self.pairs], dtype=object).astype(str), return_inverse=True
        )
        per = np.bincount(at, spread, minlength=names.size) / np.bincount(at, minlength=names.size)
        return [
            {"query_id": str(q), "uncertainty": float(u)} for q, u in zip(names, per, strict=True)
        ]

    def lines(self) -> list[str]:
        missing = ", ".join(f"{name} {n}" for name, n in self.missing().items())
        return [
            f"judges combined by {self.rule} ({', '.join(self.names)}): {self.written} labels "
            f"written, source {self.source}; pairs a judge gave no grade (null in "
            f"metadata.judges; the others' grades decide): {missing}"
            + (f"; {len(self.unjudged)} pair(s) no judge answered" if self.unjudged else "")
        ]


def _answers(raw: Mapping[str, Any], source: str) -> tuple[dict[str, float], dict[str, str]]:
    """One judge's grades of a sample (document -> grade) and the pairs it left
    unlabelled (document -> why)."""
    metadata = raw.get("metadata") or {}
    relevance = long_form(copy.deepcopy(dict(raw))).get("relevance") or {}
    if isinstance(relevance, list):
        relevance = dict.fromkeys(relevance, 1)
    grades = {
        str(doc): float(relevance[doc])
        for doc, given in sources_of(metadata).items()
        if given == source and doc in relevance
    }
    return grades, {str(d): str(why) for d, why in (metadata.get("unjudged") or {}).items()}


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else float(value)


def combine(
    raws: Sequence[Mapping[str, Any]],
    judged: Sequence[tuple[str, Sequence[Mapping[str, Any]], str]],
    rule: str = "majority",
) -> tuple[list[dict[str, Any]], Ensemble]:
    """The raw samples labelled by the judges combined: ``judged`` holds each judge's
    (name, the samples it labelled, its label source) over the same ``raws``."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; rules: {', '.join(RULES)}")
    names = tuple(name for name, _, _ in judged)
    ensemble = Ensemble(rule, names, tuple(source for _, _, source in judged))
    result = [copy.deepcopy(dict(raw)) for raw in raws]
    rows: list[tuple[int, str]] = []
    columns: list[list[float]] = [[] for _ in judged]
    reasons: list[dict[str, str]] = []
    for row, raw in enumerate(result):
        mark_human(raw)
        answers = [_answers(labelled[row], source) for _, labelled, source in judged]
        docs = dict.fromkeys(d for got, why in answers for d in [*got, *why])
        for doc in docs:
            rows.append((row, doc))
            for column, (got, _) in zip(columns, answers, strict=True):
                column.append(got.get(doc, np.nan))
            reasons.append(
                {
                    name: why.get(doc, "no answer")
                    for name, (got, why) in zip(names, answers, strict=True)
                    if doc not in got
                }
            )
    grades = np.array(columns, dtype=np.float64).reshape(len(judged), len(rows))
    combined, spread = combine_grades(grades, rule)
    ensemble.grades = grades
    for at, (row, doc) in enumerate(rows):
        raw = result[row]
        ensemble.pairs.append((str(raw["id"]), doc))
        metadata = raw.setdefault("metadata", {})
        given = {
            n: None if np.isnan(g) else _number(g)
            for n, g in zip(names, grades[:, at], strict=True)
        }
        metadata[JUDGES_KEY] = {**(metadata.get(JUDGES_KEY) or {}), doc: given}
        if np.isnan(combined[at]):
            why = "; ".join(f"{name}: {reason}" for name, reason in reasons[at].items())
            set_unjudged(raw, doc, f"no judge answered ({why})")
            ensemble.unjudged.append(f"{raw['id']}/{doc}")
            continue
        metadata[SPREAD_KEY] = {**(metadata.get(SPREAD_KEY) or {}), doc: _number(spread[at])}
        set_relevance(raw, doc, _number(combined[at]), ensemble.source)
        ensemble.written += 1
    return result, ensemble
