"""engine.evaluation.ppi: the PPI++ mean and its interval, checked against the authors'
package ``ppi_py`` and by simulation against a judge of known bias and noise."""

from __future__ import annotations

import numpy as np
import pytest

from engine.evaluation import ppi

ppi_py = pytest.importorskip("ppi_py")


def _data(seed: int, n: int, big_n: int, slope: float) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    y = rng.random(n)
    yhat = slope * y + rng.normal(0.1, 0.2, n)
    unlabelled = slope * rng.random(big_n) + rng.normal(0.1, 0.2, big_n)
    return y, yhat, unlabelled


class TestAgainstPpiPy:
    @pytest.mark.parametrize("seed", range(12))
    @pytest.mark.parametrize("level", [0.9, 0.95])
    def test_point_estimate_and_interval(self, seed, level):
        """Random data of random sizes and correlations (negative too: lambda clips to
        0): ppi_py's point estimate and interval, to 1e-9."""
        rng = np.random.default_rng(100 + seed)
        n, big_n = int(rng.integers(5, 300)), int(rng.integers(5, 3000))
        y, yhat, unlabelled = _data(seed, n, big_n, slope=float(rng.uniform(-1, 3)))
        found = ppi.ppi_mean(y, yhat, unlabelled, level=level)
        expected_mean = ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled)
        low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=1 - level)
        assert found.mean == pytest.approx(float(np.squeeze(expected_mean)), abs=1e-9)
        assert found.low == pytest.approx(float(np.squeeze(low)), abs=1e-9)
        assert found.high == pytest.approx(float(np.squeeze(high)), abs=1e-9)
        assert (found.n, found.N) == (n, big_n)

    @pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
    def test_fixed_lambda(self, lam):
        """lam fixed: ppi_py's interval with the same lam (lam = 0 is the classical one)."""
        y, yhat, unlabelled = _data(7, 80, 900, slope=1.0)
        found = ppi.ppi_mean(y, yhat, unlabelled, lam=lam)
        low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05, lam=lam)
        assert (found.low, found.high) == pytest.approx(
            (float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9
        )

    def test_classical(self):
        y = np.random.default_rng(3).random(57)
        found = ppi.classical_mean(y, level=0.9)
        low, high = ppi_py.classical_mean_ci(y, alpha=0.1)
        assert found.mean == pytest.approx(y.mean(), abs=1e-12)
        assert (found.low, found.high) == pytest.approx((float(low), float(high)), abs=1e-9)

    def test_stacked_datasets_equal_one_by_one(self):
        """The last axis is the data: a stack of 5 datasets gives each one's estimate."""
        stack = [_data(s, 40, 300, slope=1.5) for s in range(5)]
        together = ppi.ppi_mean(*(np.stack(parts) for parts in zip(*stack, strict=True)))
        for i, parts in enumerate(stack):
            alone = ppi.ppi_mean(*parts)
            assert together.mean[i] == pytest.approx(alone.mean, abs=1e-12)
            assert together.low[i] == pytest.approx(alone.low, abs=1e-12)
            assert together.lam[i] == pytest.approx(alone.lam, abs=1e-12)


class TestHandDerived:
    def test_lambda_by_hand(self):
        """y = (0, 1), yhat = (0, 1), unlabelled = (0, 1): cov = 1/4 (divisor n), var of
        (0, 1, 0, 1) = 1/3 (divisor 3), 1 + n/N = 2: lam = (1/4) / (2/3) = 3/8; theta =
        3/8 * 1/2 + mean(0, 1 - 3/8) = 3/16 + 5/16 = 1/2."""
        found = ppi.ppi_mean([0.0, 1.0], [0.0, 1.0], [0.0, 1.0])
        assert found.lam == pytest.approx(3 / 8)
        assert found.mean == pytest.approx(0.5)

    def test_constant_predictions_fall_back_to_classical(self):
        """Predictions that do not vary carry no information: lambda 0, the classical CI."""
        y = np.array([0.1, 0.5, 0.9, 0.4])
        found = ppi.ppi_mean(y, np.ones(4), np.ones(10))
        classic = ppi.classical_mean(y)
        assert found.lam == 0.0
        assert (found.low, found.high) == pytest.approx((classic.low, classic.high))

    def test_too_few_units(self):
        with pytest.raises(ValueError, match="at least 2 labelled"):
            ppi.ppi_mean([0.5], [0.5], [0.1, 0.2])


def simulate(
    n: int, *, datasets: int, big_n: int, bias: float, noise: float, seed: int
) -> tuple[float, float, float]:
    """Coverage of the true mean by the PPI++ 95% interval, its mean width ratio to the
    human-only interval, and the share of datasets where it is narrower. The true metric
    values are Beta(2, 3) (mean 0.4); the judge reports y + bias + Normal(0, noise)."""
    rng = np.random.default_rng(seed)
    y = rng.beta(2, 3, (datasets, n))
    yhat = y + bias + rng.normal(0, noise, (datasets, n))
    unlabelled = rng.beta(2, 3, (datasets, big_n)) + bias + rng.normal(0, noise, (datasets, big_n))
    found = ppi.ppi_mean(y, yhat, unlabelled)
    classic = ppi.classical_mean(y)
    covered = (found.low <= 0.4) & (found.high >= 0.4)
    ratio = found.width / classic.width
    return float(covered.mean()), float(ratio.mean()), float((ratio < 1).mean())


class TestSimulation:
    SIZES = (100, 200, 500, 1000)

    def test_biased_noisy_judge(self):
        """A judge 0.1 too high with noise 0.1 (correlation ~0.9 with the truth), 1,000
        simulated datasets of 5,000 unlabelled queries at each human-sample size n: the 95%
        intervals cover the true mean >= 94% of the 4,000 times and at each n >= 92.5%
        (1,000 datasets estimate a coverage to +-0.7%: a true 95% reads below 94% one time
        in 14, below 92.5% one time in 10,000), and every interval is narrower than the
        human-only one. docs/ppi.md has the same at 20,000 datasets, n = 25 and 50 too."""
        found = [
            simulate(n, datasets=1000, big_n=5000, bias=0.1, noise=0.1, seed=n) for n in self.SIZES
        ]
        coverages = [coverage for coverage, _, _ in found]
        assert np.mean(coverages) >= 0.94
        assert min(coverages) >= 0.925
        for _, ratio, narrower in found:
            assert ratio < 0.6
            assert narrower == 1.0

    def test_uncorrelated_judge_costs_nothing(self):
        """A judge that is pure noise: lambda ~ 0, coverage kept, width ~ the classical."""
        rng = np.random.default_rng(5)
        y = rng.beta(2, 3, (1000, 100))
        yhat = rng.random((1000, 100))
        unlabelled = rng.random((1000, 2000))
        found = ppi.ppi_mean(y, yhat, unlabelled)
        classic = ppi.classical_mean(y)
        assert ((found.low <= 0.4) & (found.high >= 0.4)).mean() >= 0.94
        assert float(np.mean(found.width / classic.width)) == pytest.approx(1.0, abs=0.03)


def _precision_data(seed: int, queries: int, labelled: int, k: int = 4):
    """Random binary judgements of 8 documents per query, a human's and a noisy judge's;
    a system that ranks them at random; the human subset is the first ``labelled``
    queries. Returns the raw samples, the outputs, and P@k per query by hand (relevant
    documents in the top k, over k)."""
    rng = np.random.default_rng(seed)
    docs = [f"d{j}" for j in range(8)]
    human_rel = rng.random((queries, 8)) < 0.4
    llm_rel = human_rel ^ (rng.random((queries, 8)) < 0.2)
    order = np.argsort(rng.random((queries, 8)), axis=1)
    outputs = {f"q{i}": [docs[j] for j in order[i]] for i in range(queries)}
    gold = [
        {
            "id": f"q{i}",
            "expected_output": {d: int(r) for d, r in zip(docs, human_rel[i], strict=True)},
        }
        for i in range(labelled)
    ]
    judged = [
        {
            "id": f"q{i}",
            "expected_output": {d: int(r) for d, r in zip(docs, llm_rel[i], strict=True)},
        }
        for i in range(queries)
    ]
    top = order[:, :k]
    human_p = np.take_along_axis(human_rel, top, axis=1).sum(axis=1) / k
    llm_p = np.take_along_axis(llm_rel, top, axis=1).sum(axis=1) / k
    return gold, judged, outputs, human_p, llm_p


class TestEvaluationPPI:
    def test_against_ppi_py_on_metric_values(self):
        """evaluation.ppi: P@4 per query by hand, then ppi_py on (human P@4 on the 60
        labelled queries, judge P@4 on the same, judge P@4 on the 440 others)."""
        from engine.evaluation.api import Engine

        gold, judged, outputs, human_p, llm_p = _precision_data(1, 500, 60)
        engine = Engine(config={})
        evaluation = engine.dataset(samples=gold).with_metrics(["retrieval-precision-at-k@4"])
        report = evaluation.ppi(outputs, engine.dataset(samples=judged))
        (row,) = report.metrics
        low, high = ppi_py.ppi_mean_ci(human_p[:60], llm_p[:60], llm_p[60:], alpha=0.05)
        assert row.ppi.mean == pytest.approx(
            float(np.squeeze(ppi_py.ppi_mean_pointestimate(human_p[:60], llm_p[:60], llm_p[60:]))),
            abs=1e-9,
        )
        assert (row.ppi.low, row.ppi.high) == pytest.approx(
            (float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9
        )
        assert row.human.mean == pytest.approx(human_p[:60].mean(), abs=1e-12)
        assert row.llm == pytest.approx(llm_p.mean(), abs=1e-12)
        assert (row.ppi.n, row.ppi.N) == (60, 440)

    def test_paired_difference(self):
        """With a baseline: PPI on the per-query differences of P@4."""
        from engine.evaluation.api import Engine

        gold, judged, outputs, _, _ = _precision_data(2, 300, 50)
        _, _, baseline, _, _ = _precision_data(3, 300, 50)  # another random ranking
        engine = Engine(config={})
        evaluation = engine.dataset(samples=gold).with_metrics(["retrieval-precision-at-k@4"])
        report = evaluation.ppi(outputs, engine.dataset(samples=judged), baseline=baseline)
        human_rel = {s["id"]: s["expected_output"] for s in gold}
        llm_rel = {s["id"]: s["expected_output"] for s in judged}

        def p4(labels, ranked):
            return sum(labels[d] for d in ranked[:4]) / 4

        ids = [f"q{i}" for i in range(300)]
        y = np.array(
            [p4(human_rel[q], outputs[q]) - p4(human_rel[q], baseline[q]) for q in ids[:50]]
        )
        yhat_all = np.array([p4(llm_rel[q], outputs[q]) - p4(llm_rel[q], baseline[q]) for q in ids])
        low, high = ppi_py.ppi_mean_ci(y, yhat_all[:50], yhat_all[50:], alpha=0.05)
        (row,) = report.metrics
        assert report.paired
        assert (row.ppi.low, row.ppi.high) == pytest.approx(
            (float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9
        )

    def test_cli(self, tmp_path, capsys):
        """slotwise run GOLD --outputs RUN --ppi JUDGED --format json; GOLD lists the
        unlabelled queries too (they are not part of the human subset)."""
        import json

        from engine.cli import main

        gold, judged, outputs, human_p, llm_p = _precision_data(4, 200, 40)
        gold += [{"id": f"q{i}"} for i in range(40, 200)]  # listed, without labels
        for name, value in (("gold", {"samples": gold}), ("judged", {"samples": judged})):
            (tmp_path / f"{name}.json").write_text(json.dumps(value))
        (tmp_path / "run.json").write_text(json.dumps(outputs))
        code = main(
            ["run", str(tmp_path / "gold.json"), "--outputs", str(tmp_path / "run.json"),
             "--metrics", "retrieval-precision-at-k@4", "--ppi", str(tmp_path / "judged.json"),
             "--format", "json"]
        )  # fmt: skip
        assert code == 0
        (row,) = json.loads(capsys.readouterr().out)["ppi"]["metrics"]
        low, high = ppi_py.ppi_mean_ci(human_p[:40], llm_p[:40], llm_p[40:], alpha=0.05)
        assert row["ppi"]["ci"] == pytest.approx(
            [float(np.squeeze(low)), float(np.squeeze(high))], abs=1e-9
        )
        assert row["human"]["mean"] == pytest.approx(human_p[:40].mean())
        assert (row["labelled"], row["unlabelled"]) == (40, 160)
        assert main(
            ["run", str(tmp_path / "gold.json"), "--outputs", str(tmp_path / "run.json"),
             "--metrics", "retrieval-precision-at-k@4", "--ppi", str(tmp_path / "judged.json")]
        ) == 0  # fmt: skip
        assert "PPI mean" in capsys.readouterr().out


class TestEstimateMetrics:
    def test_na_values_are_left_out_and_counted(self):
        """A labelled unit with NA on either side and an unlabelled unit with an NA
        prediction are left out (counted); the rest is ppi_mean of what remains."""
        y, yhat, unlabelled = _data(9, 30, 200, slope=1.0)
        human = np.concatenate([y, np.full(200, np.nan)])
        llm = np.concatenate([yhat, unlabelled])
        labelled = np.arange(230) < 30
        human[3] = np.nan  # human NA
        llm[7] = np.nan  # judge NA on a labelled unit
        llm[100] = np.nan  # judge NA on an unlabelled unit
        (row,) = ppi.estimate_metrics({"m": human}, {"m": llm}, labelled)
        keep = np.ones(30, bool)
        keep[[3, 7]] = False
        rest = np.delete(unlabelled, 70)
        expected = ppi.ppi_mean(y[keep], yhat[keep], rest)
        assert (row.ppi.mean, row.ppi.low, row.ppi.high) == pytest.approx(
            (expected.mean, expected.low, expected.high), abs=1e-12
        )
        assert row.left_out == 3 and (row.ppi.n, row.ppi.N) == (28, 199)
        assert row.llm == pytest.approx(np.concatenate([yhat[keep], rest]).mean())
