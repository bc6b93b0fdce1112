"""A conformance kit for metric plugins, in the spirit of ``keyring.testing``.

A plugin's test module subclasses :class:`MetricConformance` and names its metric; pytest
then runs the whole contract against it (protocol, frozen parameters, the shape and
range of ``score``, permutation, determinism, bit-identical values alone and inside
batches padded to other widths, spec round-trip, ``k`` validation, the entry point)::

    from engine.testing import MetricConformance, make_batch

    class TestJunkAtK(MetricConformance):
        metric_class = JunkAtK
        params = {"k": 3}

:func:`make_batch` compiles raw sample and output dicts into the :class:`~engine.Batch`
that ``score`` receives, so a metric's own tests can pin values by hand. ``SAMPLES`` and
``OUTPUTS`` are a small fixture that carries every requirement kind of
:data:`engine.evaluation.metric.REQUIREMENTS` and the usual edge cases. This module needs pytest;
``import engine`` does not import it.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt
import pytest

from engine.analysis.compare import MAX_JUDGED_DROP, compare, gate_rule, ppi_regressions
from engine.analysis.stats import Test
from engine.errors import InputError, MetricParameterError, Problem
from engine.evaluation.api import Engine
from engine.evaluation.batch import Batch, Shape
from engine.evaluation.metric import check_metric_class, metric_label
from engine.evaluation.pipeline import aligned
from engine.evaluation.registry import GROUP, Registry
from engine.evaluation.results import Results, read_results
from engine.io.columns import Columns
from engine.io.config import DEFAULT_K
from engine.io.documents import parse_samples, read_outputs_mapping

__all__ = ["OUTPUTS", "SAMPLES", "MetricConformance", "assert_no_regression", "make_batch"]


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


def make_batch(
    samples: Sequence[Mapping[str, Any]],
    outputs: Mapping[str, Any],
    default_k: int = DEFAULT_K,
) -> Batch:
    """Validate raw samples and ``{sample_id: actual_output}`` as the engine does, and
    compile them into a :class:`~engine.Batch` (a sample without an output has none).

    Raises :class:`~engine.InputError` for invalid input or outputs of unknown samples.
    """
    return Batch.compile(_joined(samples, outputs), default_k=default_k)


def _joined(samples: Sequence[Mapping[str, Any]], outputs: Mapping[str, Any]) -> Columns:
    joined, unknown = aligned(
        parse_samples((sample, None) for sample in samples), read_outputs_mapping(outputs)
    )
    if unknown:
        raise InputError(
            [Problem("output for a sample id not in the samples", sample_id=i) for i in unknown],
            summary="outputs do not match the samples",
        )
    return joined


def _stretched(
    samples: Sequence[Mapping[str, Any]], outputs: Mapping[str, Any], copies: int = 24
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``copies`` variants of each sample that has a ranking, ranking its own documents
    (retrieved and pool) in a seeded random order among unlabelled fillers, 9 to 160 ids
    long: rows wide enough that how a metric groups a row's terms shows in the last bits
    (numpy's ``sum(axis=1)`` adds 8 partial sums once a row has 8 terms)."""
    rng = np.random.default_rng(0)
    found_samples: list[dict[str, Any]] = []
    found_outputs: dict[str, Any] = {}
    for sample in samples:
        output = outputs.get(sample["id"])
        mapping = isinstance(output, Mapping)
        items = list(output["retrieved"] if mapping else output or ())  # type: ignore[index]
        if not items:
            continue
        texts = any(isinstance(i, Mapping) for i in items)
        pool = list(output.get("pool") or ()) if mapping else []  # type: ignore[union-attr]
        own = {str(i["id"] if isinstance(i, Mapping) else i): i for i in items}
        for doc in pool:
            own.setdefault(str(doc), {"id": doc, "text": f"Document {doc}."} if texts else doc)
        for copy in range(copies):
            name = f"{sample['id']}~{copy}"
            width = max(int(rng.integers(9, 161)), len(own))
            fillers = [f"{name}-x{j}" for j in range(width - len(own))]
            ranking = list(own.values()) + [
                {"id": f, "text": "Unrelated text."} if texts else f for f in fillers
            ]
            ranking = [ranking[j] for j in rng.permutation(len(ranking))]
            found_samples.append({**sample, "id": name})
            if mapping:
                ids = [str(i["id"] if isinstance(i, Mapping) else i) for i in ranking]
                found_outputs[name] = {**output, "retrieved": ranking, "pool": pool and ids}  # type: ignore[dict-item]
            else:
                found_outputs[name] = ranking
    return found_samples, found_outputs


