"""Metric specs (``alias``, ``alias@K``, ``alias(name=value)``) and canonical labels."""

from __future__ import annotations

import pytest

import engine
from engine.evaluation.metric import metric_label, parse_spec


class TestParse:
    @pytest.mark.parametrize(
        ("text", "alias", "params"),
        [
            ("retrieval-mrr", "retrieval-mrr", {}),
            ("retrieval-ndcg-at-k@10", "retrieval-ndcg-at-k", {"k": 10}),
            ("ra-nwg-at-k(k=5, alpha=1.0)", "ra-nwg-at-k", {"k": 5, "alpha": 1.0}),
            (
                "retrieval-ndcg-at-k(k=10, gain=exponential)",
                "retrieval-ndcg-at-k",
                {"k": 10, "gain": "exponential"},
            ),
            (
                "retrieval-ndcg-at-k@3(gain='exponential')",
                "retrieval-ndcg-at-k",
                {"k": 3, "gain": "exponential"},
            ),
            (
                "x(flag=True, none=None, neg=-0.5, xs=[1, 2])",
                "x",
                {"flag": True, "none": None, "neg": -0.5, "xs": [1, 2]},
            ),
            ("  retrieval-mrr ", "retrieval-mrr", {}),
        ],
    )
    def test_valid(self, text, alias, params):
        """Valid specs parse to the alias and literal parameters (bare words are strings)."""
        spec = parse_spec(text)
        assert (spec.alias, dict(spec.params)) == (alias, params)

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("retrieval-ndcg-at-k(k=", "cannot parse"),
            ("retrieval-ndcg-at-k(10)", "name=value"),
            ("retrieval-ndcg-at-k@5(k=5)", "k twice"),
            ("m(x=f(1))", "not a literal"),
            ("", "cannot parse"),
        ],
    )
    def test_invalid(self, text, message):
        """Malformed specs raise MetricParameterError saying why."""
        with pytest.raises(engine.MetricParameterError, match=message):
            parse_spec(text)


class TestResolve:
    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("retrieval-ndcg-at-k(k=x)", "k must be a positive integer, got 'x'"),
            ("retrieval-ndcg-at-k@x", "k must be a positive integer, got 'x'"),
            ("retrieval-ndcg-at-k@0", "k must be a positive integer, got 0"),
            ("retrieval-ndcg-at-k(k=2.5)", "k must be a positive integer, got 2.5"),
            ("retrieval-ndcg-at-k(k=True)", "k must be a positive integer, got True"),
            ("retrieval-ndcg-at-k(gain=expo)", "gain must be one of linear, exponential"),
            ("retrieval-ndcg-at-k(foo=1)", "unknown parameter 'foo'"),
            ("retrieval-recall-at-k(relevance_threshold=nan)", "finite number"),
        ],
    )
    def test_bad_parameters(self, eng, text, message):
        """A bad inline parameter is a MetricParameterError naming the spec and parameter."""
        with pytest.raises(engine.MetricParameterError, match=message) as info:
            eng.metric(text)
        assert text in str(info.value)

    def test_config_params_are_defaults(self, tmp_path):
        """metrics.params.<alias> in the config supplies parameters the spec leaves out."""
        eng = engine.Engine(
            config={"metrics": {"params": {"retrieval-ndcg-at-k": {"gain": "exponential", "k": 3}}}}
        )
        assert eng.metric("retrieval-ndcg-at-k") == eng.metric(
            "retrieval-ndcg-at-k(k=3, gain=exponential)"
        )
        assert eng.metric("retrieval-ndcg-at-k@10").k == 10

    def test_metrics_are_frozen_values(self, eng):
        """Metric instances are immutable and compare by parameters."""
        metric = eng.metric("retrieval-ndcg-at-k@10")
        assert metric == eng.metric("retrieval-ndcg-at-k(k=10)")
        with pytest.raises(AttributeError):
            metric.k = 3


class TestLabel:
    @pytest.mark.parametrize(
        ("text", "label"),
        [
            ("retrieval-mrr", "retrieval-mrr"),
            ("retrieval-ndcg-at-k@10", "retrieval-ndcg-at-k@10"),
            ("retrieval-ndcg-at-k(gain=linear)", "retrieval-ndcg-at-k"),
            (
                "retrieval-ndcg-at-k(k=10, gain=exponential)",
                "retrieval-ndcg-at-k@10(gain=exponential)",
            ),
            (
                "answer-containment-at-k(case_sensitive=True)",
                "answer-containment-at-k(case_sensitive=True)",
            ),
        ],
    )
    def test_label_lists_non_default_parameters(self, eng, text, label):
        """Labels show k as @K and only the parameters that differ from defaults."""
        assert metric_label(eng.metric(text)) == label

    def test_label_round_trips(self, eng):
        """Parsing a label gives back an equal metric."""
        metric = eng.metric("retrieval-ndcg-at-k(k=7, gain=exponential)")
        assert eng.metric(metric_label(metric)) == metric

    def test_same_label_twice_is_an_error(self, eng):
        """One metric given twice in a run is rejected (labels key the results)."""
        dataset = eng.dataset(samples=[{"id": "a", "expected_output": ["d"]}])
        with pytest.raises(engine.MetricParameterError, match="more than once"):
            dataset.with_metrics(["retrieval-mrr", "retrieval-mrr"])


def test_string_parameters_round_trip(eng):
    """A string parameter that is not a bare identifier (a file name) is quoted in the label."""
    import attrs
    import numpy as np

    @attrs.frozen
    class Named(engine.MetricBase):
        """Takes a file name."""

        alias = "named-test"
        path: str = "default"

        def score(self, batch):
            return np.zeros(len(batch))

    eng.register_metric(Named)
    for value in ("theta-k5.params.json", "dir/theta.json", "plain_name", "True"):
        metric = eng.metric("named-test", path=value)
        assert eng.metric(metric_label(metric)) == metric
    assert (
        metric_label(eng.metric("named-test", path="plain_name")) == "named-test(path=plain_name)"
    )
