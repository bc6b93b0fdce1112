"""RAG ranking metrics: what the passages in the LLM's slots contain (see docs/metrics.md).

A sample with no output is scored as an empty ranking (``D_k`` empty): context precision,
coverage recall and context recall are then 0, chunk attribution and claim precision are
NA and answer containment is 0.

Context recall and claim precision read the reference answer's claims
(``expected_output.claims``) and their support links: the group named by a claim's id
lists the passages that support it (``slotwise annotate --task claims,support`` writes both).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine import Batch, MetricBase, finite_number, optional_k, row_sums

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
_SPACE = re.compile(r"\s+")


def _threshold() -> float:
    return attrs.field(default=1.0, validator=finite_number, kw_only=True)  # type: ignore[no-any-return]


def _divide(numerator: FloatArray, denominator: FloatArray, empty: float) -> FloatArray:
    """numerator / denominator, ``empty`` where the denominator is 0."""
    out = np.full(np.broadcast(numerator, denominator).shape, empty)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


class _Rag(MetricBase):
    family: ClassVar[str] = "rag"


@attrs.frozen
class ContextPrecisionAtK(_Rag):
    """Mean of P@i over the relevant ranks i <= k; 0 when no relevant item is in the top k
    (RAGAS-style context precision). A sample with no output scores 0."""

    alias: ClassVar[str] = "context-precision-at-k"
    requires: ClassVar[frozenset[str]] = frozenset({"relevance"})
    k: int | None = optional_k()
    relevance_threshold: float = _threshold()

    def score(self, batch: Batch) -> FloatArray:
        hits = batch.relevant(self.relevance_threshold) & batch.top_k(self.k)
        found = np.cumsum(hits, axis=1, dtype=np.float64)
        precision_sum = row_sums(np.where(hits, found / batch.ranks[None, :], 0.0))
        return _divide(precision_sum, hits.sum(axis=1).astype(np.float64), empty=0.0)


@attrs.frozen
class CoverageRecallAtK(_Rag):
    """Fraction of the sample's groups (facets) with at least one id in the top k; NA when
    the sample has no groups. A sample with no output scores 0."""

    alias: ClassVar[str] = "coverage-recall-at-k"
    k: int | None = optional_k()

    def score(self, batch: Batch) -> FloatArray:
        covered = _covered_groups(batch, self.k)
        return _divide(_per_sample(batch, covered), batch.groups.count.astype(np.float64), np.nan)


@attrs.frozen
class NuggetRecallAtK(CoverageRecallAtK):
    """Nugget recall at k: the same per-sample value as coverage-recall-at-k."""

    alias: ClassVar[str] = "nugget-recall-at-k"


def _covered_groups(batch: Batch, k: int | None) -> BoolArray:
    """Per group of the batch (in order), whether one of its ids is in its sample's top k."""
    groups = batch.groups
    hit = batch.in_top_k(groups.sample, groups.code, k)
    return np.bincount(groups.group, weights=hit, minlength=int(groups.count.sum())) > 0


def _per_sample(batch: Batch, of_groups: BoolArray) -> FloatArray:
    """How many groups of each sample are flagged in ``of_groups``."""
    owner = np.repeat(np.arange(len(batch)), batch.groups.count)
    return np.bincount(owner, weights=of_groups, minlength=len(batch)).astype(np.float64)


def _claim_groups(batch: Batch) -> tuple[BoolArray, FloatArray]:
    """Per group of the batch, whether a claim of its sample has its name; per sample,
    its number of claims, NaN when it has none or none of them has a group (its support
    was never judged)."""
    claims = batch.columns.column("claims")
    names = pc.list_flatten(batch.columns.column("groups")).field("group")
    ids = pc.list_flatten(claims)
    codes = pc.dictionary_encode(pa.concat_arrays([ids, names])).indices
    codes = codes.to_numpy(zero_copy_only=False).astype(np.int64)
    count = pc.list_value_length(claims).fill_null(0).to_numpy().astype(np.int64)
    claim_owner = np.repeat(np.arange(len(batch), dtype=np.int64), count)
    group_owner = np.repeat(np.arange(len(batch), dtype=np.int64), batch.groups.count)
    named = np.isin(
        (group_owner << 32) | codes[len(ids) :], (claim_owner << 32) | codes[: len(ids)]
    )
    claimed = np.where(_per_sample(batch, named) > 0, count.astype(np.float64), np.nan)
    return named, claimed