def _item(doc: str, text: str) -> dict[str, Any]:
    return {"id": doc, "text": text}


#: Eight samples that carry relevance (binary and graded, with 0 and negative labels),
#: utility (both forms), answers and groups. Edge cases: ``no-relevant`` has no relevant
#: document, ``cutoff`` sets ``metadata.k = 2``. Treat as read-only.
SAMPLES: tuple[dict[str, Any], ...] = (
    {
        "id": "graded",
        "input": {"question": "How long is the refund window?"},
        "expected_output": {
            "relevance": {"d1": 3, "d2": 1, "d3": 0, "d4": -1, "d7": 2},
            "utility": {"d1": 0.9, "d2": {"relevant": True, "p_no_response": 0.5}, "d4": -0.5},
            "answers": ["30 days", "thirty days"],
            "groups": {"window": ["d1", "d7"], "exceptions": ["d2"]},
        },
        "metadata": {"stratum": "policy"},
    },
    {
        "id": "binary",
        "input": {"question": "What is the capital of France?"},
        "expected_output": {
            "relevance": ["b1", "b2"],
            "utility": {"b1": 1, "b2": {"relevant": False, "p_no_response": 0.2}},
            "answers": "Paris",
            "groups": {"capital": ["b1", "b2"]},
        },
    },
    {
        "id": "duplicates",
        "input": {"question": "Which plan includes SSO?"},
        "expected_output": {
            "relevance": {"c1": 1, "c2": 2},
            "utility": {"c1": 0.4, "c2": 0.8, "c3": -0.2},
            "answers": ["Enterprise"],
            "groups": {"plan": ["c2"], "sso": ["c1", "c2"]},
        },
    },
    {
        "id": "no-relevant",
        "input": {"question": "Who won the 1900 moon landing?"},
        "expected_output": {
            "relevance": {"n1": 0, "n2": -2},
            "utility": {"n1": -1, "n2": {"relevant": False, "p_no_response": 0.9}},
            "answers": ["nobody"],
            "groups": {"none": []},
        },
    },
    {
        "id": "empty-output",
        "input": {"question": "Where is the API key page?"},
        "expected_output": {
            "relevance": {"e1": 1},
            "utility": {"e1": 1},
            "answers": ["Settings"],
            "groups": {"location": ["e1"]},
        },
    },
    {
        "id": "no-output",
        "input": {"question": "What port does the server use?"},
        "expected_output": {
            "relevance": {"m1": 2, "m2": 1},
            "utility": {"m1": 0.7},
            "answers": ["8080"],
            "groups": {"port": ["m1"]},
        },
    },
    {
        "id": "cutoff",
        "input": {"question": "List the supported regions."},
        "expected_output": {
            "relevance": {"k1": 1, "k2": 1, "k3": 1},
            "utility": {"k1": 0.5, "k2": 0.5, "k3": 0.5},
            "answers": ["eu-west"],
            "groups": {"eu": ["k1"], "us": ["k2", "k3"]},
        },
        "metadata": {"k": 2, "stratum": "list"},
    },
    {
        "id": "deep",
        "input": {"question": "What does error E42 mean?"},
        "expected_output": {
            "relevance": {"p7": 2, "p1": 0, "p2": 0},
            "utility": {"p7": 1, "p1": -0.3},
            "answers": ["disk quota"],
            "groups": {"meaning": ["p7"]},
        },
    },
)

