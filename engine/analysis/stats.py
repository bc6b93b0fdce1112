"""Statistics for per-sample scores: percentile bootstrap confidence intervals, paired
significance tests (randomization, bootstrap, t), effect sizes and Holm's correction.

Every function is NA-aware (NaN values are dropped, pairs with a NaN on either side are
dropped) and seeded: the same inputs and seed give the same numbers. Resampling is
vectorised with numpy in blocks of at most ``BLOCK_CELLS`` cells, so 100k samples and
1000 resamples take well under a second and bounded memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from engine.analysis.defaults import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    DEFAULT_TEST_RESAMPLES,
    TESTS,
    Test,
)

__all__ = [
    "BLOCK_CELLS",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "DEFAULT_TEST_RESAMPLES",
    "TESTS",
    "PairedTest",
    "Test",
    "bootstrap_ci",
    "bootstrap_means",
    "cohens_dz",
    "holm",
    "paired_bootstrap",
    "paired_randomization",
    "paired_t",
    "paired_test",
]

FloatArray = npt.NDArray[np.float64]
BLOCK_CELLS = 1 << 22  # resampled values held at once (32 MiB of float64)
_TIE = 1e-12  # relative tolerance when a resampled statistic ties the observed one


def _clean(values: npt.ArrayLike) -> FloatArray:
    array = np.asarray(values, dtype=np.float64).ravel()
    return array[~np.isnan(array)]


def bootstrap_means(
    values: npt.ArrayLike, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> FloatArray:
    """The means of ``resamples`` bootstrap resamples of the non-NA values (empty when
    there are none)."""
    data = _clean(values)
    n = data.size
    if n == 0 or resamples <= 0:
        return np.empty(0)
    rng = np.random.default_rng(seed)
    block = max(1, min(resamples, BLOCK_CELLS // n))
    means = np.empty(resamples)
    index_type = np.int32 if n < 2**31 else np.int64
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        picks = rng.integers(0, n, size=(rows, n), dtype=index_type)
        means[start : start + rows] = data[picks].mean(axis=1)
    return means


def bootstrap_ci(
    values: npt.ArrayLike,
    *,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float] | None:
    """The percentile bootstrap confidence interval of the mean of the non-NA values;
    None when fewer than two values are not NA."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    data = _clean(values)
    if data.size < 2:
        return None
    means = bootstrap_means(data, resamples=resamples, seed=seed)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


@attrs.frozen
class PairedTest:
    """The outcome of one paired test of ``b`` against ``a`` (differences ``b - a``).

    ``p`` is two-sided; ``n`` counts the pairs where neither value is NA; ``statistic`` is
    the mean difference (t for the t-test); ``ci`` is the percentile bootstrap interval of
    the mean difference (None when n < 2); ``dz`` is Cohen's d_z (None when undefined)."""

    test: Test
    n: int
    mean_a: float
    mean_b: float
    difference: float
    statistic: float
    p: float
    ci: tuple[float, float] | None
    dz: float | None


def _pairs(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} and {y.size}")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def _tie_tolerance(observed: float) -> float:
    return abs(observed) * _TIE