@attrs.frozen
class ContextRecallAtK(_Rag):
    """Share of the sample's claims supported by at least one top-k passage (a claim's
    supporting passages: the group named by its id); NA when the sample has no claims or
    none of them has a group. A sample with no output scores 0."""

    alias: ClassVar[str] = "context-recall-at-k"
    k: int | None = optional_k()

    def score(self, batch: Batch) -> FloatArray:
        named, claimed = batch.shared(("rag", "claim-groups"), lambda: _claim_groups(batch))
        supported = _per_sample(batch, named & _covered_groups(batch, self.k))
        return _divide(supported, claimed, np.nan)


@attrs.frozen
class ClaimPrecisionAtK(_Rag):
    """Share of the top-k passages that support at least one of the sample's claims; NA
    when the top k is empty or the sample has no claims with a group."""

    alias: ClassVar[str] = "claim-precision-at-k"
    k: int | None = optional_k()

    def score(self, batch: Batch) -> FloatArray:
        named, claimed = batch.shared(("rag", "claim-groups"), lambda: _claim_groups(batch))
        groups = batch.groups
        member = named[groups.group]
        pairs = np.unique((groups.sample[member] << 32) | groups.code[member])
        rows = pairs >> 32
        found = batch.in_top_k(rows, pairs & 0xFFFFFFFF, self.k)
        supporting = np.bincount(rows, weights=found, minlength=len(batch)).astype(np.float64)
        slots = batch.top_k(self.k).sum(axis=1).astype(np.float64)
        return np.where(np.isnan(claimed), np.nan, _divide(supporting, slots, np.nan))


@attrs.frozen
class ChunkAttributionRate(_Rag):
    """|cited ∩ top k| / |top k|: the share of the slots the answer cites; NA when the top k
    is empty (including a sample with no output)."""

    alias: ClassVar[str] = "chunk-attribution-rate"
    requires: ClassVar[frozenset[str]] = frozenset({"cited"})
    k: int | None = optional_k()

    def score(self, batch: Batch) -> FloatArray:
        top = batch.top_k(self.k)
        cited = batch.member("cited")
        return _divide(
            (cited & top).sum(axis=1).astype(np.float64),
            top.sum(axis=1).astype(np.float64),
            empty=np.nan,
        )


@attrs.frozen
class AnswerContainmentAtK(_Rag):
    """1 if an expected answer appears in the text of a top-k passage, else 0 (0 for a
    sample with no output)."""

    alias: ClassVar[str] = "answer-containment-at-k"
    requires: ClassVar[frozenset[str]] = frozenset({"answers", "texts"})
    k: int | None = optional_k()
    case_sensitive: bool = attrs.field(
        default=False, validator=attrs.validators.instance_of(bool), kw_only=True
    )

    def _normalise(self, text: str) -> str:
        text = _SPACE.sub(" ", text).strip()
        return text if self.case_sensitive else text.casefold()

    def matched_ranks(self, batch: Batch) -> list[int | None]:
        """Per sample, the first rank (1-based, within the top k) whose text contains an
        answer; answers that normalise to the empty string never match."""
        matched: list[int | None] = []
        for answers_given, texts, cutoff in zip(
            batch.answers, batch.ranked_texts, batch.cutoffs(self.k).tolist(), strict=True
        ):
            answers = [a for a in map(self._normalise, answers_given or ()) if a]
            rank = None
            for r, text in enumerate(texts[:cutoff], start=1):
                if text is not None:
                    normalised = self._normalise(text)
                    if any(a in normalised for a in answers):
                        rank = r
                        break
            matched.append(rank)
        return matched

    def score(self, batch: Batch) -> FloatArray:
        return np.array([rank is not None for rank in self.matched_ranks(batch)], dtype=np.float64)

    def details(self, batch: Batch) -> Sequence[Mapping[str, Any] | None]:
        return [{"matched_rank": rank} for rank in self.matched_ranks(batch)]
