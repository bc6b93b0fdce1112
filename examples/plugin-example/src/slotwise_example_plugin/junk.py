"""junk@k: how much of what the LLM sees in its k slots was judged useless."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import numpy.typing as npt
from engine import Batch, MetricBase, optional_k


@attrs.frozen
class JunkAtK(MetricBase):
    """Share of the top k judged non-relevant (label <= 0); unjudged documents are not junk."""

    alias: ClassVar[str] = "example-junk-at-k"
    family: ClassVar[str] = "example"
    requires: ClassVar[frozenset[str]] = frozenset({"relevance"})
    higher_is_better: ClassVar[bool] = False
    k: int | None = optional_k()

    def score(self, batch: Batch) -> npt.NDArray[np.float64]:
        # ranked_labels is NaN for unjudged documents and padding: NaN <= 0 is False.
        with np.errstate(invalid="ignore"):
            junk = (batch.ranked_labels <= 0) & batch.top_k(self.k)
        # Divide by k, not by the number retrieved: an empty slot is not junk.
        return junk.sum(axis=1) / batch.cutoffs(self.k).astype(np.float64)
