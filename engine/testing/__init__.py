"""Tools for testing with slotwise, none of which needs pytest: a regression gate for CI
scripts and test suites (:func:`assert_no_regression`), :func:`make_batch`, which compiles
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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.analysis.compare import MAX_JUDGED_DROP, compare, gate_rule, ppi_regressions
from engine.analysis.stats import Test
from engine.errors import MissingDependencyError
from engine.evaluation.results import Results, read_results
from engine.testing.fixture import OUTPUTS, SAMPLES, make_batch

if TYPE_CHECKING:
    from engine.testing.conformance import MetricConformance

__all__ = ["OUTPUTS", "SAMPLES", "MetricConformance", "assert_no_regression", "make_batch"]


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
    max_drop: float | None = None,
    alpha: float = 0.05,
    metrics: Sequence[str] | None = None,
    test: Test = "randomization",
    allow_failures: bool = False,
    max_judged_drop: float | None = MAX_JUDGED_DROP,
    dataset: Any = None,
    ppi: Any = None,
) -> None:
    """Fail (``AssertionError``) when ``results`` fell below ``baseline`` (results, or a
    results file) on a metric they share (or on ``metrics``), by the gate of ``slotwise
    compare --fail-on-regression``: significantly worse after Holm's correction at
    ``alpha``, worse by more than ``max_drop`` whatever the p, (unless
    ``allow_failures``) failing on more samples than the baseline (error rows, a metric
    failing), or with a judged@k lower than the baseline's by more than
    ``max_judged_drop`` (None: not gated). ``dataset`` re-scores both (their kept
    outputs) on newer labels first. ``ppi``: a paired PPI report of ``results - baseline``
    (``Evaluation.ppi(outputs, predictions, baseline=...)``): an interval wholly on the
    worse side of 0, or an estimated drop > ``max_drop``, fails too. The message names
    each regression with both sides and the reason."""
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
    found = comparison.regressions(
        max_drop=max_drop, allow_failures=allow_failures, max_judged_drop=max_judged_drop
    )
    if ppi is not None:
        direction = {m.label: m.higher_is_better for m in results.metrics}
        found += ppi_regressions(ppi, "current", "baseline", direction, max_drop)
    if found:
        lines = "\n".join(f"  {regression}" for regression in found)
        rule = gate_rule(alpha, max_drop, allow_failures, max_judged_drop)
        rule += ", or a PPI interval below 0" if ppi is not None else ""
        raise AssertionError(f"retrieval regressed ({rule}):\n{lines}")
