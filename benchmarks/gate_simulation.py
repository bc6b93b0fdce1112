"""The regression gate's error rates, measured through its own decision code (issue 59).

Each replicate simulates per-query nDCG-like values of a baseline and a later system,
builds the Comparison that ``engine.analysis.compare.compare`` builds for them and asks
``engine.analysis.verdict.gate`` for its verdict: HELD, REGRESSED or CAN'T TELL. With
human labels on a sample, the paired PPI++ report of ``engine.evaluation.ppi`` decides
(``gate(..., ppi={system: report})``) and the paired test on the judge's labels alone is
shown beside it, as the gate shows it (advisory).

The data (per query, bounded in [0, 1]):

- the baseline: 0 with probability 0.25 (nothing relevant found), 1 with probability 0.10
  (a perfect ranking), else Beta(2, 2.5) (mean 0.39 in all);
- the later system (a reranker): a query the reranker leaves untouched keeps its value
  (80% of the queries at 0: nothing relevant among the candidates; 50% of the others);
  a touched query moves to clip(baseline + mu + Normal(0, 0.25), 0, 1);
- mu is solved so that the mean change over the population is the target exactly: the
  mean of a clipped Normal has a closed form, integrated over the Beta part by quadrature
  (the script checks it against a million draws).

The targets: false HELD (held while the true drop is beyond the margin: 1.5x and 3x it)
<= 5% at every n, and false REGRESSED (regressed while there is no drop: no change, or an
improvement of 2x the margin) <= alpha = 0.05.

One metric per comparison (Holm over a family of one: with more metrics Holm only makes
REGRESSED rarer); the randomization test with ``--resamples`` sign flips (the engine's
default is 10,000; exact for n <= 10 at 2,000); the percentile bootstrap interval with the
engine's default 1,000 resamples and seed. Rows are built as ``compare`` builds them
(``paired_test``, ``holm``, sd with ddof=1, varied = nonzero differences) and, for the first
replicate of every cell, checked equal to the row ``compare()`` itself builds.

    python benchmarks/gate_simulation.py [--replicates 1000] [--ppi-replicates 500]
        [--workers 2] [--only gate|ppi] [--quick]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
from scipy import integrate, optimize, special, stats

from engine.analysis.compare import Comparison, PairRow, compare
from engine.analysis.defaults import DEFAULT_RESAMPLES, DEFAULT_SEED, MIN_PPI_LABELLED
from engine.analysis.stats import holm, paired_test
from engine.analysis.verdict import CANT_TELL, HELD, REGRESSED, gate, min_pairs
from engine.evaluation import ppi
from engine.evaluation.results import Diagnostics, MetricRecord, Results

LABEL = "nDCG@10"
RECORD = MetricRecord(LABEL, "retrieval-ndcg-at-k", {"k": 10}, True, "slotwise", "0.1.0")
ALPHA = 0.05
SIZES = (3, 4, 5, 6, 8, 10, 20, 50, 100, 200, 500, 1000, 2000)
MARGINS = (0.01, 0.05)
#: The true mean changes, in margins: (name, multiple, what a verdict of it would be wrong as)
CHANGES = (
    ("no change", 0.0, REGRESSED),
    ("drop 1.5x margin", -1.5, HELD),
    ("drop 3x margin", -3.0, HELD),
    ("improvement 2x margin", 2.0, REGRESSED),
)
OUTCOMES = (HELD, REGRESSED, CANT_TELL)
TARGET = 0.05

# The population (see the module's docstring).
P_ZERO, P_ONE = 0.25, 0.10
BETA = (2.0, 2.5)
TOUCH_ZERO, TOUCH_OTHER = 0.2, 0.5
SPREAD = 0.25
P_TOUCHED = P_ZERO * TOUCH_ZERO + (1 - P_ZERO) * TOUCH_OTHER

#: Judges of the PPI part: (name, mean bias of the judge's difference, noise): on the
#: queries the reranker touched, judge difference = true difference + bias / P(touched) +
#: Normal(0, noise) (its mean error over all queries is the bias); on the others both
#: systems rank the same documents, so the judge's difference is 0, as the true one.
JUDGES = (
    ("unbiased, noise 0.1", 0.0, 0.1),
    ("unbiased, noise 0.3", 0.0, 0.3),
    ("favours the baseline, bias -0.058", -0.058, 0.1),
    ("favours the later system, bias +0.058", 0.058, 0.1),
)
LABELLED = (20, 40, 100, 400)
POPULATION = 2000


# -- the population ----------------------------------------------------------------------


def _moved(a: float, mu: float) -> float:
    """E[clip(a + mu + Normal(0, SPREAD), 0, 1)] - a: the mean change of a touched query."""
    m = a + mu
    lo, hi = -m / SPREAD, (1 - m) / SPREAD
    inside = m * (special.ndtr(hi) - special.ndtr(lo))
    inside += SPREAD * (stats.norm.pdf(lo) - stats.norm.pdf(hi))
    return float(inside + (1 - special.ndtr(hi)) - a)


def mean_change(mu: float) -> float:
    """The population's mean change at ``mu``, exactly (up to quadrature)."""
    beta = stats.beta(*BETA)
    body, _ = integrate.quad(lambda a: _moved(a, mu) * beta.pdf(a), 0, 1, epsabs=1e-13)
    rest = 1 - P_ZERO - P_ONE
    return P_ZERO * TOUCH_ZERO * _moved(0.0, mu) + TOUCH_OTHER * (
        P_ONE * _moved(1.0, mu) + rest * body
    )


