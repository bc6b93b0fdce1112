"""engine.stats: bootstrap CIs, paired tests and Holm's correction, checked against scipy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from engine.analysis import stats


def _pair(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.random(n)
    return a, np.clip(a + rng.normal(0.05, 0.2, n), 0, 1)


class TestBootstrapCI:
    def test_seeded_and_reproducible(self):
        """The same values and seed give the same interval; another seed another one."""
        values = np.random.default_rng(3).random(200)
        assert stats.bootstrap_ci(values) == stats.bootstrap_ci(values)
        assert stats.bootstrap_ci(values) != stats.bootstrap_ci(values, seed=1)

    @pytest.mark.parametrize(("rows", "columns"), [(1000, 1024), (999, 77), (3, 1), (1, 5)])
    def test_random_bytes_are_the_generators_bytes(self, rows: int, columns: int) -> None:
        """The bootstrap's weights come from the bytes numpy's ``Generator.integers(0, 256,
        dtype=uint8)`` draws from the same SFC64 seed: read from the raw outputs directly
        for speed, they must stay those bytes, or every interval would move."""
        from engine.evaluation.statistics import _random_bytes

        for entropy in ([0, 0], [0, 7], [12345, 98]):
            seed = np.random.SeedSequence(entropy)
            expected = np.random.Generator(np.random.SFC64(seed)).integers(
                0, 256, size=(rows, columns), dtype=np.uint8
            )
            np.testing.assert_array_equal(_random_bytes(seed, rows, columns), expected)

    def test_na_values_are_left_out(self):
        """NaN values do not count: the CI equals that of the non-NA values."""
        values = np.array([0.1, np.nan, 0.5, 0.9, np.nan, 0.3])
        assert stats.bootstrap_ci(values) == stats.bootstrap_ci(values[~np.isnan(values)])

    @pytest.mark.parametrize("values", [[], [np.nan], [0.4], [np.nan, 0.4, np.nan]])
    def test_none_below_two_values(self, values):
        """Fewer than two non-NA values: no interval."""
        assert stats.bootstrap_ci(values) is None

    def test_zero_variance(self):
        """Constant values give a zero-width interval at the value."""
        assert stats.bootstrap_ci([0.5] * 10) == (0.5, 0.5)

    def test_agrees_with_scipy_percentile_bootstrap(self):
        """Close to scipy.stats.bootstrap(method='percentile') on the same data."""
        values = np.random.default_rng(7).beta(2, 5, 300)
        ours = stats.bootstrap_ci(values, resamples=20_000)
        theirs = scipy_stats.bootstrap(
            (values,), np.mean, method="percentile", n_resamples=20_000, random_state=0
        ).confidence_interval
        assert ours == pytest.approx((theirs.low, theirs.high), abs=0.004)

    def test_contains_the_mean(self):
        """The interval brackets the sample mean."""
        values = np.random.default_rng(5).random(100)
        low, high = stats.bootstrap_ci(values)
        assert low < values.mean() < high

    def test_level_is_checked(self):
        """A level outside (0, 1) is an error."""
        with pytest.raises(ValueError, match="level"):
            stats.bootstrap_ci([1.0, 2.0], level=95)


class TestBootstrapParts:
    @given(st.lists(st.integers(0, 3000), max_size=6), st.integers(1, 5000))
    @settings(max_examples=25, deadline=None)
    def test_parts_merged_in_order_are_one_add(self, cuts: list[int], count: int) -> None:
        """Rows cut anywhere, each part's block sums computed by a bootstrap of its own (as
        a worker does), merged in dataset order: the intervals of one ``add``, bit for bit."""
        from engine.evaluation.statistics import Bootstrap

        values = np.random.default_rng(count).random((count, 2))
        values[::5, 1] = np.nan
        whole = Bootstrap(2, resamples=200)
        whole.add(values)
        merged = Bootstrap(2, resamples=200)
        bounds = [0, *sorted(min(c, count) for c in cuts), count]
        for start, end in itertools.pairwise(bounds):
            merged.merge(Bootstrap(2, resamples=200).part(values[start:end], start))
        assert merged.intervals() == whole.intervals()

    def test_out_of_order_is_refused(self) -> None:
        """A part merged before the rows it follows is an error, never a wrong interval."""
        from engine.evaluation.statistics import Bootstrap

        bootstrap = Bootstrap(1)
        with pytest.raises(ValueError, match="out of order"):
            bootstrap.merge(Bootstrap(1).part(np.ones((3, 1)), 2000))


class TestRandomization:
    @pytest.mark.parametrize("seed", range(4))
    def test_exact_equals_enumeration(self, seed):
        """For small n all 2^n sign flips are enumerated; p equals a brute-force count."""
        a, b = _pair(9, seed)
        d = b - a
        observed = abs(d.mean())
        flips = [abs(np.mean(d * np.array(s))) for s in itertools.product((1, -1), repeat=9)]
        expected = np.mean([f >= observed - 1e-12 for f in flips])
        assert stats.paired_randomization(a, b) == pytest.approx(expected, abs=1e-12)

    @pytest.mark.parametrize("seed", range(4))
    def test_exact_equals_scipy_permutation_test(self, seed):
        """Equal to scipy.stats.permutation_test(permutation_type='samples'), exact."""
        a, b = _pair(10, seed)
        result = scipy_stats.permutation_test(
            (b, a),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=np.inf,
            vectorized=True,
        )
        assert stats.paired_randomization(a, b) == pytest.approx(result.pvalue, rel=1e-9)

    def test_monte_carlo_close_to_scipy(self):
        """Large n: the sampled p-value is close to scipy's sampled one."""
        a, b = _pair(60, 2)
        b = a + (b - a) * 0.25
        ours = stats.paired_randomization(a, b, resamples=20_000)
        theirs = scipy_stats.permutation_test(
            (b, a),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=20_000,
            vectorized=True,
            random_state=0,
        ).pvalue
        assert ours == pytest.approx(theirs, abs=0.015)

    def test_identical_systems_give_p_one(self):
        """No difference at all: p = 1, no crash."""
        a = np.random.default_rng(0).random(50)
        assert stats.paired_randomization(a, a) == 1.0
        assert stats.paired_randomization(a[:5], a[:5]) == 1.0

    def test_single_sample(self):
        """One pair: the two sign flips tie, p = 1."""
        assert stats.paired_randomization([0.2], [0.9]) == 1.0

    def test_nan_pairs_dropped(self):
        """A pair with NaN on either side is left out."""
        a, b = _pair(8)
        a2, b2 = np.append(a, np.nan), np.append(b, 0.3)
        assert stats.paired_randomization(a2, b2) == stats.paired_randomization(a, b)


