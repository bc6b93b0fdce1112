"""engine.evaluation.ppi_design: stratified (StratPPI) and inverse-probability-weighted
(Horvitz-Thompson, Hájek) PPI, pinned by worked examples written out below, by the
authors' package ppi_py stratum by stratum, and by small coverage simulations."""

from __future__ import annotations

import math

import numpy as np
import ppi_py
import pytest

from engine.analysis.sampling import active_probabilities
from engine.evaluation import ppi
from engine.evaluation.ppi_design import (
    ipw_ppi_mean,
    ipw_ppi_population,
    stratified_ppi_mean,
    stratified_ppi_parts,
    weighted_metrics,
)

Z = 1.959963984540054


class TestStratified:
    def test_worked_example(self):
        """Two strata, lambda fixed at 1.
        a: y = [1, 0], yhat = [.5, .5], unlabelled [.5, 1] (n 2, N 2): rectifier [.5, -.5]
           (mean 0, var .25), mean(unlabelled) .75, var .0625: theta_a = .75,
           se_a^2 = .0625/2 + .25/2 = .15625.
        b: y = [0, 0, 1], yhat = [0, .5, 1], unlabelled [.25] (n 3, N 1): rectifier
           [0, -.5, 0] (mean -1/6, var 1/12 - 1/36 = 1/18): theta_b = .25 - 1/6 = 1/12,
           se_b^2 = 0 + (1/18)/3 = 1/54.
        weights 4/8 each: theta = (.75 + 1/12)/2 = 5/12,
        se^2 = .25 * .15625 + .25/54."""
        found = stratified_ppi_mean(
            [1, 0, 0, 0, 1], [0.5, 0.5, 0, 0.5, 1], ["a", "a", "b", "b", "b"],
            [0.5, 1.0, 0.25], ["a", "a", "b"], lam=1.0,
        )  # fmt: skip
        se = math.sqrt(0.25 * 0.15625 + 0.25 / 54)
        assert found.mean == pytest.approx(5 / 12, abs=1e-12)
        assert found.low == pytest.approx(5 / 12 - Z * se, abs=1e-12)
        assert found.high == pytest.approx(5 / 12 + Z * se, abs=1e-12)
        assert (found.n, found.N, found.lam) == (5, 3, 1.0)

    def test_stratum_labelled_whole_is_its_classical_mean(self):
        """A stratum without unlabelled units: its mean, se = sd/sqrt(n) (divisor n).
        a as above (theta .75, se^2 .15625, weight 4/7); c: y = [1, 0, 0] (mean 1/3,
        var 2/9, se^2 2/27, weight 3/7)."""
        found = stratified_ppi_parts(
            [([1, 0], [0.5, 0.5], [0.5, 1.0]), ([1, 0, 0], [0.9, 0.9, 0.9], [])], lam=1.0
        )
        se = math.sqrt((4 / 7) ** 2 * 0.15625 + (3 / 7) ** 2 * 2 / 27)
        assert found.mean == pytest.approx(4 / 7 * 0.75 + 3 / 7 / 3, abs=1e-12)
        assert found.high - found.mean == pytest.approx(Z * se, abs=1e-12)

    def test_one_stratum_is_ppi_py(self):
        rng = np.random.default_rng(3)
        y = rng.random(40)
        yhat = y + rng.normal(0.1, 0.2, 40)
        unlabelled = rng.random(300) + rng.normal(0.1, 0.2, 300)
        found = stratified_ppi_mean(y, yhat, ["x"] * 40, unlabelled, ["x"] * 300)
        low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05)
        assert found.mean == pytest.approx(
            float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled))), abs=1e-12
        )
        assert (found.low, found.high) == pytest.approx(
            (float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-12
        )

    def test_shared_lambda_worked_example(self):
        """The data of test_worked_example, lambda tuned once for both strata:
        a: cov(y, yhat) = 0 (yhat constant); yhat all [.5, .5, .5, 1] (var, divisor 3,
           .1875/3 = .0625), (1 + 2/2) .0625 = .125, times w^2/n = .25/2: .015625.
        b: cov = ((-1/3)(-.5) + 0 + (2/3)(.5))/3 = 1/6, times w^2/n = .25/3: 1/72;
           yhat all [0, .5, 1, .25] (var .546875/3), (1 + 3/1) that = .7291667, times
           .25/3: .0607639.
        lambda = (1/72) / (.015625 + .0607639) = (1/72)/(11/144) = 2/11.
        theta_a = .5 + .25 lambda, theta_b = 1/3 - .25 lambda: theta = 5/12 still;
        se_a^2 = lambda^2 .0625/2 + .25/2; se_b^2 = var([0, -.5 lambda, 1 - lambda])/3."""
        found = stratified_ppi_mean(
            [1, 0, 0, 0, 1], [0.5, 0.5, 0, 0.5, 1], ["a", "a", "b", "b", "b"],
            [0.5, 1.0, 0.25], ["a", "a", "b"],
        )  # fmt: skip
        lam = 2 / 11
        r = [0, -0.5 * lam, 1 - lam]
        var_b = sum(x * x for x in r) / 3 - (sum(r) / 3) ** 2
        se = math.sqrt(0.25 * (lam**2 * 0.0625 / 2 + 0.25 / 2) + 0.25 * var_b / 3)
        assert found.lam == pytest.approx(lam, abs=1e-12)
        assert found.mean == pytest.approx(5 / 12, abs=1e-12)
        assert found.high - found.mean == pytest.approx(Z * se, abs=1e-12)

    def test_strata_combine_ppi_py_per_stratum(self):
        """Tuned lambda per stratum (lam="stratum"): theta = sum of weight x ppi_py's estimate of the
        stratum; se^2 = sum of weight^2 x (ppi_py's half-width / z)^2."""
        rng = np.random.default_rng(8)
        sizes = {"factoid": (30, 400, 0.1), "multi-hop": (12, 90, 0.5), "none": (8, 60, 0.9)}
        parts, mean, variance = [], 0.0, 0.0
        total = sum(n + big_n for n, big_n, _ in sizes.values())
        for n, big_n, noise in sizes.values():
            y = np.where(rng.random(n) < 0.3, 0.0, rng.beta(2, 3, n))
            yhat = y + rng.normal(0, noise, n)
            unlabelled = rng.beta(2, 3, big_n) + rng.normal(0, noise, big_n)
            parts.append((y, yhat, unlabelled))
            w = (n + big_n) / total
            mean += w * float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled)))
            low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05)
            variance += w**2 * (float(np.squeeze(high - low)) / (2 * Z)) ** 2
        found = stratified_ppi_parts(parts, lam="stratum")
        assert found.mean == pytest.approx(mean, abs=1e-12)
        assert found.high - found.mean == pytest.approx(Z * math.sqrt(variance), abs=1e-12)

    def test_a_stratum_needs_two_labelled(self):
        with pytest.raises(ValueError, match=r"stratum 'b'.*at least 2 labelled"):
            stratified_ppi_mean([1, 0, 1], [1, 0, 1], ["a", "a", "b"], [0.5], ["b"])