def solve_mu(target: float) -> float:
    """The shift mu whose population mean change is ``target``."""
    return float(optimize.brentq(lambda mu: mean_change(mu) - target, -1.5, 1.5, xtol=1e-15))


def draw(
    rng: np.random.Generator, mu: float, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(baseline, later, touched) values of ``shape`` queries."""
    kind = rng.random(shape)
    a = np.where(kind < P_ZERO, 0.0, np.where(kind < P_ZERO + P_ONE, 1.0, rng.beta(*BETA, shape)))
    touched = rng.random(shape) < np.where(a == 0.0, TOUCH_ZERO, TOUCH_OTHER)
    moved = np.clip(a + mu + rng.normal(0.0, SPREAD, shape), 0.0, 1.0)
    return a, np.where(touched, moved, a), touched


# -- the engine's objects ------------------------------------------------------------------


def results(values: np.ndarray) -> Results:
    """Results of one system holding one metric's per-query values."""
    n = values.size
    return Results(
        dataset_name="simulated",
        dataset_hash="sha256:" + "0" * 64,
        ids=pa.array([f"q{i}" for i in range(n)]),
        metrics=[RECORD],
        scores={LABEL: values},
        aggregates={LABEL: float(values.mean())},
        counts={LABEL: (n, 0)},
        diagnostics=Diagnostics(),
        provenance={"slotwise": "simulation"},
    )


def engine_compare(a: np.ndarray, b: np.ndarray, resamples: int) -> Comparison:
    """``compare()`` itself on the two systems."""
    return compare({"baseline": results(a), "later": results(b)}, alpha=ALPHA, resamples=resamples)


def pair_row(a: np.ndarray, b: np.ndarray, resamples: int) -> PairRow:
    """The row ``compare()`` builds for one metric of two systems, built as it builds it
    (without the movers, which the gate does not read); compare() re-reads the entry points
    of every metric plugin on each call, which would be most of the time here."""
    outcome = paired_test(
        a, b, test="randomization", resamples=resamples, ci_resamples=DEFAULT_RESAMPLES,
        level=0.95, seed=DEFAULT_SEED,
    )  # fmt: skip
    delta = b - a
    p = outcome.p if outcome.n else math.nan
    p_holm = float(holm([p])[0])
    return PairRow(
        label=LABEL,
        higher_is_better=True,
        a="baseline",
        b="later",
        n=outcome.n,
        dropped=0,
        mean_a=outcome.mean_a,
        mean_b=outcome.mean_b,
        difference=outcome.difference,
        ci=outcome.ci,
        dz=outcome.dz,
        statistic=outcome.statistic,
        p=p,
        p_holm=p_holm,
        significant=bool(p_holm < ALPHA) and outcome.difference != 0,
        movers=(),
        sd=float(delta.std(ddof=1)) if delta.size > 1 else None,
        varied=int(np.count_nonzero(delta)),
    )


class Comparer:
    """Comparisons of one size: the first through ``compare()``, checked against the row
    built here; the rest with the row built here in a copy of the first comparison."""

    def __init__(self, resamples: int) -> None:
        self.resamples = resamples
        self.template: Comparison | None = None

    def __call__(self, a: np.ndarray, b: np.ndarray) -> Comparison:
        row = pair_row(a, b, self.resamples)
        if self.template is None:
            self.template = engine_compare(a, b, self.resamples)
            built = attrs.evolve(self.template.rows[0], movers=())
            if built != row:
                raise AssertionError(f"the row differs from compare()'s:\n{row}\n{built}")
        return attrs.evolve(self.template, rows=(row,))


def outcome_of(comparison: Comparison, margin: float, report: Any = None) -> tuple[str, str]:
    """(deciding outcome, advisory outcome or '') of the gate on ``comparison``."""
    found = gate(comparison, max_drop=margin, ppi=None if report is None else {"later": report})
    (verdict,) = found.verdicts
    advisory = found.advisory[0].outcome if found.advisory else ""
    return verdict.outcome, advisory


def ppi_report(d: np.ndarray, judged: np.ndarray, labelled: np.ndarray) -> ppi.Report:
    """The paired PPI report as ``Evaluation.ppi(..., baseline=...)`` makes it: human-label
    differences where labelled (NaN elsewhere), the judge's on every query."""
    human = {LABEL: np.where(labelled, d, np.nan)}
    found = ppi.estimate_metrics(human, {LABEL: judged}, labelled, level=0.95)
    return ppi.Report(tuple(found), 0.95, paired=True)


# -- the cells ---------------------------------------------------------------------------


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([59, *key]))


