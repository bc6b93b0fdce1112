"""The built-in metrics pass the plugin conformance suite (engine.testing).

To cover another built-in metric, add ``case(cls, **params)`` to CASES (``bounded=False``
for a metric whose values may leave [0, 1]).
"""

from __future__ import annotations

from typing import Any

from engine.testing import MetricConformance
from metrics_plugins import rag, retrieval, utility


def case(metric_class: type[Any], *, bounded: bool = True, **params: Any) -> dict[str, Any]:
    """The class attributes of one MetricConformance subclass."""
    return {"metric_class": metric_class, "params": params, "bounded": bounded}


CASES: list[dict[str, Any]] = [
    case(retrieval.HitAtK),
    case(retrieval.HitRateAtK),
    case(retrieval.PrecisionAtK),
    case(retrieval.RecallAtK),
    case(retrieval.RPrecision),
    case(retrieval.MRR),
    case(retrieval.AveragePrecision),
    case(retrieval.AveragePrecision, k=3),
    case(retrieval.DCGAtK, bounded=False),
    case(retrieval.NDCGAtK),
    case(retrieval.NDCGAtK, gain="exponential"),
    case(retrieval.ERRAtK),
    case(retrieval.ERRAtK, mapping="linear", max_grade=3),
    case(retrieval.AUCPR),
    case(retrieval.JudgedAtK),
    case(rag.AnswerContainmentAtK),
    case(rag.ContextPrecisionAtK),
    case(rag.CoverageRecallAtK),
    case(rag.NuggetRecallAtK),
    case(rag.ChunkAttributionRate),
    case(utility.UDCG),
    case(utility.UDCG, k=3, gamma=0.0),
    # udcg-theta needs a parameter file: its conformance class is in tests/test_utility.py.
]


def _conformance_class(attributes: dict[str, Any]) -> type:
    suffix = "".join(f"_{name}_{value}" for name, value in attributes["params"].items())
    return type(
        f"Test{attributes['metric_class'].__name__}{suffix}", (MetricConformance,), dict(attributes)
    )


for _attributes in CASES:
    _cls = _conformance_class(_attributes)
    globals()[_cls.__name__] = _cls