class TestInverseProbability:
    # M = 4 units: yhat [.2, .4, .6, .8]; units 1 and 3 labelled (y 0 and 1) with
    # probabilities .5 and .25 (weights 2 and 4).
    YHAT = np.array([0.2, 0.4, 0.6, 0.8])
    LABELLED = np.array([True, False, True, False])
    Y = np.array([0.0, np.nan, 1.0, np.nan])
    PI = np.array([0.5, np.nan, 0.25, np.nan])

    def test_horvitz_thompson_worked_example(self):
        """lambda 1: z = yhat + w (y - yhat) = [-.2, .4, 2.2, .8]: theta .8; sd^2
        (divisor 4) = (1 + .16 + 1.96 + 0)/4 = .78, se = sqrt(.78/4)."""
        found = ipw_ppi_population(self.Y, self.YHAT, self.LABELLED, self.PI, lam=1.0)
        assert found.mean == pytest.approx(0.8, abs=1e-12)
        assert found.high - found.mean == pytest.approx(Z * math.sqrt(0.78 / 4), abs=1e-12)
        assert (found.n, found.N) == (2, 2)

    def test_human_only_is_the_horvitz_thompson_mean(self):
        """lambda 0: z = w y = [0, 0, 4, 0]: theta 1, sd^2 = (1 + 1 + 9 + 1)/4 = 3."""
        found = ipw_ppi_population(self.Y, self.YHAT, self.LABELLED, self.PI, lam=0.0)
        assert found.mean == pytest.approx(1.0, abs=1e-12)
        assert found.high - found.mean == pytest.approx(Z * math.sqrt(3 / 4), abs=1e-12)

    def test_tuned_lambda(self):
        """a = yhat (1 - w) = [-.2, .4, -1.8, .8] (mean -.2), b = w y = [0, 0, 4, 0]
        (mean 1): cov = (0 - .6 - 4.8 - 1)/4 = -1.6, var(a) = (0 + .36 + 2.56 + 1)/4 = .98,
        lambda = 1.6/.98 > 1, clipped to 1: the lambda-1 estimate."""
        found = ipw_ppi_population(self.Y, self.YHAT, self.LABELLED, self.PI)
        assert found.lam == 1.0
        assert found.mean == pytest.approx(0.8, abs=1e-12)

    def test_tuned_lambda_inside(self):
        """yhat [.5, .1, .9, .3], units 1 and 2 labelled (y 0 and 1, pi .5: w 2):
        a = yhat (1 - w) = [-.5, -.1, .9, .3] (mean .15), b = w y = [0, 2, 0, 0]
        (mean .5): cov = (-.65 * -.5 + -.25 * 1.5 + .75 * -.5 + .15 * -.5)/4
        = (.325 - .375 - .375 - .075)/4 = -.125; var(a) = (.4225 + .0625 + .5625
        + .0225)/4 = .2675; lambda = .125/.2675, and z = lambda yhat + w (y - lambda yhat)."""
        found = ipw_ppi_population(
            [0.0, 1.0, 0, 0], [0.5, 0.1, 0.9, 0.3], [True, True, False, False], [0.5, 0.5, 1, 1]
        )
        lam = 0.125 / 0.2675
        z = np.array([0.5 * lam + 2 * (0 - 0.5 * lam), 0.1 * lam + 2 * (1 - 0.1 * lam),
                      0.9 * lam, 0.3 * lam])  # fmt: skip
        assert found.lam == pytest.approx(lam, abs=1e-12)
        assert found.mean == pytest.approx(z.mean(), abs=1e-12)
        assert found.high - found.mean == pytest.approx(Z * z.std() / 2, abs=1e-12)

    def test_hajek_worked_example(self):
        """lambda 1: R = (2(-.2) + 4(.4))/6 = .2; theta = mean(yhat) + R = .5 + .2 = .7;
        z = yhat + (4/6) w (r - R) = [-1/3, .4, 1.1333.., .8] (mean .5): sd^2 =
        (.69444 + .01 + .40111 + .09)/4 = 1.195556/4."""
        found = ipw_ppi_population(self.Y, self.YHAT, self.LABELLED, self.PI, lam=1.0, hajek=True)
        z = np.array([0.2 - 4 / 3 * 0.4, 0.4, 0.6 + 8 / 3 * 0.2, 0.8])
        assert found.mean == pytest.approx(0.7, abs=1e-12)
        assert found.high - found.mean == pytest.approx(Z * z.std() / 2, abs=1e-12)
        assert z.var() == pytest.approx(1.195556 / 4, abs=1e-6)

    def test_split_form_equals_population_form(self):
        found = ipw_ppi_mean([0.0, 1.0], [0.2, 0.6], [0.5, 0.25], [0.4, 0.8], lam=1.0)
        assert found.mean == pytest.approx(0.8, abs=1e-12)

    def test_probabilities_are_checked(self):
        with pytest.raises(ValueError, match=r"\(0, 1\]"):
            ipw_ppi_population(self.Y, self.YHAT, self.LABELLED, [0, 1, 0.2, 1])


