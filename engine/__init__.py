"""slotwise: evaluate what a retriever or reranker put into an LLM's K prompt slots.

The module-level functions use one default :class:`Engine`, created on first use with
the built-in defaults, or the config file the ``SLOTWISE_CONFIG`` environment variable
names: a library call reads no file it was not given. ``Engine.from_config()`` finds the
nearest ``slotwise.yaml`` as the CLI does; ``Engine(config=...)`` takes a file or mapping.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    RunInterrupted,
    SlotwiseError,
    UnknownMetricError,
)

if TYPE_CHECKING:
    from engine.evaluation.api import Dataset, Engine, Evaluation
    from engine.evaluation.batch import Batch, row_sums
    from engine.evaluation.calls import Collected
    from engine.evaluation.metric import (
        Metric,
        MetricBase,
        bounded_number,
        choice,
        finite_number,
        optional_k,
        positive_int,
    )
    from engine.evaluation.pipeline import StreamingError
    from engine.evaluation.registry import MetricInfo
    from engine.evaluation.results import Results, read_results
    from engine.evaluation.systems import SystemAdapter
    from engine.io.columns import Columns
    from engine.io.config import Config
    from engine.io.records import Output, Sample
    from engine.version import VERSION as __version__

#: The module each public name but the errors comes from, imported when the name is
#: first used: a program that needs a part of slotwise (the command line's file readers)
#: imports that part only, not the whole evaluation machinery (0.1 s of a fresh process).
_HOMES = {
    "engine.evaluation.api": ("Dataset", "Engine", "Evaluation"),
    "engine.evaluation.batch": ("Batch", "row_sums"),
    "engine.evaluation.calls": ("Collected",),
    "engine.evaluation.metric": (
        "Metric",
        "MetricBase",
        "bounded_number",
        "choice",
        "finite_number",
        "optional_k",
        "positive_int",
    ),
    "engine.evaluation.pipeline": ("StreamingError",),
    "engine.evaluation.registry": ("MetricInfo",),
    "engine.evaluation.results": ("Results", "read_results"),
    "engine.evaluation.systems": ("SystemAdapter",),
    "engine.io.columns": ("Columns",),
    "engine.io.config": ("Config",),
    "engine.io.records": ("Output", "Sample"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from engine.version import VERSION as value
    elif name in _HOME_OF:
        value = getattr(importlib.import_module(_HOME_OF[name]), name)
    else:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Batch",
    "Collected",
    "Columns",
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
    "RunInterrupted",
    "Sample",
    "SlotwiseError",
    "StreamingError",
    "SystemAdapter",
    "UnknownMetricError",
    "__version__",
    "bounded_number",
    "choice",
    "compare",
    "dataset",
    "default_engine",
    "evaluate_stream",
    "explain",
    "finite_number",
    "metric",
    "metrics",
    "optional_k",
    "positive_int",
    "qrels",
    "read_results",
    "register_metric",
    "row_sums",
    "run",
]

_default: Engine | None = None


def default_engine() -> Engine:
    """The engine behind the module-level functions (created on first use)."""
    global _default
    if _default is None:
        from engine.evaluation.api import Engine

        _default = Engine()
    return _default


def dataset(source: Any = None, *, samples: Any = None, name: str | None = None) -> Dataset:
    """A dataset by declared name, file path, or from Python; see :meth:`Engine.dataset`."""
    return default_engine().dataset(source, samples=samples, name=name)


def qrels(source: Any, **columns: Any) -> Columns:
    """Qrels from a frame, a dict, a ranx ``Qrels`` or a file of any format (ranx's
    ``q_id_col=``, ``doc_id_col=``, ``score_col=``); see :mod:`engine.io.qrels_runs`."""
    from engine.io.qrels_runs import qrels as read

    return read(source, **columns)


def run(source: Any, **columns: Any) -> Columns:
    """A run from a frame, a dict, a ranx ``Run`` or a file of any format; see
    :mod:`engine.io.qrels_runs`."""
    from engine.io.qrels_runs import run as read

    return read(source, **columns)


def metric(spec: str, **params: Any) -> Metric:
    """A metric instance, e.g. ``metric("udcg", gamma=0.25)``; see :meth:`Engine.metric`."""
    return default_engine().metric(spec, **params)


def metrics() -> list[MetricInfo]:
    """Every installed or registered metric."""
    return default_engine().metrics()


def register_metric(cls: type[Any]) -> type[Any]:
    """Register an in-process metric class with the default engine (also a decorator)."""
    return default_engine().register_metric(cls)


def compare(results: Any, **options: Any) -> Any:
    """Paired comparison of results on the same dataset; see
    :func:`engine.analysis.compare.compare`."""
    from engine.analysis.compare import compare as paired

    return paired(results, **options)


def explain(results: Results, sample_id: str, **options: Any) -> Any:
    """Why one sample scored what it did in one system's results; see
    :func:`engine.analysis.explain.explain_sample`."""
    from engine.analysis.explain import explain_sample

    return explain_sample(results, sample_id, **options)


def evaluate_stream(metrics: Any, **options: Any) -> Results:
    """Score files too large for memory; see :meth:`Engine.evaluate_stream`."""
    return default_engine().evaluate_stream(metrics, **options)
