"""The statistics' and the regression gate's defaults, in a module that imports nothing:
the command line shows them in its options without importing numpy
(:mod:`engine.analysis.stats` and :mod:`engine.analysis.compare` use them)."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "DEFAULT_TEST_RESAMPLES",
    "EXIT_CANT_TELL",
    "FAMILY_MARGINS",
    "MAX_JUDGED_GAP",
    "MIN_AGREEMENT",
    "MIN_HELD_PAIRS",
    "MIN_JUDGED",
    "MIN_PPI_LABELLED",
    "TESTS",
    "Test",
]

Test = Literal["randomization", "bootstrap", "t"]
TESTS: tuple[Test, ...] = ("randomization", "bootstrap", "t")

DEFAULT_SEED = 0
DEFAULT_RESAMPLES = 1000  # for confidence intervals of a mean
DEFAULT_TEST_RESAMPLES = 10_000  # for p-values, which need the tail

#: The exit status of a gate that can't tell (regressed: 1, held: 0).
EXIT_CANT_TELL = 4

#: The margin of each metric family: *held* means the paired interval of the change shows
#: the system did not get worse by more than this (an absolute amount on the metric's
#: scale). Set-based and RAG metrics are scored at a few prompt slots, so each sample
#: moves in coarser steps: their margin is wider. Metrics not on a 0-1 scale (DCG, counts)
#: want a margin of their own (``--max-drop LABEL=AMOUNT``).
FAMILY_MARGINS = {
    "retrieval": 0.01,
    "diversity": 0.01,
    "utility": 0.01,
    "set-based": 0.02,
    "rag": 0.02,
    "other": 0.01,
}

#: The least judged@k (labelled share of the top-k documents) a system needs for a verdict.
MIN_JUDGED = 0.9

#: The most two systems' judged@k may differ by before their comparison can't tell.
MAX_JUDGED_GAP = 0.05

#: The fewest human-labelled samples a PPI interval needs to make a verdict: PPI's
#: interval is a normal one, and with 20 a judge biased against the later system gave
#: 5.8% false regressed (benchmarks/gate_simulation.py; at most 4.0% from 40).
MIN_PPI_LABELLED = 40

#: The fewest pairs whose interval can show a change held: with fewer, most differences
#: are 0 and the percentile interval is [0, 0] or a sliver whatever the true drop (by
#: simulation, benchmarks/gate_simulation.py: up to 25% false held at 6-10 pairs, under 5%
#: from 20).
MIN_HELD_PAIRS = 20

#: The least agreement (quadratic-weighted Cohen's kappa on the graded labels both gave)
#: a judge needs with the human sample to give a verdict without it.
MIN_AGREEMENT = 0.6

#: ``slotwise relabel``'s rule (:mod:`engine.analysis.relabel`): the least overlap, as a
#: share of the shorter of a chunk and a span, for the chunk to cover the span; and the
#: least labelled share of a chunk that is given a grade <= 0.
MIN_COVERAGE = 0.5