#: Outputs for :data:`SAMPLES`: every retrieved item has a text, every output a pool that
#: contains its ranking and cited ids. ``duplicates`` repeats ids in its ranking,
#: ``empty-output`` retrieved nothing, ``no-output`` has no output at all.
OUTPUTS: dict[str, Any] = {
    "graded": {
        "retrieved": [
            _item("d4", "Refunds for gift cards are not possible."),
            _item("d1", "Refunds are accepted within 30 days of purchase."),
            _item("d5", "Our office is closed on public holidays."),
            _item("d2", "Sale items can be refunded with a receipt."),
            _item("d3", "Shipping takes three to five days."),
            _item("d6", "Contact support by email."),
        ],
        "pool": ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"],
        "cited": ["d1", "d2"],
    },
    "binary": {
        "retrieved": [
            _item("b2", "France is a country in Western Europe."),
            _item("b9", "Paris hosted the 2024 Olympic Games."),
            _item("b1", "The capital of France is Paris."),
        ],
        "pool": ["b1", "b2", "b9"],
        "cited": ["b1"],
    },
    "duplicates": {
        "retrieved": [
            _item("c1", "SSO is available on some plans."),
            _item("c1", "SSO is available on some plans."),
            _item("c3", "All plans include email support."),
            _item("c2", "The Enterprise plan includes SSO."),
            _item("c3", "All plans include email support."),
        ],
        "pool": ["c1", "c2", "c3"],
        "cited": ["c2"],
    },
    "no-relevant": {
        "retrieved": [
            _item("n2", "The first crewed moon landing was in 1969."),
            _item("n1", "The 1900 World's Fair was held in Paris."),
            _item("n3", "Balloons were popular in 1900."),
        ],
        "pool": ["n1", "n2", "n3"],
        "cited": [],
    },
    "empty-output": {"retrieved": [], "pool": ["e1"], "cited": []},
    "cutoff": {
        "retrieved": [
            _item("k4", "Regions are listed in the console."),
            _item("k1", "We run in eu-west."),
            _item("k2", "We run in us-east."),
            _item("k3", "We run in us-west."),
        ],
        "pool": ["k1", "k2", "k3", "k4"],
        "cited": ["k1"],
    },
    "deep": {
        "retrieved": [
            _item(f"p{rank}", f"Error E{40 + rank} is documented here.") for rank in range(1, 7)
        ]
        + [
            _item("p7", "E42 means the disk quota is exceeded."),
            _item("p8", "Errors are logged to syslog."),
        ],
        "pool": [f"p{rank}" for rank in range(1, 10)],
        "cited": ["p7"],
    },
}


def _snapshot(batch: Batch) -> dict[str, npt.NDArray[Any]]:
    """Copies of the batch's arrays, to detect a metric that writes into them."""
    names = (
        "doc_codes",
        "positions",
        "lengths",
        "ranked_labels",
        "label_values",
        "sample_k",
        "gains",  # this and the next two are cached on first use, then shared
        "ideal_gains",
        "utilities",
    )
    return {name: np.array(getattr(batch, name), copy=True) for name in names}


def _same_bits(found: npt.NDArray[Any], expected: npt.NDArray[Any], where: str) -> None:
    """Equal values, bit for bit (NaN equal to NaN)."""
    differ = ~((found == expected) | (np.isnan(found) & np.isnan(expected)))
    assert not differ.any(), (
        f"{where}: {int(differ.sum())} value(s) differ from the batch's, e.g. "
        f"{found[differ][0]!r} vs {expected[differ][0]!r}; sum each row left to right "
        "(engine.evaluation.batch.row_sums) so that padding never changes a value"
    )


