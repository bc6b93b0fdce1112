"""The PPI++ simulation of docs/ppi.md: coverage and width of the 95% intervals.

True per-query metric values are Beta(2, 3) (true mean 0.4); a judge reports the value
plus a bias plus Normal(0, noise). For each human-sample size n, DATASETS simulated
datasets of n labelled and N = 5,000 unlabelled queries: the share of PPI++ intervals that
cover 0.4, of the human-only (classical) intervals that do, and the mean ratio of the PPI++
width to the human-only width. Prints a Markdown table.

    python benchmarks/ppi_simulation.py [--datasets 20000]
"""

from __future__ import annotations

import argparse

import numpy as np

from engine.evaluation import ppi

JUDGES = (
    ("bias +0.1, noise 0.1 (r = 0.89)", 0.1, 0.1),
    ("bias +0.1, noise 0.3 (r = 0.55)", 0.1, 0.3),
    ("bias -0.2, noise 1.0 (r = 0.20)", -0.2, 1.0),
)
SIZES = (25, 50, 100, 200, 500, 1000)
TRUTH = 0.4  # the mean of Beta(2, 3)


def simulate(
    n: int, bias: float, noise: float, datasets: int, big_n: int, seed: int
) -> list[float]:
    """Coverage (PPI++, human-only) and mean width ratio over ``datasets`` datasets,
    simulated 1,000 at a time (one vectorised call each)."""
    rng = np.random.default_rng(seed)
    covered = classic_covered = ratio = 0.0
    for start in range(0, datasets, 1000):
        size = min(1000, datasets - start)
        y = rng.beta(2, 3, (size, n))
        yhat = y + bias + rng.normal(0, noise, (size, n))
        unlabelled = rng.beta(2, 3, (size, big_n)) + bias + rng.normal(0, noise, (size, big_n))
        found = ppi.ppi_mean(y, yhat, unlabelled)
        classic = ppi.classical_mean(y)
        covered += float(((found.low <= TRUTH) & (found.high >= TRUTH)).sum())
        classic_covered += float(((classic.low <= TRUTH) & (classic.high >= TRUTH)).sum())
        ratio += float((found.width / classic.width).sum())
    return [covered / datasets, classic_covered / datasets, ratio / datasets]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=20000)
    parser.add_argument("--unlabelled", type=int, default=5000)
    args = parser.parse_args()
    print(f"{args.datasets} datasets per row, N = {args.unlabelled} unlabelled queries\n")
    print("| judge | n | PPI++ coverage | human-only coverage | width PPI++ / human-only |")
    print("|---|---:|---:|---:|---:|")
    for name, bias, noise in JUDGES:
        for n in SIZES:
            coverage, classic, ratio = simulate(n, bias, noise, args.datasets, args.unlabelled, n)
            print(f"| {name} | {n} | {coverage:.3f} | {classic:.3f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