def paired_randomization(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided p-value of Fisher's paired randomization (sign-flip) test of the mean
    difference. Exact (all 2^n sign assignments) when 2^n <= ``resamples``; otherwise
    ``resamples`` random assignments and the add-one estimate (count + 1) / (resamples + 1),
    as ``scipy.stats.permutation_test`` does. 1 when there are no pairs."""
    x, y = _pairs(a, b)
    d = y - x
    n = d.size
    if n == 0:
        return 1.0
    observed = abs(float(d.sum()))
    threshold = observed - _tie_tolerance(observed)
    if n < 63 and 2**n <= resamples:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n, dtype=np.int64)) & 1)
        return float(np.mean(np.abs(signs @ d) >= threshold))
    rng = np.random.default_rng(seed)
    block = max(1, min(resamples, BLOCK_CELLS // n))
    count = 0
    width = (n + 7) // 8
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        noise = rng.integers(0, 256, size=(rows, width), dtype=np.uint8)
        bits = np.unpackbits(noise, axis=1, count=n)
        signs = 1.0 - 2.0 * bits
        count += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return (count + 1) / (resamples + 1)


def paired_bootstrap(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided p-value of the paired bootstrap test of the mean difference: the
    differences are centred on zero (the null) and resampled; p is the share of resampled
    means at least as far from zero as the observed one, (count + 1) / (resamples + 1).
    1 when there are no pairs."""
    x, y = _pairs(a, b)
    d = y - x
    if d.size == 0:
        return 1.0
    observed = float(d.mean())
    means = bootstrap_means(d - observed, resamples=resamples, seed=seed)
    threshold = abs(observed) - _tie_tolerance(observed)
    if observed == 0.0:
        return 1.0
    count = int(np.count_nonzero(np.abs(means) >= threshold))
    return (count + 1) / (resamples + 1)


def paired_t(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[float, float]:
    """(t, two-sided p) of the paired t-test (``scipy.stats.ttest_rel(b, a)``). With no
    variance in the differences t is 0 and p is 1 when they are all zero, and t is
    infinite and p is 0 when they are a non-zero constant; with fewer than two pairs
    t is NaN and p is 1."""
    x, y = _pairs(a, b)
    d = y - x
    if d.size < 2:
        return math.nan, 1.0
    centre = float(d.mean())
    if np.ptp(d) <= _TIE * max(1.0, abs(centre)):  # constant up to rounding
        if abs(centre) <= _TIE:
            return 0.0, 1.0
        return math.copysign(math.inf, centre), 0.0
    from scipy import stats

    result = stats.ttest_rel(y, x)
    return float(result.statistic), float(result.pvalue)


def cohens_dz(differences: npt.ArrayLike) -> float | None:
    """Cohen's d_z: the mean of the paired differences over their standard deviation
    (ddof=1); None with fewer than two differences or none of them varying."""
    d = _clean(differences)
    if d.size < 2:
        return None
    sd = float(d.std(ddof=1))
    if sd == 0 or not math.isfinite(sd):
        return None
    return float(d.mean()) / sd


def paired_test(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    test: Test = "randomization",
    resamples: int = DEFAULT_TEST_RESAMPLES,
    ci_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> PairedTest:
    """Test ``b`` against ``a`` on the pairs where neither is NA, with the effect size."""
    x, y = _pairs(a, b)
    d = y - x
    n = int(d.size)
    difference = float(d.mean()) if n else math.nan
    statistic = difference
    if test == "randomization":
        p = paired_randomization(x, y, resamples=resamples, seed=seed)
    elif test == "bootstrap":
        p = paired_bootstrap(x, y, resamples=resamples, seed=seed)
    elif test == "t":
        statistic, p = paired_t(x, y)
    else:
        raise ValueError(f"unknown test {test!r}; choose one of {', '.join(TESTS)}")
    return PairedTest(
        test=test,
        n=n,
        mean_a=float(x.mean()) if n else math.nan,
        mean_b=float(y.mean()) if n else math.nan,
        difference=difference,
        statistic=statistic,
        p=p,
        ci=bootstrap_ci(d, level=level, resamples=ci_resamples, seed=seed),
        dz=cohens_dz(d),
    )


def holm(pvalues: Sequence[float] | npt.ArrayLike) -> FloatArray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, at most 1), in the input
    order. NaN p-values are left out of the family and stay NaN."""
    p = np.asarray(pvalues, dtype=np.float64).ravel()
    adjusted = np.full(p.shape, np.nan)
    present = np.flatnonzero(~np.isnan(p))
    m = present.size
    if m == 0:
        return adjusted
    order = present[np.argsort(p[present], kind="stable")]
    steps = (m - np.arange(m)) * p[order]
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return adjusted