class MetricConformance:
    """Tests every metric plugin should pass; subclass it as ``TestSomething`` and set
    ``metric_class`` (and ``params`` for its parameters).

    ``bounded = False`` for metrics whose values may leave [0, 1]; ``check_entry_point =
    False`` while the plugin is not installed; ``samples``/``outputs`` replace the fixture.
    """

    metric_class: ClassVar[type[Any]]
    params: ClassVar[dict[str, Any]] = {}
    bounded: ClassVar[bool] = True
    check_entry_point: ClassVar[bool] = True
    samples: ClassVar[Sequence[Mapping[str, Any]]] = SAMPLES
    outputs: ClassVar[Mapping[str, Any]] = OUTPUTS

    # -- helpers -----------------------------------------------------------------------

    def make_metric(self, **overrides: Any) -> Any:
        """An instance of ``metric_class`` with ``params`` (and ``overrides``)."""
        return self.metric_class(**{**self.params, **overrides})

    def make_batch(self) -> Batch:
        """The fixture compiled into a fresh batch."""
        return make_batch(self.samples, self.outputs)

    def make_engine(self) -> Engine:
        """An engine with default configuration that resolves ``metric_class`` by alias:
        through the installed entry points, or registered in-process when the plugin is
        not installed (``check_entry_point = False``)."""
        if self.check_entry_point:
            return Engine(config={})
        registry = Registry(entry_points=list)
        registry.register(self.metric_class)
        return Engine(config={}, registry=registry)

    def score(self, batch: Batch) -> npt.NDArray[Any]:
        """The values of ``make_metric()`` on ``batch``, as an array."""
        return np.asarray(self.make_metric().score(batch))

    # -- the class ---------------------------------------------------------------------

    def test_is_a_metric_class(self) -> None:
        """The class satisfies the Metric protocol as the registry checks it."""
        reasons = check_metric_class(self.metric_class)
        assert not reasons, f"{self.metric_class!r} is not a metric class: {'; '.join(reasons)}"

    def test_instances_are_frozen(self) -> None:
        """Parameters cannot be changed after construction."""
        metric = self.make_metric()
        fields = attrs.fields(self.metric_class)
        name = fields[0].name if fields else "alias"
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(metric, name, getattr(metric, name))

    def test_entry_point(self) -> None:
        """The alias is installed in the slotwise.metrics group and loads to metric_class."""
        if not self.check_entry_point:
            pytest.skip("check_entry_point = False")
        alias = self.metric_class.alias
        found = importlib.metadata.entry_points(group=GROUP, name=alias)
        assert found, f"no entry point {alias!r} in group {GROUP!r}: is the plugin installed?"
        loaded = {ep.load() for ep in found}
        assert loaded == {self.metric_class}, f"{alias!r} loads {loaded}, not {self.metric_class}"
        assert Registry().get(alias) is self.metric_class

    # -- score -------------------------------------------------------------------------

    def test_score_returns_one_float64_per_sample(self) -> None:
        """score returns a float64 array of shape (len(batch),)."""
        batch = self.make_batch()
        values = self.make_metric().score(batch)
        assert isinstance(values, np.ndarray), f"score returned {type(values).__name__}"
        assert values.dtype == np.float64, f"score returned dtype {values.dtype}"
        assert values.shape == (len(batch),), f"score returned shape {values.shape}"

    def test_values_are_finite_or_nan(self) -> None:
        """No value is infinite (NaN means NA)."""
        values = self.score(self.make_batch())
        assert not np.isinf(values).any(), values

    def test_values_are_bounded(self) -> None:
        """Every non-NA value lies in [0, 1] (unless the class sets bounded = False)."""
        if not self.bounded:
            pytest.skip("bounded = False")
        values = self.score(self.make_batch())
        values = values[~np.isnan(values)]
        assert ((values >= 0.0) & (values <= 1.0)).all(), values

    def test_scores_a_batch_without_rankings(self) -> None:
        """A batch in which no sample has an output scores to finite or NA values."""
        batch = make_batch(self.samples, {})
        values = self.score(batch)
        assert values.shape == (len(batch),), f"score returned shape {values.shape}"
        assert not np.isinf(values).any(), values

    def test_permuting_samples_permutes_scores(self) -> None:
        """Each sample's value depends on its own row, not on its position in the batch."""
        order = np.random.default_rng(7).permutation(len(self.samples))
        permuted = make_batch([self.samples[i] for i in order], self.outputs)
        expected = self.score(self.make_batch())[order]
        np.testing.assert_allclose(self.score(permuted), expected, rtol=1e-12, equal_nan=True)

    def test_scoring_is_deterministic(self) -> None:
        """Scoring twice, and scoring an equal batch, gives identical values."""
        batch = self.make_batch()
        first = self.score(batch)
        np.testing.assert_array_equal(self.score(batch), first)
        np.testing.assert_array_equal(self.score(self.make_batch()), first)

    def test_one_sample_scores_alike_in_any_batch(self) -> None:
        """Each sample scored alone (padded to its own widths, as ``scorer.add`` scores
        it), and inside batches padded wider (as a chunk of a larger dataset), gives
        identical bits: sum a row's terms left to right (``row_sums``), never with
        ``sum(axis=1)``, whose grouping depends on the padded width. The fixture is
        extended with longer rankings of its own documents to make that grouping show."""
        samples, outputs = _stretched(self.samples, self.outputs)
        joined = _joined([*self.samples, *samples], {**self.outputs, **outputs})
        metric = self.make_metric()
        whole = Batch.compile(joined)
        expected = np.asarray(metric.score(whole))
        for extra in (1, 9, 200):
            widths = {n: w + extra for n, w in Shape.of(joined).widths.items()}
            wider = Batch.compile(joined, shape=Shape(widths, whole.shape.max_label))
            _same_bits(np.asarray(metric.score(wider)), expected, f"padded {extra} wider")
        for row in range(len(joined)):
            one = joined.slice(row, 1)
            alone = Batch.compile(
                one, shape=attrs.evolve(Shape.of(one), max_label=whole.shape.max_label)
            )
            found = np.asarray(metric.score(alone))
            _same_bits(found, expected[row : row + 1], f"sample {one.ids[0]} alone")

    def test_score_leaves_the_batch_unchanged(self) -> None:
        """score does not write into the batch's arrays, which other metrics share."""
        batch = self.make_batch()
        before = _snapshot(batch)
        self.score(batch)
        after = _snapshot(batch)
        for name, array in before.items():
            np.testing.assert_array_equal(after[name], array, err_msg=name)

    def test_details_align_with_samples(self) -> None:
        """details(batch), when given, has one entry per sample."""
        details = getattr(self.make_metric(), "details", None)
        explained = details(self.make_batch()) if details is not None else None
        if explained is not None:
            count = len(list(explained))
            assert count == len(self.samples), f"{count} details for {len(self.samples)} samples"

    def test_aggregate_returns_a_float(self) -> None:
        """aggregate reduces the scores (and all-NA scores) to a float."""
        metric = self.make_metric()
        for values in (self.score(self.make_batch()), np.full(3, np.nan)):
            aggregate = metric.aggregate(values)
            assert isinstance(aggregate, float), f"aggregate returned {type(aggregate).__name__}"

    # -- specs and parameters ----------------------------------------------------------

    def test_label_round_trips(self) -> None:
        """Engine.metric(metric_label(m)) builds an instance equal to m."""
        engine = self.make_engine()
        metrics = [self.make_metric()]
        if "k" in attrs.fields_dict(self.metric_class):
            metrics.append(self.make_metric(k=3))
        for metric in metrics:
            label = metric_label(metric)
            assert engine.metric(label) == metric, label

    @pytest.mark.parametrize("bad", [0, -1, "x"])
    def test_invalid_k_is_rejected(self, bad: Any) -> None:
        """k=0, k=-1 and k='x' raise MetricParameterError, as a parameter and as '@K'."""
        if "k" not in attrs.fields_dict(self.metric_class):
            pytest.skip("the metric has no k parameter")
        engine = self.make_engine()
        alias = self.metric_class.alias
        others = {name: value for name, value in self.params.items() if name != "k"}
        with pytest.raises(MetricParameterError):
            engine.metric(alias, **{**others, "k": bad})
        with pytest.raises(MetricParameterError):
            engine.metric(f"{alias}@{bad}", **others)
