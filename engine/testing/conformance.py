"""The conformance kit for metric plugins, in the spirit of ``keyring.testing``: a plugin's
test module subclasses :class:`MetricConformance` and names its metric; pytest then runs
the whole contract against it (protocol, frozen parameters, the shape and range of
``score``, permutation, determinism, bit-identical values alone and inside batches padded
to other widths, spec round-trip, ``k`` validation, the entry point). This module needs
pytest; ``from engine.testing import MetricConformance`` imports it (see
:mod:`engine.testing`)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt
import pytest

from engine.errors import MetricParameterError
from engine.evaluation.api import Engine
from engine.evaluation.batch import Batch, Shape
from engine.evaluation.metric import check_metric_class, metric_label
from engine.evaluation.registry import GROUP, Registry
from engine.testing.fixture import OUTPUTS, SAMPLES, joined_columns, make_batch

__all__ = ["MetricConformance"]


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
        joined = joined_columns([*self.samples, *samples], {**self.outputs, **outputs})
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
