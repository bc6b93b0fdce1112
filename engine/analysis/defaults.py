"""The statistics' and the regression gate's defaults, in a module that imports nothing:
the command line shows them in its options without importing numpy
(:mod:`engine.analysis.stats` and :mod:`engine.analysis.compare` use them)."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "DEFAULT_TEST_RESAMPLES",
    "MAX_JUDGED_DROP",
    "TESTS",
    "Test",
]

Test = Literal["randomization", "bootstrap", "t"]
TESTS: tuple[Test, ...] = ("randomization", "bootstrap", "t")

DEFAULT_SEED = 0
DEFAULT_RESAMPLES = 1000  # for confidence intervals of a mean
DEFAULT_TEST_RESAMPLES = 10_000  # for p-values, which need the tail

#: The most judged@k may fall below the baseline's before the gate fails (an absolute share).
MAX_JUDGED_DROP = 0.05
