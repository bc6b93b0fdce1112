"""Tools for testing with slotwise, none of which needs pytest: a regression gate for CI
scripts and test suites (:func:`assert_no_regression`: regressed and can't tell fail,
held passes), :func:`make_batch`, which compiles
raw sample and output dicts into the :class:`~engine.Batch` that ``score`` receives (so a
metric's own tests can pin values by hand), and ``SAMPLES`` and ``OUTPUTS``, a small
fixture that carries every requirement kind of :data:`engine.evaluation.metric.REQUIREMENTS`
and the usual edge cases.

:class:`MetricConformance`, the conformance kit for metric plugins in the spirit of
``keyring.testing``, is pytest's: it is imported from :mod:`engine.testing.conformance`
when first asked for (``from engine.testing import MetricConformance``), so that this
module imports without pytest::

    from engine.testing import MetricConformance, make_batch

    class TestJunkAtK(MetricConformance):
        metric_class = JunkAtK
        params = {"k": 3}
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.analysis.compare import compare
from engine.analysis.defaults import MAX_JUDGED_GAP, MIN_JUDGED
from engine.analysis.stats import Test
from engine.analysis.verdict import CANT_TELL, HELD, gate
from engine.errors import MissingDependencyError
from engine.evaluation.results import Results, read_results
from engine.testing.fixture import OUTPUTS, SAMPLES, make_batch

if TYPE_CHECKING:
    from engine.analysis.verdict import Gate
    from engine.testing.conformance import MetricConformance

__all__ = [
    "OUTPUTS",
    "SAMPLES",
    "Inconclusive",
    "MetricConformance",
    "assert_no_regression",
    "make_batch",
]


class Inconclusive(AssertionError):
    """The gate can't tell whether the results regressed; the message says why."""


def __getattr__(name: str) -> Any:
    """``MetricConformance``, imported on first use (it needs pytest)."""
    if name != "MetricConformance":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from engine.testing.conformance import MetricConformance
    except ImportError as error:
        if error.name != "pytest":
            raise
        raise MissingDependencyError("engine.testing.MetricConformance", "test", error) from None
    return MetricConformance


def assert_no_regression(
    results: Results,
    baseline: Results | str | os.PathLike[str],
    *,
    max_drop: float | Mapping[str, float] | None = None,
    alpha: float = 0.05,
    metrics: Sequence[str] | None = None,
    test: Test = "randomization",
    allow_failures: bool = False,
    min_judged: float | None = MIN_JUDGED,
    max_judged_gap: float | None = MAX_JUDGED_GAP,
    allow_inconclusive: bool = False,
    dataset: Any = None,
    ppi: Any = None,
    agreement: Any = None,
) -> Gate:
    """The verdict of ``results`` against ``baseline`` (results, or a results file) on the
    metrics they share (or ``metrics``), by the gate of ``slotwise compare
    --fail-on-regression`` (:func:`engine.analysis.verdict.gate`, with the same
    options): returned when it held; ``AssertionError`` naming each regression when it
    regressed; :class:`Inconclusive` (an ``AssertionError``) naming why when it can't
    tell, unless ``allow_inconclusive``. ``dataset`` re-scores both (their kept outputs)
    on newer labels first. ``ppi``: a paired PPI report of ``results - baseline``
    (``Evaluation.ppi(outputs, predictions, baseline=...)``), which then makes the verdict;
    ``agreement``: the judge's agreement with the human labels
    (:func:`engine.analysis.agreement.judge_agreement`)."""
    __tracebackhide__ = True  # pytest shows the message, not this frame
    before = baseline if isinstance(baseline, Results) else read_results(baseline)
    comparison = compare(
        [before, results],
        names=["baseline", "current"],
        metrics=metrics,
        alpha=alpha,
        test=test,
        dataset=dataset,
    )
    verdict = gate(
        comparison,
        max_drop=max_drop,
        allow_failures=allow_failures,
        min_judged=min_judged,
        max_judged_gap=max_judged_gap,
        ppi=None if ppi is None else {"current": ppi},
        agreement=agreement,
    )
    if verdict.outcome == HELD or (verdict.outcome == CANT_TELL and allow_inconclusive):
        return verdict
    kind = Inconclusive if verdict.outcome == CANT_TELL else AssertionError
    raise kind("\n".join(verdict.lines()))
