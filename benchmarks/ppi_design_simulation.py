"""PPI with sampling designs, by simulation (docs/ppi.md, "Designs and active sampling"):
coverage and width of the 95% intervals under a uniform, a stratified and an active
(probability-proportional) draw of the same label budget.

Each replicate is a fresh population of M = 5,000 queries whose per-query values look
like nDCG@10: 30% exactly 0 (nothing relevant retrieved), 10% exactly 1, the rest
Beta(2, 2.5); a judge reports the value with a bias and noise that differ by kind of
query, clipped to [0, 1]. Scenarios:

- ``strata``: three kinds of query in fixed shares (factoid 50%: bias +0.02, noise
  0.05; multi-hop 30%: bias -0.15, noise 0.25; no-answer 20%, mostly 0s: bias +0.2,
  noise 0.2), the kind known before labelling;
- ``hard``: 30% of queries are hard for the judge (bias -0.1, noise 0.35), the rest easy
  (bias +0.02, noise 0.03); the judge's uncertainty u (e.g. its samples' or several
  judges' disagreement) is its noise times a log-normal(0, 0.3) factor (informative), or
  an independent uniform number (uninformative);
- ``paired``: the difference of two systems that return the same top 10 on 55% of the
  queries (difference 0 under any labels) and differ on the rest (system B +0.05 on
  average); the judge errs as in ``hard`` on each system; u = |the judge's difference|
  (the systems' disagreement), or u = the judge's uncertainty (as in ``hard``) where the
  top 10 differ and 0 where they are the same.

Designs at n labelled queries: ``uniform`` (a simple random sample; PPI++ = ppi_py),
``stratified`` (proportional allocation; StratPPI with one λ, and with a λ per stratum), ``active``
(Poisson sampling, π ∝ 0.8·u/mean(u) + 0.2, expected size n; Horvitz-Thompson and Hájek
rectifiers). Coverage is of the mean the population was drawn from. Prints Markdown.

    python benchmarks/ppi_design_simulation.py [--replicates 20000]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.analysis.sampling import active_probabilities
from engine.evaluation import ppi
from engine.evaluation.ppi_design import ipw_ppi_population, stratified_ppi_parts

M = 5000
ZERO, ONE, A, B = 0.3, 0.1, 2.0, 2.5
BODY = A / (A + B)
Arrays = tuple[npt.NDArray[np.float64], ...]


def values(rng: np.random.Generator, shape: tuple[int, ...], zero: float = ZERO) -> Any:
    """nDCG-like values: ``zero`` exact 0s, ONE exact 1s, a Beta(A, B) body."""
    u = rng.random(shape)
    return np.where(u < zero, 0.0, np.where(u < zero + ONE, 1.0, rng.beta(A, B, shape)))


def mean_of(zero: float = ZERO) -> float:
    return ONE + (1 - zero - ONE) * BODY


def judged(rng: np.random.Generator, y: Any, bias: Any, noise: Any) -> Any:
    return np.clip(y + bias + noise * rng.standard_normal(y.shape), 0.0, 1.0)


STRATA = (("factoid", 0.5, ZERO, 0.02, 0.05), ("multi-hop", 0.3, ZERO, -0.15, 0.25),
          ("no-answer", 0.2, 0.8, 0.2, 0.2))  # fmt: skip


def strata(rng: np.random.Generator, reps: int) -> tuple[Arrays, float]:
    """(y, yhat, u, stratum code), the truth."""
    ys, yhats, us, codes = [], [], [], []
    for code, (_, share, zero, bias, noise) in enumerate(STRATA):
        size = int(share * M)
        y = values(rng, (reps, size), zero)
        ys.append(y)
        yhats.append(judged(rng, y, bias, noise))
        us.append(np.full((reps, size), noise))
        codes.append(np.full((reps, size), code))
    truth = sum(share * mean_of(zero) for _, share, zero, _, _ in STRATA)
    order = np.random.default_rng(7).permutation(M)  # the kinds interleaved, fixed
    y, yhat, u, code = (np.concatenate(x, axis=1)[:, order] for x in (ys, yhats, us, codes))
    return (y, yhat, u, code), truth


def hard(informative: bool) -> Callable[[np.random.Generator, int], tuple[Arrays, float]]:
    def make(rng: np.random.Generator, reps: int) -> tuple[Arrays, float]:
        y = values(rng, (reps, M))
        difficult = rng.random((reps, M)) < 0.3
        noise = np.where(difficult, 0.35, 0.03)
        yhat = judged(rng, y, np.where(difficult, -0.1, 0.02), noise)
        u = noise * rng.lognormal(0, 0.3, y.shape) if informative else rng.random(y.shape)
        return (y, yhat, u, difficult.astype(np.int64)), mean_of()

    return make


def paired(signal: str) -> Callable[[np.random.Generator, int], tuple[Arrays, float]]:
    def make(rng: np.random.Generator, reps: int) -> tuple[Arrays, float]:
        return _paired(rng, reps, signal)

    return make


def _paired(rng: np.random.Generator, reps: int, signal: str) -> tuple[Arrays, float]:
    same = rng.random((reps, M)) < 0.55
    ya = values(rng, (reps, M))
    yb = np.where(same, ya, np.clip(values(rng, (reps, M)) + 0.05, 0, 1))
    difficult = rng.random((reps, M)) < 0.3
    bias, noise = np.where(difficult, -0.1, 0.02), np.where(difficult, 0.35, 0.03)
    ha = judged(rng, ya, bias, noise)
    hb = np.where(same, ha, judged(rng, yb, bias, noise))
    y, yhat = yb - ya, hb - ha
    if signal == "disagreement":
        u = np.abs(yhat)
    else:  # the judge's uncertainty on the difference: 0 where the top 10 are the same
        u = np.where(same, 0.0, noise * rng.lognormal(0, 0.3, y.shape))
    # the truth: 45% of E[clip(Y' + 0.05) - Y], by a large Monte-Carlo once
    return (y, yhat, u, same.astype(np.int64)), PAIRED_TRUTH


def _paired_truth() -> float:
    rng = np.random.default_rng(12345)
    big = 4_000_000
    return 0.45 * float((np.clip(values(rng, (big,)) + 0.05, 0, 1) - values(rng, (big,))).mean())


PAIRED_TRUTH = _paired_truth()


def designs(data: Arrays, n: int, rng: np.random.Generator) -> dict[str, ppi.Estimate]:
    """Each design's estimate on the same populations."""
    y, yhat, u, code = data
    found = {"uniform PPI++": ppi.ppi_mean(y[:, :n], yhat[:, :n], yhat[:, n:])}
    # stratified by ``code`` (proportional allocation); units are i.i.d. within a stratum,
    # so a stratum's first n_h units are a simple random sample of it
    parts = []
    for value in np.unique(code[0]):
        columns = np.flatnonzero(code[0] == value)
        take = max(2, round(n * columns.size / M))
        parts.append((y[:, columns[:take]], yhat[:, columns[:take]], yhat[:, columns[take:]]))
    if all((code == code[:1]).all(axis=0)):  # fixed strata: a stratified design exists
        found["stratified, one λ"] = stratified_ppi_parts(parts)
        found["stratified, λ per stratum"] = stratified_ppi_parts(parts, lam="stratum")
    pi = np.stack([active_probabilities(row, n) for row in u])
    xi = rng.random(pi.shape) < pi
    found["active, Horvitz-Thompson"] = ipw_ppi_population(y, yhat, xi, pi)
    found["active, Hájek"] = ipw_ppi_population(y, yhat, xi, pi, hajek=True)
    return found