def _population(rng, reps, size):
    """nDCG-like values (30% 0s, 10% 1s, Beta(2, 2.5)) and a judge that errs on 30%."""
    u = rng.random((reps, size))
    y = np.where(u < 0.3, 0.0, np.where(u < 0.4, 1.0, rng.beta(2, 2.5, (reps, size))))
    hard = rng.random((reps, size)) < 0.3
    noise = np.where(hard, 0.35, 0.03)
    yhat = np.clip(y + np.where(hard, -0.1, 0.02) + noise * rng.standard_normal(y.shape), 0, 1)
    return y, yhat, noise


TRUTH = 0.1 + 0.6 * 2 / 4.5


class TestCoverage:
    def test_active_sampling_covers_and_narrows(self):
        """2,000 simulated datasets of 2,000 queries, 200 expected labels: Poisson
        sampling with pi from the judge's (informative) uncertainty covers the mean as
        often as nominal (within 3 s.e.) and is narrower than uniform PPI++."""
        rng = np.random.default_rng(11)
        covered = width = uniform_width = 0.0
        for _ in range(4):
            y, yhat, noise = _population(rng, 500, 2000)
            pi = np.stack([active_probabilities(row, 200) for row in noise])
            xi = rng.random(pi.shape) < pi
            found = ipw_ppi_population(y, yhat, xi, pi)
            covered += float(((found.low <= TRUTH) & (found.high >= TRUTH)).sum())
            width += float(np.sum(found.width))
            uniform_width += float(np.sum(ppi.ppi_mean(y[:, :200], yhat[:, :200],
                                                       yhat[:, 200:]).width))  # fmt: skip
        assert abs(covered / 2000 - 0.95) < 3 * math.sqrt(0.95 * 0.05 / 2000)
        assert width < 0.85 * uniform_width

    def test_stratified_covers(self):
        """Three strata of fixed sizes where the judge errs unequally; proportional
        allocation of 300 labels: coverage within 3 s.e. of 95%."""
        rng = np.random.default_rng(12)
        shares = ((1000, 0.05, 0.3), (600, 0.3, 0.3), (400, 0.2, 0.8))
        covered = 0.0
        truth = sum(size * (0.1 + (0.9 - zero) * 2 / 4.5) for size, _, zero in shares) / 2000
        for _ in range(4):
            parts = []
            for size, noise, zero in shares:
                u = rng.random((500, size))
                y = np.where(u < zero, 0.0, np.where(u < zero + 0.1, 1.0,
                                                     rng.beta(2, 2.5, (500, size))))  # fmt: skip
                yhat = np.clip(y + 0.1 + noise * rng.standard_normal(y.shape), 0, 1)
                n = size * 300 // 2000
                parts.append((y[:, :n], yhat[:, :n], yhat[:, n:]))
            found = stratified_ppi_parts(parts)
            covered += float(((found.low <= truth) & (found.high >= truth)).sum())
        assert abs(covered / 2000 - 0.95) < 3 * math.sqrt(0.95 * 0.05 / 2000)


