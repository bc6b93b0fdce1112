"""slotwise: evaluate what a retriever or reranker put into an LLM's K prompt slots.

The module-level functions use one default :class:`Engine`, created on first use from
the nearest ``slotwise.yaml``; build an ``Engine(config=...)`` for anything else.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from engine.api import Engine, Evaluation
from engine.batch import Batch
from engine.config import Config
from engine.dataset import Dataset
from engine.errors import (
    ConfigError,
    DuplicateMetricError,
    InputError,
    MetricLoadError,
    MetricParameterError,
    MetricRequirementError,
    MetricScoreError,
    MissingDependencyError,
    Problem,
    SlotwiseError,
    UnknownMetricError,
)
from engine.metric import (
    Metric,
    MetricBase,
    bounded_number,
    choice,
    finite_number,
    optional_k,
    positive_int,
)
from engine.records import Output, Sample
from engine.registry import MetricInfo
from engine.results import Results

try:
    __version__ = version("slotwise")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "Batch",
    "Config",
    "ConfigError",
    "Dataset",
    "DuplicateMetricError",
    "Engine",
    "Evaluation",
    "InputError",
    "Metric",
    "MetricBase",
    "MetricInfo",
    "MetricLoadError",
    "MetricParameterError",
    "MetricRequirementError",
    "MetricScoreError",
    "MissingDependencyError",
    "Output",
    "Problem",
    "Results",
    "Sample",
    "SlotwiseError",
    "UnknownMetricError",
    "__version__",
    "bounded_number",
    "choice",
    "dataset",
    "default_engine",
    "finite_number",
    "metric",
    "metrics",
    "optional_k",
    "positive_int",
    "register_metric",
]

_default: Engine | None = None


def default_engine() -> Engine:
    """The engine behind the module-level functions (created on first use)."""
    global _default
    if _default is None:
        _default = Engine()
    return _default


def dataset(
    source: str | Path | None = None, *, samples: Any = None, name: str | None = None
) -> Dataset:
    """A dataset by declared name, file path, or ``samples=[...]``; see :meth:`Engine.dataset`."""
    return default_engine().dataset(source, samples=samples, name=name)


def metric(spec: str, **params: Any) -> Metric:
    """A metric instance, e.g. ``metric("udcg", gamma=0.25)``; see :meth:`Engine.metric`."""
    return default_engine().metric(spec, **params)


def metrics() -> list[MetricInfo]:
    """Every installed or registered metric."""
    return default_engine().metrics()


def register_metric(cls: type[Any]) -> type[Any]:
    """Register an in-process metric class with the default engine (also a decorator)."""
    return default_engine().register_metric(cls)