def gate_cell(task: tuple[int, int, float, int, int]) -> tuple[int, int, dict[str, Any]]:
    """Verdict counts, per margin, of ``replicates`` comparisons of ``n`` queries with the
    true mean change of shift ``mu``."""
    index, n, mu, replicates, resamples = task
    rng = _rng(0, index)
    a, b, _ = draw(rng, mu, (replicates, n))
    comparer = Comparer(resamples)
    counts = {m: dict.fromkeys(OUTCOMES, 0) for m in MARGINS}
    for r in range(replicates):
        comparison = comparer(a[r], b[r])
        for margin in MARGINS:
            counts[margin][outcome_of(comparison, margin)[0]] += 1
    return index, n, counts


def ppi_cell(
    task: tuple[int, int, float, int, int, float, float, tuple[int, ...]],
) -> tuple[int, dict[str, Any]]:
    """Per margin and labelled n, PPI's verdict counts, and the judge-only test's."""
    index, big_n, mu, replicates, resamples, bias, noise, sizes = task
    rng = _rng(1, index)
    comparer = Comparer(resamples)
    counts: dict[Any, dict[str, int]] = {}
    for _ in range(replicates):
        a, b, touched = draw(rng, mu, (big_n,))
        d = b - a
        error = np.where(touched, bias / P_TOUCHED + rng.normal(0.0, noise, big_n), 0.0)
        judged = d + error
        comparison = comparer(a, a + judged)  # the judge's values: their difference is judged
        order = rng.permutation(big_n)
        for margin in MARGINS:
            for size in sizes:
                labelled = np.zeros(big_n, dtype=np.bool_)
                labelled[order[:size]] = True
                decided, advisory = outcome_of(comparison, margin, ppi_report(d, judged, labelled))
                counts.setdefault((margin, size), dict.fromkeys(OUTCOMES, 0))[decided] += 1
            cell = counts.setdefault((margin, "judge"), dict.fromkeys(OUTCOMES, 0))
            cell[advisory] += 1
    return index, counts


def run(tasks: Sequence[Any], fn: Any, workers: int) -> list[Any]:
    """``fn`` over ``tasks``, largest first, in ``workers`` processes (1: here)."""
    if workers <= 1:
        return [fn(t) for t in tasks]
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")  # a process per core, not a process per thread
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return list(pool.imap_unordered(fn, tasks))


# -- the report --------------------------------------------------------------------------


