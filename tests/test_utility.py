"""The utility family: udcg and udcg-theta, pinned by hand derivations (docs/metrics.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import engine
from engine.testing import MetricConformance, make_batch
from metrics_plugins.utility import UDCG, UDCGTheta, read_theta

THETA_K3 = Path(__file__).parent / "data" / "udcg_theta_k3.json"


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


#: a: u = 0.9, b: u = -0.6, c: unlabeled, d: relevant with p = 0.5 (u = 0.5), e: -0.3.
SAMPLE = {
    "id": "s",
    "expected_output": {
        "utility": {
            "a": 0.9,
            "b": -0.6,
            "d": {"relevant": True, "p_no_response": 0.5},
            "e": {"relevant": False, "p_no_response": 0.7},
        }
    },
}


def udcg(ranking: list[str] | None, **params: float) -> float:
    outputs = {} if ranking is None else {"s": ranking}
    return float(UDCG(**params).score(make_batch([SAMPLE], outputs))[0])  # type: ignore[arg-type]


class TestUDCG:
    def test_gamma_one_third(self):
        """sigmoid((0.9 + 0.5)/5 + (1/3)(-0.6 - 0.3)/5) over a, b, c, d, e (c unlabeled)."""
        expected = sigmoid((0.9 + 0.5) / 5 + (1 / 3) * (-0.6 - 0.3) / 5)
        assert udcg(["a", "b", "c", "d", "e"]) == pytest.approx(expected, abs=1e-15)

    @pytest.mark.parametrize("gamma", [0.0, 0.25, 1.0])
    def test_gamma_weights_the_negative_part(self, gamma):
        """gamma scales only the mean of u⁻."""
        expected = sigmoid((0.9 + 0.5) / 5 + gamma * (-0.6 - 0.3) / 5)
        assert udcg(["a", "b", "c", "d", "e"], gamma=gamma) == pytest.approx(expected, abs=1e-15)

    def test_k_cuts_the_context(self):
        """k=2 keeps a and b: sigmoid((0.9 + (1/3)(-0.6)) / 2)."""
        expected = sigmoid((0.9 - 0.6 / 3) / 2)
        assert udcg(["a", "b", "c", "d", "e"], k=2) == pytest.approx(expected, abs=1e-15)

    def test_unlabeled_passages_count_in_m(self):
        """An unlabeled passage fills a slot with u = 0: sigmoid(0.9 / 2)."""
        assert udcg(["a", "c"]) == pytest.approx(sigmoid(0.9 / 2), abs=1e-15)
        assert udcg(["a", "zzz", "c"]) == pytest.approx(sigmoid(0.9 / 3), abs=1e-15)

    def test_m_is_the_context_actually_given(self):
        """With fewer passages than k, m is the number given, not k."""
        assert udcg(["a"], k=10) == pytest.approx(sigmoid(0.9), abs=1e-15)

    def test_empty_context_scores_zero(self):
        """An empty ranking and a missing output both score 0.0, as the reference does."""
        assert udcg([]) == 0.0
        assert udcg(None) == 0.0

    def test_only_unlabeled_passages_score_one_half(self):
        """A non-empty context of unlabeled passages is sigmoid(0) = 0.5, not 0."""
        assert udcg(["c", "zzz"]) == 0.5

    def test_duplicates_count_once(self):
        """A repeated id is dropped before scoring (first occurrence kept)."""
        assert udcg(["a", "a", "c"]) == udcg(["a", "c"])

    def test_metadata_k_cuts_only_an_open_k(self):
        """A sample's metadata.k = 1 cuts an open k to a alone; an explicit k = 5 scores
        the same as for the sample without metadata.k."""
        sample = {**SAMPLE, "metadata": {"k": 1}}
        batch = make_batch([sample], {"s": ["a", "b"]})
        assert UDCG().score(batch)[0] == pytest.approx(sigmoid(0.9), abs=1e-15)
        plain = make_batch([SAMPLE], {"s": ["a", "b"]})
        assert UDCG(k=5).score(batch)[0] == UDCG(k=5).score(plain)[0]

    @pytest.mark.parametrize("gamma", [-0.1, 1.5, math.nan, "x", True])
    def test_gamma_outside_unit_interval_is_rejected(self, gamma, eng):
        """gamma must be a number in [0, 1]."""
        with pytest.raises(engine.MetricParameterError, match="gamma"):
            eng.metric("udcg", gamma=gamma)

    @pytest.mark.parametrize(
        ("label", "pointer"),
        [(1.5, "/expected_output/utility/bad"), ({"relevant": True, "p_no_response": 1.2}, "bad")],
    )
    def test_out_of_range_utility_is_a_validation_error(self, label, pointer, eng):
        """u outside [-1, 1] (or p outside [0, 1]) is an InputError naming sample and passage."""
        sample = {"id": "q-9", "expected_output": {"utility": {"ok": 0.5, "bad": label}}}
        with pytest.raises(engine.InputError) as caught:
            eng.dataset(samples=[sample])
        problem = caught.value.problems[0]
        assert problem.sample_id == "q-9"
        assert pointer in problem.pointer and "bad" in problem.pointer

    def test_requires_utility(self, eng):
        """A sample without utility labels is a MetricRequirementError naming it."""
        dataset = eng.dataset(samples=[{"id": "plain", "expected_output": ["a"]}])
        with pytest.raises(engine.MetricRequirementError, match="plain"):
            dataset.with_metrics(["udcg"]).evaluate({"plain": ["a"]})

    def test_through_the_engine(self, eng):
        """The entry point resolves, and '@K' and gamma reach the metric."""
        results = (
            eng.dataset(samples=[SAMPLE])
            .with_metrics(["udcg@2(gamma=0)"])
            .evaluate({"s": ["a", "b", "c"]})
        )
        assert results.summary()["udcg@2(gamma=0)"]["mean"] == pytest.approx(sigmoid(0.45))


def write_theta(path: Path, k: int, alpha: list[float], beta: list[float]) -> str:
    path.write_text(json.dumps({"k": k, "alpha": alpha, "beta": beta, "provenance": {}}))
    return str(path)


class TestUDCGTheta:
    def test_weighted_sum_by_position(self):
        """sigmoid(Σ alpha_i u_i⁺ + Σ beta_i u_i⁻) with the file's weights (k = 3)."""
        batch = make_batch([SAMPLE], {"s": ["b", "a", "e", "d"]})
        value = UDCGTheta(params_file=str(THETA_K3)).score(batch)[0]
        # ranks: b (-0.6), a (0.9), e (-0.3); d is past k = 3
        expected = sigmoid(0.5 * 0.9 + 2.0 * -0.6 + 0.5 * -0.3)
        assert value == pytest.approx(expected, abs=1e-15)

    def test_shorter_context_and_empty(self):
        """A context shorter than k uses the first weights; an empty one scores 0.0."""
        batch = make_batch([SAMPLE, {**SAMPLE, "id": "t"}], {"s": ["a"], "t": []})
        values = UDCGTheta(params_file=str(THETA_K3)).score(batch)
        np.testing.assert_allclose(values, [sigmoid(0.9), 0.0], rtol=0, atol=1e-15)

    def test_k_must_equal_the_fitted_k(self, eng):
        """k different from the file's k is a MetricParameterError that says both."""
        with pytest.raises(engine.MetricParameterError, match=r"k=5.*fitted for k=3"):
            eng.metric("udcg-theta@5", params_file=str(THETA_K3))
        assert eng.metric("udcg-theta@3", params_file=str(THETA_K3)).k == 3

    @pytest.mark.parametrize(
        ("document", "message"),
        [
            ("not json", "not a JSON document"),
            ("[1, 2]", "expected a JSON object"),
            ('{"k": 0, "alpha": [], "beta": []}', "'k' must be a positive integer"),
            ('{"k": 2, "alpha": [1, 2], "beta": [1]}', "'beta' must be a list of 2"),
            ('{"k": 1, "alpha": ["x"], "beta": [1]}', "'alpha' must be a list of 1"),
        ],
    )
    def test_bad_parameter_files(self, tmp_path, document, message, eng):
        """A malformed file is a MetricParameterError naming the file and the problem."""
        path = tmp_path / "theta.json"
        path.write_text(document)
        with pytest.raises(engine.MetricParameterError, match=message):
            eng.metric("udcg-theta", params_file=str(path))

    def test_missing_file(self, tmp_path, eng):
        """A file that does not exist is a MetricParameterError, not an OSError."""
        with pytest.raises(engine.MetricParameterError, match="cannot read"):
            eng.metric("udcg-theta", params_file=str(tmp_path / "nope.json"))

    def test_read_theta(self):
        """read_theta returns the k and weights of the file."""
        theta = read_theta(THETA_K3)
        assert (theta.k, theta.alpha, theta.beta) == (3, (1.0, 0.5, 0.25), (2.0, 1.0, 0.5))


class TestUDCGThetaConformance(MetricConformance):
    """udcg-theta passes the plugin conformance suite with a k = 3 parameter file."""

    metric_class = UDCGTheta
    params = {"params_file": str(THETA_K3)}  # noqa: RUF012