class TestPairedT:
    @pytest.mark.parametrize("n", [2, 5, 30, 400])
    def test_equals_scipy_ttest_rel(self, n):
        """t and p equal scipy.stats.ttest_rel."""
        a, b = _pair(n, n)
        t, p = stats.paired_t(a, b)
        expected = scipy_stats.ttest_rel(b, a)
        assert t == pytest.approx(expected.statistic, rel=1e-12)
        assert p == pytest.approx(expected.pvalue, rel=1e-12)

    def test_zero_variance(self):
        """All differences zero: p = 1; a constant non-zero difference: p = 0."""
        a = np.array([0.1, 0.4, 0.8])
        assert stats.paired_t(a, a) == (0.0, 1.0)
        assert stats.paired_t(a, a + 0.1) == (math.inf, 0.0)

    def test_single_sample(self):
        """One pair: no test, p = 1."""
        t, p = stats.paired_t([0.1], [0.5])
        assert math.isnan(t) and p == 1.0


class TestPairedBootstrap:
    def test_clear_difference_is_significant(self):
        """A large shift gives a small p; none gives p = 1."""
        a, _ = _pair(80)
        assert stats.paired_bootstrap(a, a + 0.2 + 0.01 * np.sin(np.arange(80))) < 0.01
        assert stats.paired_bootstrap(a, a) == 1.0

    def test_close_to_t_test_for_large_n(self):
        """For a moderate n the bootstrap p is close to the t-test's."""
        a, b = _pair(200, 4)
        b = a + (b - a) * 0.3
        assert stats.paired_bootstrap(a, b) == pytest.approx(stats.paired_t(a, b)[1], abs=0.03)


class TestEffectAndHolm:
    def test_cohens_dz(self):
        """d_z = mean / sd (ddof 1); None when undefined."""
        d = np.array([0.1, 0.3, 0.2, 0.6])
        assert stats.cohens_dz(d) == pytest.approx(d.mean() / d.std(ddof=1))
        assert stats.cohens_dz([0.2, 0.2]) is None
        assert stats.cohens_dz([0.2]) is None

    def test_holm_by_hand(self):
        """Holm's step-down: sorted p times (m - i), running maximum, capped at 1."""
        adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
        assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])

    def test_holm_keeps_nan_out_of_the_family(self):
        """NaN stays NaN and does not count in m."""
        adjusted = stats.holm([0.01, np.nan, 0.02])
        assert adjusted[0] == pytest.approx(0.02) and adjusted[2] == pytest.approx(0.02)
        assert math.isnan(adjusted[1])

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.floats(0, 1), min_size=1, max_size=20))
    def test_holm_properties(self, pvalues):
        """Adjusted p-values are at least the raw ones, at most 1, and keep their order."""
        adjusted = stats.holm(pvalues)
        raw = np.array(pvalues)
        assert np.all(adjusted >= raw - 1e-15) and np.all(adjusted <= 1)
        order = np.argsort(raw, kind="stable")
        assert np.all(np.diff(adjusted[order]) >= -1e-15)

    def test_paired_test_bundles_effect_sizes(self):
        """paired_test reports n, means, difference, its CI and d_z for any test."""
        a, b = _pair(30)
        for test in stats.TESTS:
            outcome = stats.paired_test(a, b, test=test)
            assert outcome.n == 30
            assert outcome.difference == pytest.approx((b - a).mean())
            assert outcome.ci[0] < outcome.difference < outcome.ci[1]
            assert outcome.dz == pytest.approx(stats.cohens_dz(b - a))
        with pytest.raises(ValueError, match="unknown test"):
            stats.paired_test(a, b, test="wilcoxon")  # type: ignore[arg-type]