def _shares(counts: dict[str, int]) -> tuple[float, float, float]:
    total = sum(counts.values())
    held, regressed, cant = (counts[o] / total for o in OUTCOMES)
    return held, regressed, cant


def _cell(counts: dict[str, int], wrong: str) -> str:
    """'held / regressed / can't tell' in percent; the wrong one bold when beyond the
    target."""
    parts = []
    for outcome, share in zip(OUTCOMES, _shares(counts), strict=True):
        text = f"{100 * share:.1f}"
        parts.append(f"**{text}**" if outcome == wrong and share > TARGET else text)
    return " / ".join(parts)


class Targets:
    """The worst cell of each target, and every cell beyond it."""

    def __init__(self) -> None:
        self.worst: dict[str, tuple[float, str]] = {}
        self.beyond: dict[str, list[str]] = {HELD: [], REGRESSED: []}

    def add(self, wrong: str, counts: dict[str, int], where: str) -> None:
        total = sum(counts.values())
        share = counts[wrong] / total
        if share > self.worst.get(wrong, (-1.0, ""))[0]:
            self.worst[wrong] = (share, where)
        if share > TARGET:
            se = math.sqrt(share * (1 - share) / total)
            self.beyond[wrong].append(f"{where}: {100 * share:.1f}% (s.e. {100 * se:.1f})")

    def lines(self, what: str) -> list[str]:
        found = []
        for wrong, name in ((HELD, "false HELD"), (REGRESSED, "false REGRESSED")):
            if wrong not in self.worst:
                continue
            share, where = self.worst[wrong]
            beyond = self.beyond[wrong]
            verdict = "met" if not beyond else f"NOT MET in {len(beyond)} cell(s)"
            found.append(
                f"- {what}: {name} <= {TARGET:.0%}: {verdict}; worst {100 * share:.1f}% "
                f"({where})" + ("" if not beyond else "; beyond: " + "; ".join(beyond))
            )
        return found


def gate_tables(
    found: dict[tuple[int, int], dict[str, Any]], sizes: Iterable[int], targets: Targets
) -> list[str]:
    lines = []
    for margin in MARGINS:
        names = [f"{name} ({multiple * margin:+g})" for name, multiple, _ in CHANGES]
        lines += [
            f"**margin {margin:g}** (cells: % held / regressed / can't tell; bold: a wrong "
            f"verdict beyond {TARGET:.0%})",
            "",
            "| n | " + " | ".join(names) + " |",
            "|---:|" + "---:|" * len(names),
        ]
        for n in sizes:
            cells = []
            for (name, _, wrong), index in zip(CHANGES, _change_indices(margin), strict=True):
                counts = found[(index, n)][margin]
                cells.append(_cell(counts, wrong))
                targets.add(wrong, counts, f"n={n}, margin {margin:g}, {name}")
            lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _distinct_changes() -> list[float]:
    """Every true change simulated (no change once)."""
    found: list[float] = []
    for margin in MARGINS:
        for _, multiple, _ in CHANGES:
            value = round(multiple * margin, 10)
            if value not in found:
                found.append(value)
    return found


def _change_indices(margin: float) -> list[int]:
    changes = _distinct_changes()
    return [changes.index(round(multiple * margin, 10)) for _, multiple, _ in CHANGES]


