"""RAG ranking metrics: what the passages in the LLM's slots contain."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from engine import Batch, MetricBase, optional_k

FloatArray = npt.NDArray[np.float64]
_SPACE = re.compile(r"\s+")


@attrs.frozen
class AnswerContainmentAtK(MetricBase):
    """1 if an expected answer appears in the text of a top-k passage, else 0."""

    alias: ClassVar[str] = "answer-containment-at-k"
    family: ClassVar[str] = "rag"
    requires: ClassVar[frozenset[str]] = frozenset({"answers", "texts"})
    k: int | None = optional_k()
    case_sensitive: bool = attrs.field(
        default=False, validator=attrs.validators.instance_of(bool), kw_only=True
    )

    def _normalise(self, text: str) -> str:
        text = _SPACE.sub(" ", text).strip()
        return text if self.case_sensitive else text.casefold()

    def matched_ranks(self, batch: Batch) -> list[int | None]:
        """Per sample, the first rank (1-based, within the top k) whose text contains an answer."""
        matched: list[int | None] = []
        for sample, texts, cutoff in zip(
            batch.samples, batch.ranked_texts, batch.cutoffs(self.k), strict=True
        ):
            answers = [self._normalise(a) for a in sample.answers or ()]
            rank = next(
                (
                    r
                    for r, text in enumerate(texts[:cutoff], start=1)
                    if text is not None and any(a in self._normalise(text) for a in answers)
                ),
                None,
            )
            matched.append(rank)
        return matched

    def score(self, batch: Batch) -> FloatArray:
        return np.array([rank is not None for rank in self.matched_ranks(batch)], dtype=np.float64)

    def details(self, batch: Batch) -> Sequence[Mapping[str, Any] | None]:
        return [{"matched_rank": rank} for rank in self.matched_ranks(batch)]