class TestWeightedMetrics:
    def test_stratified_and_na(self):
        """Per label, NA units left out and counted; the human-only estimate is the
        lambda-0 stratified mean (a: mean(y) 0.5, b: mean 1/3; weights by units used)."""
        human = {"m": [1, 0, 0, 0, 1, np.nan, np.nan, np.nan, np.nan]}
        llm = {"m": [0.5, 0.5, 0, 0.5, 1, 0.5, 1.0, 0.25, np.nan]}
        labelled = [True] * 5 + [False] * 4
        strata = ["a", "a", "b", "b", "b", "a", "a", "b", "b"]
        (row,) = weighted_metrics(human, llm, labelled, method="stratified", strata=strata)
        assert row.left_out == 1
        assert row.human.mean == pytest.approx(0.5 * 0.5 + 0.5 / 3, abs=1e-12)
        assert (row.ppi.n, row.ppi.N) == (5, 3)
        assert row.llm == pytest.approx(np.nanmean(llm["m"]), abs=1e-12)

    def test_active_worked_example(self):
        (row,) = weighted_metrics(
            {"m": TestInverseProbability.Y}, {"m": TestInverseProbability.YHAT},
            TestInverseProbability.LABELLED, method="active",
            probability=TestInverseProbability.PI,
        )  # fmt: skip
        assert row.ppi.mean == pytest.approx(0.8, abs=1e-12)
        assert row.human.mean == pytest.approx(1.0, abs=1e-12)

    def test_errors_name_the_metric(self):
        with pytest.raises(ValueError, match="m: stratum 'b'"):
            weighted_metrics({"m": [1, 0, 1]}, {"m": [1, 0, 1]}, [True] * 3,
                             method="stratified", strata=["a", "a", "b"])  # fmt: skip


