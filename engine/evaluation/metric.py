"""The Metric protocol, a base class implementing its defaults, parameter validators,
and the parser for metric specs such as ``retrieval-ndcg-at-k@10`` or
``ra-nwg-at-k(k=5, alpha=1.0)``."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow.compute as pc

from engine.errors import MetricParameterError, Problem
from engine.evaluation.batch import Batch
from engine.evaluation.keywords import parse_keywords
from engine.evaluation.metric_names import translate
from engine.io.columns import lengths

__all__ = [
    "REQUIREMENTS",
    "Metric",
    "MetricBase",
    "MetricSpec",
    "bounded_number",
    "check_metric_class",
    "choice",
    "finite_number",
    "lacking_any",
    "metric_label",
    "metric_params",
    "missing_requirements",
    "optional_k",
    "parse_spec",
    "positive_int",
]

#: What a metric may declare in ``requires``, and what each means for a sample.
REQUIREMENTS: Mapping[str, str] = {
    "relevance": "relevance labels in expected_output",
    "utility": "utility labels (expected_output.utility)",
    "grades": "grades 1..5 (expected_output.grades) or relevance labels",
    "answers": "answers (expected_output.answers)",
    "groups": "groups (expected_output.groups)",
    "texts": "a text for every retrieved item",
    "pool": "a candidate pool (actual_output.pool)",
    "cited": "cited ids (actual_output.cited)",
}


@runtime_checkable
class Metric(Protocol):
    """A metric plugin: a frozen attrs class whose fields are its parameters.

    ``alias`` names it (and must equal its entry point's name); ``requires`` lists what
    each sample must carry (keys of :data:`REQUIREMENTS`), checked before scoring;
    ``score`` returns one float64 per sample of the batch, NaN meaning NA; ``aggregate``
    reduces those values to one number.
    """

    alias: ClassVar[str]
    requires: ClassVar[frozenset[str]]
    higher_is_better: ClassVar[bool]

    def score(self, batch: Batch) -> npt.NDArray[np.float64]: ...

    def aggregate(self, values: npt.NDArray[np.float64]) -> float: ...


class MetricBase:
    """Defaults for the :class:`Metric` protocol; subclass it in an ``@attrs.frozen`` class."""

    alias: ClassVar[str]
    requires: ClassVar[frozenset[str]] = frozenset()
    higher_is_better: ClassVar[bool] = True
    family: ClassVar[str] = "other"
    #: True when ``k=None`` means "no cutoff" rather than "the configured default k".
    uncut_by_default: ClassVar[bool] = False

    def score(self, batch: Batch) -> npt.NDArray[np.float64]:
        raise NotImplementedError

    def aggregate(self, values: npt.NDArray[np.float64]) -> float:
        """The mean over non-NA values (NaN when every value is NA), summed exactly
        (``math.fsum``): independent of order, so chunked and in-memory runs agree bitwise."""
        present = values[~np.isnan(values)]
        return math.fsum(present.tolist()) / present.size if present.size else math.nan

    def check(self, batch: Batch) -> Iterable[Problem]:
        """Optional input checks beyond ``requires`` (e.g. the label scale), run before any
        metric scores; a problem per offending sample or document. Samples that lack what
        ``requires`` names are reported elsewhere and should be skipped here."""
        return ()

    def details(self, batch: Batch) -> Sequence[Mapping[str, Any] | None] | None:
        """Optional per-sample explanations (e.g. the matched rank); None when there are none."""
        return None

    def summarize(self, batch: Batch, values: npt.NDArray[np.float64]) -> Mapping[str, Any] | None:
        """Optional run-level report beside the mean (e.g. counts per class and the worst
        samples), JSON-serialisable; None when there is none."""
        return None


# -- parameter validators ---------------------------------------------------------------


def positive_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator: a positive integer that fits the int64 arrays (booleans are not
    integers here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MetricParameterError(f"{attribute.name} must be a positive integer, got {value!r}")
    if value >= 2**63:
        raise MetricParameterError(f"{attribute.name} must be below 2**63, got {value!r}")


def finite_number(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator: a finite int or float."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MetricParameterError(f"{attribute.name} must be a finite number, got {value!r}")


def bounded_number(
    minimum: float = -math.inf, maximum: float = math.inf, *, exclusive_minimum: bool = False
) -> Any:
    """attrs validator: a finite number in ``[minimum, maximum]`` (``(minimum, ...`` when
    ``exclusive_minimum``)."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        finite_number(instance, attribute, value)
        too_low = value <= minimum if exclusive_minimum else value < minimum
        if too_low or value > maximum:
            low = "(" if exclusive_minimum else "["
            raise MetricParameterError(
                f"{attribute.name} must lie in {low}{minimum:g}, {maximum:g}], got {value!r}"
            )

    return check


def choice(*options: str) -> Any:
    """attrs validator: one of ``options``."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in options:
            raise MetricParameterError(
                f"{attribute.name} must be one of {', '.join(options)}; got {value!r}"
            )

    return check


def optional_k() -> Any:
    """The standard cutoff parameter: None defers to ``metadata.k`` and the config default."""
    return attrs.field(
        default=None, validator=attrs.validators.optional(positive_int), kw_only=True
    )


# -- introspection ------------------------------------------------------------------------


def metric_params(metric: Any) -> dict[str, Any]:
    """Every parameter of a metric instance, by name, as JSON data (a tuple as a list), so
    that it equals what a results file reads back."""
    return {name: _plain(value) for name, value in attrs.asdict(metric, recurse=False).items()}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def metric_label(metric: Any) -> str:
    """The canonical label: ``alias``, ``alias@K``, or ``alias(name=value, ...)`` listing
    the parameters that differ from their defaults."""
    changed = {
        f.name: getattr(metric, f.name)
        for f in attrs.fields(type(metric))
        if f.default is attrs.NOTHING or getattr(metric, f.name) != f.default
    }
    k = changed.pop("k", None)
    label = metric.alias if k is None else f"{metric.alias}@{k}"
    if changed:
        label += "(" + ", ".join(f"{n}={_format(v)}" for n, v in changed.items()) + ")"
    return label


def _format(value: Any) -> str:
    """A value as :func:`parse_spec` reads it back: bare identifiers stay bare."""
    bare = (
        isinstance(value, str) and value.isidentifier() and value not in ("True", "False", "None")
    )
    return value if bare else repr(value)


def check_metric_class(cls: Any) -> list[str]:
    """Why ``cls`` is not a valid metric class (empty when it is)."""
    if not isinstance(cls, type):
        return [f"{cls!r} is not a class"]
    reasons = []
    if not attrs.has(cls):
        reasons.append("it is not an attrs class (decorate it with @attrs.frozen)")
    if not isinstance(getattr(cls, "alias", None), str) or not cls.alias:
        reasons.append("it has no string 'alias'")
    requires = getattr(cls, "requires", None)
    if not isinstance(requires, frozenset | set) or not requires <= REQUIREMENTS.keys():
        reasons.append(f"'requires' must be a set drawn from {sorted(REQUIREMENTS)}")
    if not isinstance(getattr(cls, "higher_is_better", None), bool):
        reasons.append("'higher_is_better' must be a bool")
    for method in ("score", "aggregate"):
        if not callable(getattr(cls, method, None)):
            reasons.append(f"it has no method {method}()")
    return reasons


def missing_requirements(metric: Metric, label: str, batch: Batch) -> Iterable[Problem]:
    """A problem for each sample that lacks something ``metric.requires``, in sample order."""
    needs = sorted(metric.requires)
    lacking = [_lacking(need, batch) for need in needs]
    if not any(lacking):
        return
    pairs = sorted((row, order) for order, rows in enumerate(lacking) for row in rows)
    for index, order in pairs:  # sample order
        yield Problem(
            message=f"metric {label!r} needs {REQUIREMENTS[needs[order]]}",
            sample_id=batch.sample_ids[index],
            pointer=_POINTERS[needs[order]],
        )


_POINTERS = {
    "relevance": "/expected_output",
    "utility": "/expected_output/utility",
    "grades": "/expected_output",
    "answers": "/expected_output/answers",
    "groups": "/expected_output/groups",
    "texts": "/actual_output/retrieved",
    "pool": "/actual_output/pool",
    "cited": "/actual_output/cited",
}


def lacking_any(needs: Iterable[str], batch: Batch) -> bool:
    """Whether any sample of the batch lacks one of ``needs`` (keys of
    :data:`REQUIREMENTS`): when none does, no metric has a requirement problem."""
    return any(_lacking(need, batch) for need in needs)


def _lacking(need: str, batch: Batch) -> list[int]:
    """The samples that lack ``need``, found once per batch for every metric that needs it."""
    return batch.shared(("lacking", need), lambda: lacks(need, batch).nonzero()[0].tolist())


def lacks(need: str, batch: Batch) -> npt.NDArray[np.bool_]:
    """Per sample, whether it lacks ``need`` (a key of :data:`REQUIREMENTS`). A sample
    without an output is scored as an empty ranking: it lacks nothing the output holds."""
    if need in ("relevance", "utility", "groups"):
        return ~batch.has(need)
    if need == "grades":
        return ~batch.has("grades") & ~batch.has("relevance")
    if need == "answers":
        column = batch.columns.column("answers")
        return ~column.is_valid().to_numpy(zero_copy_only=False) | (lengths(column) == 0)
    if need == "texts":
        texts = batch.columns.column("texts")
        nulls = np.bincount(
            np.repeat(np.arange(len(batch)), lengths(texts)),
            weights=pc.list_flatten(texts).is_null().to_numpy(zero_copy_only=False),
            minlength=len(batch),
        )
        retrieved = lengths(batch.columns.column("retrieved")) > 0
        return batch.has_output & retrieved & (~batch.has("texts") | (nulls > 0))
    return batch.has_output & ~batch.has(need)


# -- specs --------------------------------------------------------------------------------

_SPEC = re.compile(
    r"^\s*(?P<alias>[A-Za-z0-9][\w.:-]*?)(?:@(?P<k>[^()\s]*))?\s*(?:\((?P<params>.*)\))?"
    r"\s*(?:@(?P<k_after>[^()\s]*))?\s*$"
)


@attrs.frozen
class MetricSpec:
    """A parsed metric spec: an alias and the parameters given with it."""

    alias: str
    params: Mapping[str, Any] = attrs.field(factory=dict)


def parse_spec(text: str) -> MetricSpec:
    """Parse ``alias``, ``alias@K``, ``alias(name=value, ...)``, ``alias@K(...)`` or
    ``alias(...)@K``; a peer's name (ir_measures' ``nDCG@10``, trec_eval's
    ``ndcg_cut_10``, ranx's ``ndcg@10``) is first translated to the slotwise spec it
    stands for (:func:`~engine.evaluation.metric_names.translate`).

    Values are Python literals; a bare word is a string (``gain=exponential``).
    """
    match = _SPEC.match(translate(text) or text)
    if not match:
        raise MetricParameterError(f"cannot parse metric spec {text!r}")
    params: dict[str, Any] = {}
    if match["params"] is not None and match["params"].strip():
        params = parse_keywords(text, match["params"], bare_words=True)
    ks = [k for k in (match["k"], match["k_after"]) if k is not None]
    if ks:
        if "k" in params or len(ks) > 1:
            raise MetricParameterError(f"metric spec {text!r} gives k twice")
        try:
            params["k"] = int(ks[0])
        except ValueError:
            params["k"] = ks[0]  # rejected by the metric's k validator, with its name
    return MetricSpec(alias=match["alias"], params=params)
