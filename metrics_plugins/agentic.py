"""The agentic family: samples whose system retrieved several times (docs/agents.md).

A sample's hops are its output's ``hops`` in order of arrival (an output without hops is
one hop: its ``retrieved``). Evidence is a document labelled >= ``relevance_threshold``.
A hop *retrieved* the ids of its ranking (whole: a hop's ranking is what its retriever
returned), *reached* those and its pool, and *prompted* its ``selected`` ids (its
ranking when it gives none). The final context is the output's ``retrieved``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from engine import Batch, MetricBase, finite_number
from engine.evaluation.hops import Evidence, evidence, redundant_hops

FloatArray = npt.NDArray[np.float64]

WORST = 5  # samples listed per class by AgenticDiagnosis.summarize


def _threshold() -> Any:
    return attrs.field(default=1.0, validator=finite_number, kw_only=True)


def _divide(numerator: FloatArray, denominator: FloatArray) -> FloatArray:
    """numerator / denominator; NA (NaN) where the denominator is 0."""
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


class _Agentic(MetricBase):
    requires: ClassVar[frozenset[str]] = frozenset({"relevance"})
    family: ClassVar[str] = "agentic"
    relevance_threshold: float

    def evidence(self, batch: Batch) -> Evidence:
        return evidence(batch, self.relevance_threshold)

    def count(self, batch: Batch, where: npt.ArrayLike) -> FloatArray:
        return self.evidence(batch).per_sample(where, len(batch))


@attrs.frozen
class EvidenceRecallAnyHop(_Agentic):
    """|evidence retrieved by some hop| / |evidence|; NA without evidence."""

    alias: ClassVar[str] = "agentic-evidence-recall"
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        found = self.evidence(batch)
        return _divide(self.count(batch, found.retrieved > 0), self.count(batch, 1.0))


@attrs.frozen
class FirstHop(_Agentic):
    """The mean, over the evidence some hop retrieved, of the first hop (1, 2, ...) that
    retrieved it; NA when no hop retrieved any. ``details``: each piece's first hop."""

    alias: ClassVar[str] = "agentic-first-hop"
    higher_is_better: ClassVar[bool] = False
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        found = self.evidence(batch)
        return _divide(self.count(batch, found.retrieved), self.count(batch, found.retrieved > 0))

    def details(self, batch: Batch) -> Sequence[Mapping[str, Any] | None]:
        found = self.evidence(batch)
        out: list[dict[str, Any] | None] = [{"first_hop": {}} for _ in range(len(batch))]
        for row, doc, hop in zip(
            found.row.tolist(), batch.doc_ids(found.code), found.retrieved.tolist(), strict=True
        ):
            out[row]["first_hop"][doc] = hop or None
        failed = (~batch.has_output).tolist()
        return [None if f else o for o, f in zip(out, failed, strict=True)]


@attrs.frozen
class RedundantHops(MetricBase):
    """|hops after the first that retrieved no id an earlier hop had not| / (hops - 1);
    NA for a sample of one hop. Needs no labels."""

    alias: ClassVar[str] = "agentic-redundant-hops"
    higher_is_better: ClassVar[bool] = False
    family: ClassVar[str] = "agentic"

    def score(self, batch: Batch) -> FloatArray:
        redundant, count = redundant_hops(batch)
        return _divide(redundant.astype(np.float64), (count - 1).astype(np.float64))


@attrs.frozen
class UnpromptedEvidence(_Agentic):
    """|evidence some hop reached (retrieved or pooled) that no hop put into a prompt| /
    |evidence some hop reached|; NA when no hop reached any."""

    alias: ClassVar[str] = "agentic-unprompted-evidence"
    higher_is_better: ClassVar[bool] = False
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        found = self.evidence(batch)
        lost = (found.reached > 0) & (found.prompted == 0)
        return _divide(self.count(batch, lost), self.count(batch, found.reached > 0))


@attrs.frozen
class AgenticDiagnosis(_Agentic):
    """|evidence in the final context| / |evidence|; NA without evidence. ``details``
    counts, per sample, the evidence found and each missed piece by why it was missed
    (retrieval: no hop reached it; selection: reached at hop i, never prompted; context:
    prompted at hop i, dropped from the final context), and names each missed piece with
    its class and hop; ``summarize`` counts the classes over the run and per hop."""

    alias: ClassVar[str] = "agentic-diagnosis"
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        found = self.evidence(batch)
        return _divide(self.count(batch, found.final), self.count(batch, 1.0))

    def _hops(self, found: Evidence, classes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Per piece: the hop its class is about (selection: the first that reached it;
        context: the last that prompted it; found and retrieval: 0)."""
        return np.where(classes == 2, found.reached, np.where(classes == 3, found.last_prompted, 0))

    def details(self, batch: Batch) -> Sequence[Mapping[str, Any] | None]:
        found = self.evidence(batch)
        classes = found.classes()
        hops = self._hops(found, classes)
        out: list[dict[str, Any]] = [
            {**dict.fromkeys(Evidence.CLASSES, 0), "missed": []} for _ in range(len(batch))
        ]
        failed = ~batch.has_output
        for row, doc, c, hop in zip(
            found.row.tolist(),
            batch.doc_ids(found.code),
            classes.tolist(),
            hops.tolist(),
            strict=True,
        ):
            out[row][Evidence.CLASSES[c]] += 1
            if c:  # found: 0
                out[row]["missed"].append(
                    {"id": doc, "class": Evidence.CLASSES[c], "hop": hop or None}
                )
        return [None if f else o for o, f in zip(out, failed.tolist(), strict=True)]

    def summarize(self, batch: Batch, values: FloatArray) -> Mapping[str, Any]:
        """Evidence per class over the run (a failed sample's left out); per hop, the pieces lost there (selection:
        reached first at that hop; context: last prompted at it); the samples that lost
        the most evidence of each class."""
        found = self.evidence(batch)
        failed = np.isnan(values) | ~batch.has_output
        classes = np.where(failed[found.row], -1, found.classes())
        hops = self._hops(found, classes)
        counts = {name: int((classes == c).sum()) for c, name in enumerate(Evidence.CLASSES)}
        per_hop: dict[str, dict[str, int]] = {}
        for c in (2, 3):
            numbers, tally = np.unique(hops[classes == c], return_counts=True)
            for number, n in zip(numbers.tolist(), tally.tolist(), strict=True):
                per_hop.setdefault(str(number), {"selection": 0, "context": 0})
                per_hop[str(number)][Evidence.CLASSES[c]] = n
        ids = np.array(batch.sample_ids, dtype=object)
        worst = {}
        for c in (1, 2, 3):
            lost = found.per_sample(classes == c, len(batch))
            rows = np.flatnonzero(lost > 0)
            rows = rows[np.argsort(-lost[rows], kind="stable")][:WORST]
            worst[Evidence.CLASSES[c]] = [
                {"id": i, "missed": int(n)}
                for i, n in zip(ids[rows].tolist(), lost[rows].tolist(), strict=True)
            ]
        return {
            "counts": counts,
            "per_hop": dict(sorted(per_hop.items(), key=lambda item: int(item[0]))),
            "worst": worst,
        }