SCENARIOS = (
    ("strata (judge unequal by kind of query)", strata),
    ("hard queries, informative uncertainty", hard(True)),
    ("hard queries, uninformative uncertainty", hard(False)),
    ("paired difference, u = the systems' disagreement", paired("disagreement")),
    ("paired difference, u = the judge's uncertainty where the systems differ", paired("judge")),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=20000)
    parser.add_argument("--sizes", default="100,200")
    args = parser.parse_args()
    print(f"{args.replicates} replicates per row, M = {M} queries\n")
    print("| scenario | n | design | coverage | mean width | width / uniform |")
    print("|---|---:|---|---:|---:|---:|")
    for number, (name, make) in enumerate(SCENARIOS):
        for n in (int(s) for s in args.sizes.split(",")):
            rng = np.random.default_rng(1000 * number + n)
            covered: dict[str, float] = {}
            width: dict[str, float] = {}
            ratio: dict[str, float] = {}
            for start in range(0, args.replicates, 500):
                reps = min(500, args.replicates - start)
                data, truth = make(rng, reps)
                found = designs(data, n, rng)
                base = np.asarray(found["uniform PPI++"].width)
                for design, est in found.items():
                    low, high = np.asarray(est.low), np.asarray(est.high)
                    covered[design] = covered.get(design, 0) + float(
                        ((low <= truth) & (high >= truth)).sum()
                    )
                    width[design] = width.get(design, 0) + float((high - low).sum())
                    ratio[design] = ratio.get(design, 0) + float(((high - low) / base).sum())
            for design in covered:
                r = args.replicates
                print(
                    f"| {name} | {n} | {design} | {covered[design] / r:.4f} | "
                    f"{width[design] / r:.4f} | {ratio[design] / r:.3f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