def _loop_data(seed: int, queries: int = 300):
    """Queries of three kinds (metadata.kind) with 8 documents each, a person's binary
    judgements and a judge's that flips 10%, 25% or 40% of them by kind; a system that
    ranks at random. Returns the judged samples, the human labels by query, the outputs
    and P@4 per query under each (relevant documents in the top 4, over 4)."""
    rng = np.random.default_rng(seed)
    docs = [f"d{j}" for j in range(8)]
    kinds = np.array(["factoid", "multi-hop", "opinion"])[rng.integers(0, 3, queries)]
    flip = np.select([kinds == "factoid", kinds == "multi-hop"], [0.1, 0.25], 0.4)
    human = rng.random((queries, 8)) < 0.35
    llm = human ^ (rng.random((queries, 8)) < flip[:, None])
    order = np.argsort(rng.random((queries, 8)), axis=1)
    ids = [f"topic-{i:04d}" for i in range(queries)]
    outputs = {q: [docs[j] for j in order[i]] for i, q in enumerate(ids)}
    judged = [
        {"id": q, "expected_output": {d: int(r) for d, r in zip(docs, llm[i], strict=True)},
         "metadata": {"kind": str(kinds[i])}}
        for i, q in enumerate(ids)
    ]  # fmt: skip
    labels = {
        q: {d: int(r) for d, r in zip(docs, human[i], strict=True)} for i, q in enumerate(ids)
    }
    top = order[:, :4]
    y = np.take_along_axis(human, top, axis=1).sum(axis=1) / 4
    yhat = np.take_along_axis(llm, top, axis=1).sum(axis=1) / 4
    return ids, kinds, judged, labels, outputs, y, yhat


