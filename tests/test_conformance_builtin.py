"""The built-in metrics pass the plugin conformance suite (engine.testing).

To cover another built-in metric, add ``case(cls, **params)`` to CASES (``bounded=False``
for a metric whose values may leave [0, 1]). A known bug goes in KNOWN_FAILURES as a
strict xfail, so the test flips to a failure once the bug is fixed and the entry removed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.testing import MetricConformance
from metrics_plugins import rag, retrieval


def case(metric_class: type[Any], *, bounded: bool = True, **params: Any) -> dict[str, Any]:
    """The class attributes of one MetricConformance subclass."""
    return {"metric_class": metric_class, "params": params, "bounded": bounded}


CASES: list[dict[str, Any]] = [
    case(retrieval.HitAtK),
    case(retrieval.HitRateAtK),
    case(retrieval.RecallAtK),
    case(retrieval.MRR),
    case(retrieval.NDCGAtK),
    case(retrieval.NDCGAtK, gain="exponential"),
    case(rag.AnswerContainmentAtK),
    case(rag.ContextPrecisionAtK),
    case(rag.CoverageRecallAtK),
    case(rag.NuggetRecallAtK),
    case(rag.ChunkAttributionRate),
]

#: (metric class, conformance test name) -> why it fails today.
KNOWN_FAILURES: dict[tuple[type[Any], str], str] = {
    (retrieval.MRR, "test_scores_a_batch_without_rankings"): (
        "MRR.score calls argmax on a (Q, 0) array when no sample retrieved anything"
    ),
}


def _xfail(name: str, reason: str) -> Callable[..., None]:
    """The inherited test ``name``, marked as a strict expected failure for one class."""
    inherited = getattr(MetricConformance, name)

    def test(self: MetricConformance) -> None:
        inherited(self)

    test.__doc__ = inherited.__doc__
    return pytest.mark.xfail(reason=reason, strict=True)(test)


def _conformance_class(attributes: dict[str, Any]) -> type:
    metric_class = attributes["metric_class"]
    suffix = "".join(f"_{name}_{value}" for name, value in attributes["params"].items())
    body = dict(attributes)
    for (failing_class, test_name), reason in KNOWN_FAILURES.items():
        if failing_class is metric_class:
            body[test_name] = _xfail(test_name, reason)
    return type(f"Test{metric_class.__name__}{suffix}", (MetricConformance,), body)


for _attributes in CASES:
    _cls = _conformance_class(_attributes)
    globals()[_cls.__name__] = _cls