def ppi_tables(
    found: dict[tuple[int, int], dict[Any, dict[str, int]]],
    sizes: Sequence[int],
    big_n: int,
    targets: Targets,
    judge_targets: Targets,
) -> list[str]:
    lines = []
    for margin in MARGINS:
        names = [f"{name} ({multiple * margin:+g})" for name, multiple, _ in CHANGES]
        lines += [
            f"**margin {margin:g}** (PPI's verdict; the judge alone: the paired test on the "
            f"judge's labels of all {big_n:,} queries, the gate's advisory line)",
            "",
            "| judge | labelled | " + " | ".join(names) + " |",
            "|:---|---:|" + "---:|" * len(names),
        ]
        for j, (judge, _, _) in enumerate(JUDGES):
            for size in (*sizes, "judge"):
                cells = []
                for (name, _, wrong), index in zip(CHANGES, _change_indices(margin), strict=True):
                    counts = found[(j, index)][(margin, size)]
                    cells.append(_cell(counts, wrong))
                    where = f"{judge}, margin {margin:g}, {name}"
                    if size == "judge":
                        judge_targets.add(wrong, counts, f"judge alone: {where}")
                    else:
                        targets.add(wrong, counts, f"{size} labelled: {where}")
                who = "judge alone" if size == "judge" else f"{size:,}"
                lines.append(f"| {judge} | {who} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000, help="per cell of the gate")
    parser.add_argument("--ppi-replicates", type=int, default=500, help="per cell of PPI")
    parser.add_argument("--resamples", type=int, default=2000, help="randomization test's")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", choices=("gate", "ppi"), help="one part of the two")
    parser.add_argument("--quick", action="store_true", help="small sizes, a few replicates")
    args = parser.parse_args(argv)
    sizes, labelled, big_n = SIZES, LABELLED, POPULATION
    if args.quick:
        sizes, labelled, big_n = (5, 6, 20, 100), (20, MIN_PPI_LABELLED), 200
        args.replicates, args.ppi_replicates = min(args.replicates, 20), min(args.ppi_replicates, 5)
    started = time.perf_counter()
    changes = _distinct_changes()
    shifts = [solve_mu(change) for change in changes]
    check = _rng(2, 0)
    print(
        f"{args.replicates} replicates per gate cell, {args.ppi_replicates} per PPI cell "
        f"(seeded); randomization test with {args.resamples:,} resamples (the engine's "
        f"default: 10,000), percentile bootstrap interval with {DEFAULT_RESAMPLES:,} "
        f"(the default); alpha {ALPHA:g}, min_pairs {min_pairs(ALPHA)}; one metric "
        "(Holm over a family of one)\n"
    )
    print("| true mean change | shift mu | mean of 10^6 draws | share of queries changed |")
    print("|---:|---:|---:|---:|")
    for change, mu in zip(changes, shifts, strict=True):
        a, b, _ = draw(check, mu, (10**6 if not args.quick else 10**4,))
        print(
            f"| {change:+g} | {mu:+.5f} | {float((b - a).mean()):+.5f} | "
            f"{float(np.mean(b != a)):.3f} |"
        )
    print()

    targets, ppi_targets, judge_targets = Targets(), Targets(), Targets()
    if args.only != "ppi":
        gate_part(args, shifts, sizes, targets)
    if args.only != "gate":
        ppi_part(args, shifts, labelled, big_n, ppi_targets, judge_targets)
    print("### The targets\n")
    print("\n".join(targets.lines("the paired test")))
    print("\n".join(ppi_targets.lines("PPI")))
    print("\n".join(judge_targets.lines("the judge alone (advisory, not a target)")))
    print(f"\n{time.perf_counter() - started:.0f} s")


def gate_part(args: Any, shifts: Sequence[float], sizes: Sequence[int], targets: Targets) -> None:
    tasks = [
        (i, n, mu, args.replicates, args.resamples)
        for n in sorted(sizes, reverse=True)
        for i, mu in enumerate(shifts)
    ]
    found = {(i, n): counts for i, n, counts in run(tasks, gate_cell, args.workers)}
    print(f"### The paired test's gate, {args.replicates} replicates per cell\n")
    print("\n".join(gate_tables(found, sizes, targets)))


def ppi_part(
    args: Any,
    shifts: Sequence[float],
    labelled: Sequence[int],
    big_n: int,
    ppi_targets: Targets,
    judge_targets: Targets,
) -> None:
    ppi_tasks = [
        (j * len(shifts) + i, big_n, mu, args.ppi_replicates, args.resamples, bias, noise, labelled)
        for j, (_, bias, noise) in enumerate(JUDGES)
        for i, mu in enumerate(shifts)
    ]
    ppi_found = {}
    for index, counts in run(ppi_tasks, ppi_cell, args.workers):
        ppi_found[divmod(index, len(shifts))] = counts
    print(f"### PPI's gate: N = {big_n:,} queries, {args.ppi_replicates} replicates per cell\n")
    print("\n".join(ppi_tables(ppi_found, labelled, big_n, ppi_targets, judge_targets)))


if __name__ == "__main__":
    main()