class TestCommandLine:
    """slotwise sample, then slotwise run GOLD --ppi JUDGED --design: the estimate
    weighted as drawn, computed here again from P@4 by hand."""

    @pytest.fixture
    def loop(self, tmp_path):
        import json

        ids, kinds, judged, labels, outputs, y, yhat = _loop_data(21)
        (tmp_path / "judged.json").write_text(json.dumps({"samples": judged}))
        (tmp_path / "run.json").write_text(json.dumps(outputs))

        def estimate(*sample_options):
            from engine.analysis.sampling import read_sample
            from engine.cli import main

            assert main(["sample", str(tmp_path / "judged.json"), "--output",
                         str(tmp_path / "s.jsonl"), *sample_options]) == 0  # fmt: skip
            drawn = read_sample(tmp_path / "s.jsonl")
            picked = {u.query_id for u in drawn.units}
            gold = [{"id": q, "expected_output": labels[q]} if q in picked else {"id": q}
                    for q in ids]  # fmt: skip
            (tmp_path / "gold.json").write_text(json.dumps({"samples": gold}))
            code = main(["run", str(tmp_path / "gold.json"), "--outputs", str(tmp_path / "run.json"),
                         "--metrics", "retrieval-precision-at-k@4", "--ppi",
                         str(tmp_path / "judged.json"), "--design", str(tmp_path / "s.design.json"),
                         "--format", "json"])  # fmt: skip
            return code, drawn, np.array([q in picked for q in ids])

        return tmp_path, ids, kinds, y, yhat, estimate

    def test_stratified(self, loop, capsys):
        """One lambda over the strata, written out with plain sums here."""
        import json

        _, ids, kinds, y, yhat, estimate = loop
        code, _, picked = estimate("--size", "60", "--stratify", "metadata.kind", "--seed", "3")
        assert code == 0
        document = json.loads(capsys.readouterr().out)["ppi"]
        (row,) = document["metrics"]
        total = len(ids)
        top = bottom = 0.0
        per = []
        for kind in ("factoid", "multi-hop", "opinion"):
            at, rest = picked & (kinds == kind), ~picked & (kinds == kind)
            n, big_n = int(at.sum()), int(rest.sum())
            w = (n + big_n) / total
            ys, hs, us = y[at], yhat[at], yhat[rest]
            cov = sum((a - ys.mean()) * (b - hs.mean()) for a, b in zip(ys, hs, strict=True)) / n
            every = np.concatenate([hs, us])
            var = sum((v - every.mean()) ** 2 for v in every) / (n + big_n - 1)
            top += w * w / n * cov
            bottom += w * w / n * (1 + n / big_n) * var
            per.append((w, ys, hs, us))
        lam = min(max(top / bottom, 0.0), 1.0)
        mean = sum(w * (lam * us.mean() + (ys - lam * hs).mean()) for w, ys, hs, us in per)
        var = sum(w * w * (lam**2 * us.var() / us.size + (ys - lam * hs).var() / ys.size)
                  for w, ys, hs, us in per)  # fmt: skip
        assert row["ppi"]["mean"] == pytest.approx(mean, abs=1e-12)
        assert row["ppi"]["lambda"] == pytest.approx(lam, abs=1e-12)
        assert row["ppi"]["ci"][1] - mean == pytest.approx(Z * math.sqrt(var), abs=1e-12)
        assert (row["labelled"], row["unlabelled"]) == (60, 240)
        assert (
            "weighted by a stratified design of 60 queries drawn from 300" in document["notes"][0]
        )

    def test_active(self, loop, capsys):
        """Poisson draw with pi from an uncertainty file; Horvitz-Thompson z by hand."""
        import json

        tmp_path, ids, kinds, y, yhat, estimate = loop
        noise = {"factoid": 0.1, "multi-hop": 0.25, "opinion": 0.4}
        (tmp_path / "u.jsonl").write_text("".join(
            json.dumps({"query_id": q, "uncertainty": noise[k]}) + "\n"
            for q, k in zip(ids, kinds, strict=True)))  # fmt: skip
        code, drawn, picked = estimate("--size", "60", "--active", "--uncertainty",
                                       str(tmp_path / "u.jsonl"), "--seed", "4")  # fmt: skip
        assert code == 0
        (row,) = json.loads(capsys.readouterr().out)["ppi"]["metrics"]
        pi = np.array([drawn.probabilities().get((q, None), 1.0) for q in ids])
        w = np.where(picked, 1 / pi, 0.0)
        a, b = yhat * (1 - w), w * y
        lam = min(max(-np.mean((a - a.mean()) * (b - b.mean())) / a.var(), 0.0), 1.0)
        z = lam * yhat + w * (y - lam * yhat)
        assert row["ppi"]["mean"] == pytest.approx(z.mean(), abs=1e-12)
        assert row["ppi"]["ci"][1] - z.mean() == pytest.approx(
            Z * z.std() / math.sqrt(300), abs=1e-12
        )
        assert row["human"]["mean"] == pytest.approx(np.mean(w * y), abs=1e-12)

    def test_uniform_is_ppi_py(self, loop, capsys):
        import json

        _, _, _, y, yhat, estimate = loop
        code, _, picked = estimate("--size", "50", "--seed", "5")
        assert code == 0
        (row,) = json.loads(capsys.readouterr().out)["ppi"]["metrics"]
        low, high = ppi_py.ppi_mean_ci(y[picked], yhat[picked], yhat[~picked], alpha=0.05)
        assert row["ppi"]["ci"] == pytest.approx(
            [float(np.squeeze(low)), float(np.squeeze(high))], abs=1e-12
        )

    def test_labels_outside_the_design_are_an_error(self, loop, capsys):
        import json

        from engine.cli import main

        tmp_path, _, _, _, _, estimate = loop
        code, _, picked = estimate("--size", "50", "--stratify", "metadata.kind")
        assert code == 0
        capsys.readouterr()
        gold = json.loads((tmp_path / "gold.json").read_text())
        for at in np.flatnonzero(~picked)[:2]:  # labelled, not drawn
            gold["samples"][at]["expected_output"] = {"d0": 1, "d1": 0}
        (tmp_path / "gold.json").write_text(json.dumps(gold))
        code = main(["run", str(tmp_path / "gold.json"), "--outputs", str(tmp_path / "run.json"),
                     "--metrics", "retrieval-precision-at-k@4", "--ppi",
                     str(tmp_path / "judged.json"), "--design", str(tmp_path / "s.design.json")])  # fmt: skip
        assert code == 2
        assert "labelled by people but not in the sample: 2 queries" in capsys.readouterr().err

    def test_the_design_the_labels_record(self, loop, capsys):
        """Human labels whose metadata.sample names the design (as `labels import`
        writes it) are weighted by it without --design; a changed design is an error."""
        import hashlib
        import json

        from engine.cli import main

        tmp_path, *_, estimate = loop
        assert estimate("--size", "60", "--stratify", "metadata.kind", "--seed", "3")[0] == 0
        weighted = json.loads(capsys.readouterr().out)["ppi"]
        design = tmp_path / "s.design.json"
        where = {"unit": "query", "design": str(design),
                 "design_sha256": hashlib.sha256(design.read_bytes()).hexdigest()}  # fmt: skip
        gold = json.loads((tmp_path / "gold.json").read_text())
        for sample in gold["samples"]:
            if "expected_output" in sample:
                sample["metadata"] = {"sample": where}
        (tmp_path / "gold.json").write_text(json.dumps(gold))
        command = ["run", str(tmp_path / "gold.json"), "--outputs", str(tmp_path / "run.json"),
                   "--metrics", "retrieval-precision-at-k@4", "--ppi",
                   str(tmp_path / "judged.json"), "--format", "json"]  # fmt: skip
        assert main(command) == 0
        assert json.loads(capsys.readouterr().out)["ppi"] == weighted
        design.write_text(design.read_text().replace('"seed": 3', '"seed": 4'))
        assert main(command) == 2
        assert "the design changed since the labels were imported" in capsys.readouterr().err

    def test_compare_weighs_by_the_design(self, loop, capsys):
        """compare A B --ppi --human --design gives run's paired estimate with the same
        design (run B --ppi-baseline A --design), and --design alone is a usage error."""
        import json

        from engine.cli import main

        tmp_path, ids, *_, estimate = loop
        rng = np.random.default_rng(5)
        other = {q: [f"d{j}" for j in rng.permutation(8)] for q in ids}
        (tmp_path / "other.json").write_text(json.dumps(other))
        assert estimate("--size", "60", "--stratify", "metadata.kind", "--seed", "3")[0] == 0
        capsys.readouterr()
        common = ["--metrics", "retrieval-precision-at-k@4", "--format", "json"]
        for name in ("run", "other"):
            assert main(["run", str(tmp_path / "judged.json"), "--outputs",
                         str(tmp_path / f"{name}.json"), "--keep-outputs", *common, "--output",
                         str(tmp_path / f"{name}-results.json")]) == 0  # fmt: skip
        design = str(tmp_path / "s.design.json")
        assert main(["compare", str(tmp_path / "run-results.json"),
                     str(tmp_path / "other-results.json"), "--ppi", str(tmp_path / "judged.json"),
                     "--human", str(tmp_path / "gold.json"), "--design", design,
                     "--format", "json"]) == 0  # fmt: skip
        (compared,) = json.loads(capsys.readouterr().out)["ppi"]
        assert main(["run", str(tmp_path / "gold.json"), "--outputs", str(tmp_path / "other.json"),
                     "--ppi", str(tmp_path / "judged.json"), "--ppi-baseline",
                     str(tmp_path / "run.json"), "--design", design, *common]) == 0  # fmt: skip
        ran = json.loads(capsys.readouterr().out)["ppi"]
        assert compared["metrics"] == ran["metrics"]
        assert "weighted by a stratified design" in compared["notes"][0]
        assert main(["compare", "a.json", "b.json", "--design", design]) == 2
        assert "--design goes with --ppi" in capsys.readouterr().err


class TestWithDesign:
    """estimate_with_design: which units a design weighs, and how."""

    @staticmethod
    def _active(excluded: int):
        from engine.analysis.sampling import Design, DrawnSample, Unit

        design = Design(unit="query", method="active", seed=0, population=3,
                        strata={"all": {"population": 3, "drawn": 1}}, excluded=excluded)  # fmt: skip
        return DrawnSample((Unit("c", None, "all", 0.25),), design)

    def test_labelled_before_count_with_certainty(self):
        """Units a, c labelled; c drawn with pi .25, a excluded (labelled before: pi 1):
        w = [1, 0, 4, 0]; lambda tunes to 1 (clipped), z = yhat + w (y - yhat) =
        [0, .4, 2.2, .8]: theta .85; the human-only z = w y = [0, 0, 4, 0]: 1."""
        from engine.evaluation.ppi_design import estimate_with_design

        (row,), notes = estimate_with_design(
            {"m": [0.0, np.nan, 1.0, np.nan]}, {"m": [0.2, 0.4, 0.6, 0.8]},
            [True, False, True, False], ["a", "b", "c", "d"], self._active(1),
        )  # fmt: skip
        assert row.ppi.mean == pytest.approx(0.85, abs=1e-12)
        assert row.human.mean == pytest.approx(1.0, abs=1e-12)
        assert (
            notes[1]
            == "labelled before the draw, counted as labelled with certainty (π = 1): 1 query"
        )

    def test_labels_neither_drawn_nor_excluded(self):
        from engine.evaluation.ppi_design import estimate_with_design

        with pytest.raises(
            ValueError, match=r"labelled by people but not in the sample: 1 query \(e\.g\. a\)"
        ):
            estimate_with_design(
                {"m": [0.0, np.nan, 1.0, np.nan]}, {"m": [0.2, 0.4, 0.6, 0.8]},
                [True, False, True, False], ["a", "b", "c", "d"], self._active(0),
            )  # fmt: skip

    def test_pair_designs_are_not_for_ppi(self):
        from engine.analysis.sampling import draw
        from engine.evaluation.ppi_design import estimate_with_design

        pairs = draw(["a", "b"], 1, doc_ids=["d", "d"])
        with pytest.raises(ValueError, match="drew pairs"):
            estimate_with_design({"m": [1.0, 0]}, {"m": [1.0, 0]}, [True, False], ["a", "b"], pairs)


def test_the_design_simulation_runs():
    """benchmarks/ppi_design_simulation.py with a few replicates: every scenario prints
    its designs' rows (the stratified ones where the strata are fixed)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "ppi_design_simulation.py"
    done = subprocess.run(
        [sys.executable, str(script), "--replicates", "10", "--sizes", "100"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = [
        line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert len(rows) == 1 + 5 + 3 * 4  # header; strata: 5 designs; 4 scenarios of 3
    assert sum("stratified" in row for row in rows) == 2
