"""The regression gate's verdicts: for each later system against the baseline, per metric
and overall, *regressed*, *held* or *can't tell*, and why.

- **held**: the data show the system did not get worse by more than a margin: the lower
  end of the paired interval of the change (in the metric's good direction) lies above
  ``-margin`` (a non-inferiority decision; :data:`FAMILY_MARGINS` gives each metric
  family's default margin), on at least :data:`MIN_HELD_PAIRS` pairs.
- **regressed**: not held, and significantly worse (the paired test after Holm's
  correction at alpha; with a PPI report, its interval wholly on the worse side of 0); or
  failing on more samples than the baseline (unless allowed).
- **can't tell**: everything else, with the reason: too few pairs for the test to reach
  alpha at all, an interval wider than the margin (with the minimum detectable effect at
  this n and about how many queries would resolve it), too few labels under the numbers
  (judged@k below a level, or differing between the systems), ids that match no label,
  ids that turned over (under a tenth as many known to the labels as the baseline's: a
  re-chunk renamed the passages; ``slotwise relabel`` fixes it), a PPI interval of zero
  width or on too few human-labelled samples.

With a paired PPI report for a system (human labels on a sample, an LLM judge's on every
sample), its interval makes that system's verdict; the paired test on the judge's labels
is shown beside it as advisory, and is marked as unable to decide alone when the judge's
agreement with the human sample is below :data:`MIN_AGREEMENT`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any, Literal

import attrs

from engine.analysis.compare import Comparison, Judged, PairRow
from engine.analysis.defaults import (
    EXIT_CANT_TELL,
    FAMILY_MARGINS,
    MAX_JUDGED_GAP,
    MIN_AGREEMENT,
    MIN_HELD_PAIRS,
    MIN_JUDGED,
    MIN_PPI_LABELLED,
)
from engine.errors import InputError, Problem
from engine.evaluation.results import MIN_KNOWN_IDS, Diagnostics

__all__ = [
    "CANT_TELL",
    "EXIT_CODES",
    "HELD",
    "REGRESSED",
    "Gate",
    "Outcome",
    "Verdict",
    "gate",
    "margin_of",
    "min_pairs",
    "rule",
    "turned_over",
]

#: A system's ids turned over (:func:`turned_over`) when the share of its top-k documents
#: known to the labels is below this fraction of the baseline's share. Low on purpose: a
#: regressed system that retrieves unjudged documents of the same corpus keeps more of its
#: ids known than this, and must still read as regressed.
TURNOVER_SHARE = 0.1

Outcome = Literal["regressed", "held", "can't tell"]
REGRESSED: Outcome = "regressed"
HELD: Outcome = "held"
CANT_TELL: Outcome = "can't tell"
#: The exit status of each outcome (``slotwise compare --fail-on-regression``).
EXIT_CODES: Mapping[Outcome, int] = {HELD: 0, REGRESSED: 1, CANT_TELL: EXIT_CANT_TELL}
_SEVERITY = {HELD: 0, CANT_TELL: 1, REGRESSED: 2}
_POWER = 0.8  # the minimum detectable effect is the one the test finds 80% of the time
_EPS = 1e-12

ALLOW_FAILURES = "allow_failures=True (CLI: --allow-failures)"


def rule(alpha: float, level: float) -> str:
    """The gate's rule, in words."""
    return (
        f"held: the {level:.0%} interval of the change lies above -margin; regressed: "
        f"significantly worse (Holm, alpha={alpha:g}; with PPI, its interval below 0) and not "
        "held, or more failed samples; can't tell: anything else, with the reason"
    )


def min_pairs(alpha: float) -> int:
    """The fewest pairs with which an exact paired sign-flip test can reach ``alpha``: its
    smallest two-sided p with ``n`` pairs is ``2 / 2**n``."""
    return max(2, math.ceil(1 - math.log2(alpha) - _EPS))


def margin_of(label: str, family: str, max_drop: float | Mapping[str, float] | None) -> float:
    """The margin of ``label``: ``max_drop`` (one amount, or per label), else its family's
    default."""
    if isinstance(max_drop, Mapping):
        if label in max_drop:
            return float(max_drop[label])
    elif max_drop is not None:
        return float(max_drop)
    return FAMILY_MARGINS.get(family, FAMILY_MARGINS["other"])


@attrs.frozen
class Verdict:
    """One outcome: of a metric (``metric``), or of what a system's numbers stand on
    (``metric`` None: labels, ids), for ``system`` against ``baseline``, decided ``by`` the
    paired test, PPI, the labels or the ids."""

    system: str
    baseline: str
    outcome: Outcome
    reason: str
    by: str
    metric: str | None = None
    change: float | None = None  # the mean change, system - baseline (NaN-free)
    interval: tuple[float, float] | None = None
    margin: float | None = None
    n: int | None = None
    mde: float | None = None  # the minimum detectable effect at this n
    needed: int | None = None  # about how many pairs would resolve a can't tell

    def line(self) -> str:
        """The verdict in one line: what, the outcome, the change with its interval, by
        what, why (and, when it decided, the smallest change the test detects)."""
        if self.metric is None:
            return f"{self.by}: {self.outcome.upper()}: {self.reason}"
        change = "" if self.change is None else f" {self.change:+.4f}"
        if self.change is not None and self.interval is not None:
            change += f" [{self.interval[0]:+.4f}, {self.interval[1]:+.4f}]"
        detects = (
            f"; detects changes >= {self.mde:.4f} at n={self.n}"
            if self.mde is not None and self.outcome != CANT_TELL
            else ""
        )
        return f"{self.metric}: {self.outcome.upper()}{change} ({self.by}): {self.reason}{detects}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "baseline": self.baseline,
            "metric": self.metric,
            "outcome": self.outcome,
            "by": self.by,
            "reason": self.reason,
            "change": self.change,
            "ci": None if self.interval is None else list(self.interval),
            "margin": self.margin,
            "n": self.n,
            "mde": self.mde,
            "needed": self.needed,
        }


@attrs.frozen
class Gate:
    """Every verdict of a comparison against its baseline: ``verdicts`` decide,
    ``advisory`` are shown beside them (the judge-only test where PPI decides)."""

    baseline: str
    verdicts: tuple[Verdict, ...]
    advisory: tuple[Verdict, ...]
    rule: str
    notes: tuple[str, ...] = ()

    @property
    def outcome(self) -> Outcome:
        """The worst outcome of any verdict (regressed, then can't tell); held when every
        verdict held (can't tell when there is none)."""
        return max((v.outcome for v in self.verdicts), key=_SEVERITY.__getitem__, default=CANT_TELL)

    def exit_code(self, allow_inconclusive: bool = False) -> int:
        """1 regressed, 0 held, :data:`EXIT_CANT_TELL` can't tell (0 with
        ``allow_inconclusive``)."""
        if self.outcome == CANT_TELL and allow_inconclusive:
            return 0
        return EXIT_CODES[self.outcome]

    def of(self, outcome: Outcome) -> list[Verdict]:
        return [v for v in self.verdicts if v.outcome == outcome]

    def lines(self, held: bool = True) -> list[str]:
        """The gate as the console prints it: the overall outcome, each verdict that is not
        held first, the held ones after (unless ``held`` is False), the advisory ones and
        the notes."""
        counts = ", ".join(
            f"{len(self.of(o))} {o}" for o in (REGRESSED, CANT_TELL, HELD) if self.of(o)
        )
        systems = sorted({v.system for v in self.verdicts}, key=str)
        lines = [
            f"verdict: {self.outcome.upper()} ({', '.join(systems) or 'no system'} against "
            f"{self.baseline}; {counts or 'nothing to decide'})",
        ]
        several = len(systems) > 1
        ordered = sorted(self.verdicts, key=lambda v: -_SEVERITY[v.outcome])
        for verdict in ordered if held else [v for v in ordered if v.outcome != HELD]:
            who = f"{verdict.system}: " if several else ""
            lines.append(f"  {who}{verdict.line()}")
        if self.advisory:
            lines.append("  advisory (shown, not deciding):")
            lines += [f"    {v.system + ': ' if several else ''}{v.line()}" for v in self.advisory]
        lines += [f"  {note}" for note in self.notes]
        lines.append(f"  rule: {self.rule}")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "baseline": self.baseline,
            "rule": self.rule,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "advisory": [v.to_dict() for v in self.advisory],
            "notes": list(self.notes),
        }


# -- deciding ----------------------------------------------------------------------------


def _good(row: PairRow, value: float) -> float:
    """A change as an improvement (positive: better)."""
    return value if row.higher_is_better else -value


def _mde(sd: float | None, n: int, alpha: float) -> float | None:
    """The smallest true change the paired test finds 80% of the time at ``n`` pairs."""
    if sd is None or not n or not math.isfinite(sd) or sd == 0:
        return None  # no spread: the test detects nothing but a constant shift
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(_POWER)
    return z * sd / math.sqrt(n)


def _beyond(n: int, estimate: float) -> int | None:
    """``estimate`` pairs, when more than the ``n`` there are (else None: the estimate
    cannot say how many more would do)."""
    return math.ceil(estimate) if math.isfinite(estimate) and estimate > n else None


def _test_needed(
    row: PairRow, change: float, margin: float, alpha: float, tests: int, level: float
) -> int | None:
    """About how many pairs would resolve a can't tell, at the observed change and spread
    (normal approximation): to hold, an interval at ``level`` above ``-margin``;
    to regress, a drop significant at ``alpha / tests`` (Holm's strictest step), with at
    least :func:`min_pairs` pairs that differ at the observed share that do."""
    if row.sd is None or row.sd == 0:
        return None
    if change > -margin:
        z = NormalDist().inv_cdf(1 - (1 - level) / 2)
        return _beyond(row.n, (z * row.sd / (change + margin)) ** 2)
    z = NormalDist().inv_cdf(1 - alpha / (2 * max(tests, 1)))
    pairs = (z * row.sd / change) ** 2
    if row.varied:
        pairs = max(pairs, row.n * min_pairs(alpha / max(tests, 1)) / row.varied)
    return _beyond(row.n, pairs)


def _ppi_needed(n: int, low: float, high: float, change: float, margin: float) -> int | None:
    """About how many human-labelled samples would resolve a PPI interval that reaches
    below ``-margin`` and above 0 (its half-width shrinks as 1/sqrt(n)): held when the
    change lies above ``-margin``, else regressed (clear of 0)."""
    room = change + margin if change > -margin else -change
    if room <= _EPS:
        return None
    return _beyond(n, n * ((high - low) / 2 / room) ** 2)


def _failure_verdict(row: PairRow, allow_failures: bool) -> Verdict | None:
    """Regressed when the later system failed on more samples than the baseline: a failed
    sample is NA and left out of the pairs, so it could not lower the mean."""
    if row.failed_b <= row.failed_a or allow_failures:
        return None
    return Verdict(
        system=row.b,
        baseline=row.a,
        metric=row.label,
        by="failures",
        outcome=REGRESSED,
        n=row.n,
        reason=(
            f"{row.b} failed on {row.failed_b} sample(s), {row.a} on {row.failed_a} (error "
            f"rows or the metric failing; left out of the n={row.n} pairs); pass "
            f"{ALLOW_FAILURES} to allow more failures"
        ),
    )


def _test_verdict(
    row: PairRow, margin: float, alpha: float, floor: int, tests: int, level: float
) -> Verdict:
    """The paired test's verdict on one row (the later system ``row.b`` against ``row.a``)."""
    change = _good(row, row.difference)
    common = Verdict(
        system=row.b,
        baseline=row.a,
        outcome=CANT_TELL,
        reason="",
        by="paired test",
        metric=row.label,
        change=None if math.isnan(row.difference) else row.difference,
        interval=row.ci,
        margin=margin,
        n=row.n,
        mde=_mde(row.sd, row.n, alpha),
    )
    if row.n < floor:
        smallest = 2.0 ** (1 - row.n) if row.n else 1.0
        return attrs.evolve(
            common,
            needed=floor,
            reason=(
                f"too few pairs: with n={row.n} the smallest p an exact paired test can reach "
                f"is {smallest:.3g} > alpha={alpha:g}, whatever the data; at least {floor} "
                "pairs are needed"
            ),
        )
    low = min(_good(row, bound) for bound in row.ci) if row.ci else change
    worse = row.significant and change < 0
    if low >= -margin - _EPS and row.n < MIN_HELD_PAIRS:
        return attrs.evolve(
            common,
            needed=MIN_HELD_PAIRS,
            reason=(
                f"the interval lies above -{margin:g}, but with n={row.n} pairs (fewer than "
                f"{MIN_HELD_PAIRS}) an interval this narrow is too often [0, 0] whatever the "
                f"true drop; at least {MIN_HELD_PAIRS} pairs are needed to hold"
            ),
        )
    if low >= -margin - _EPS:
        note = " (significantly lower, by less than the margin)" if worse else ""
        return attrs.evolve(
            common, outcome=HELD, reason=f"the interval lies above -{margin:g}{note}"
        )
    if worse:
        return attrs.evolve(
            common,
            outcome=REGRESSED,
            reason=f"significantly worse: p (Holm) = {_p(row.p_holm)} < {alpha:g}",
        )
    needed = _test_needed(row, change, margin, alpha, tests, level)
    smallest = 2.0 ** (1 - row.varied) if row.varied else 1.0
    why = (
        f"only {row.varied} of the {row.n} pairs differ: the test's smallest p is "
        f"{smallest:.3g} > alpha={alpha:g}; "
        if smallest > alpha
        else ""
    )
    detects = (
        f"; the test detects changes >= {common.mde:.4f} at n={row.n}"
        if common.mde is not None
        else ""
    )
    return attrs.evolve(
        common,
        needed=needed,
        reason=(
            f"{why}the interval reaches below -{margin:g} and the drop is not significant "
            f"(p (Holm) = {_p(row.p_holm)}){detects}"
            + (
                f"; about {needed:,} pairs ({needed - row.n:,} more) would resolve it"
                if needed
                else ""
            )
        ),
    )


def _ppi_verdict(
    metric: Any, system: str, baseline: str, higher_is_better: bool, margin: float
) -> Verdict:
    """The verdict of one metric's paired PPI estimate (``system - baseline``)."""
    estimate = metric.ppi
    sign = 1.0 if higher_is_better else -1.0
    low, high = sorted((sign * estimate.low, sign * estimate.high))
    change = sign * estimate.mean
    common = Verdict(
        system=system,
        baseline=baseline,
        outcome=CANT_TELL,
        reason="",
        by="PPI",
        metric=metric.label,
        change=float(estimate.mean),
        interval=(float(estimate.low), float(estimate.high)),
        margin=margin,
        n=estimate.n,
    )
    if estimate.n < MIN_PPI_LABELLED:
        return attrs.evolve(
            common,
            needed=MIN_PPI_LABELLED,
            reason=(
                f"only {estimate.n} human-labelled samples: too few to estimate the judge's "
                f"error (the rectifier); label at least {MIN_PPI_LABELLED}"
            ),
        )
    if high - low <= _EPS:
        return attrs.evolve(
            common,
            reason=(
                f"the PPI interval has zero width: the {estimate.n} human-labelled differences "
                "are all equal, which shows no spread to estimate; label more samples (where "
                "the systems' rankings differ)"
            ),
        )
    if low >= -margin - _EPS:
        return attrs.evolve(common, outcome=HELD, reason=f"the PPI interval lies above -{margin:g}")
    if high < 0:
        return attrs.evolve(
            common,
            outcome=REGRESSED,
            reason="the PPI interval lies wholly on the worse side of 0",
        )
    needed = _ppi_needed(estimate.n, low, high, change, margin)
    return attrs.evolve(
        common,
        needed=needed,
        reason=(
            f"the PPI interval reaches below -{margin:g} and above 0"
            + (
                f"; about {needed:,} human-labelled samples ({needed - estimate.n:,} more) "
                "would resolve it"
                if needed
                else ""
            )
        ),
    )


def _labels_verdicts(
    comparison: Comparison,
    system: str,
    baseline: str,
    min_judged: float | None,
    max_gap: float | None,
) -> list[Verdict]:
    """What the numbers of ``system`` against ``baseline`` stand on: ids that match no
    label, judged@k below ``min_judged``, judged@k differing by more than ``max_gap``."""

    def cant_tell(by: str, reason: str) -> Verdict:
        return Verdict(system=system, baseline=baseline, outcome=CANT_TELL, by=by, reason=reason)

    found = []
    before = {j.k: j for j in comparison.judged.get(baseline, ())}
    after = {j.k: j for j in comparison.judged.get(system, ())}
    turned = turned_over(before, after, baseline, comparison.dataset_name)
    for name, judged in ((baseline, before), (system, after)):
        unknown = _unknown_ids(judged)
        if unknown is not None or (name == system and turned is not None):
            why = "; ".join(filter(None, (unknown, turned if name == system else None)))
            found.append(cant_tell("ids", f"{name}: {why}"))
            continue
        low = [j for j in judged.values() if min_judged is not None and _below(j, min_judged)]
        if low:
            found.append(
                cant_tell(
                    "labels",
                    f"{name}: judged@{low[0].k} {low[0]} < {min_judged:g}: its unjudged documents "
                    "count as non-relevant, so its numbers read low for want of labels; label "
                    "them (slotwise annotate --task relevance --runs ... --holes), or, if your "
                    "labels are sparse by design (unjudged means non-relevant, as in MS MARCO's "
                    "qrels), pass --allow-unjudged (Python: min_judged=None, max_judged_gap=None)",
                )
            )
    if max_gap is not None and not any(v.by == "ids" for v in found):
        for k in sorted(set(before) & set(after)):
            a, b = before[k].share, after[k].share
            if a is None or b is None or abs(b - a) <= max_gap + _EPS:
                continue
            found.append(
                cant_tell(
                    "labels",
                    f"judged@{k}: {system} {after[k]} against {baseline} {before[k]}, "
                    f"{abs(b - a):.3f} apart > {max_gap:g}: the less judged system's numbers read "
                    "low for want of labels, so the comparison favours the other; label both "
                    "alike (slotwise annotate ... --holes), pass a larger --max-judged-gap, or "
                    "--allow-unjudged for labels sparse by design",
                )
            )
            break
    return found


def _below(judged: Judged, level: float) -> bool:
    return judged.share is not None and judged.share < level - _EPS


def turned_over(
    before: Mapping[int, Judged],
    after: Mapping[int, Judged],
    baseline: str,
    dataset: str | None = None,
) -> str | None:
    """Why a system's ids turned over, or None: at the shallowest cutoff both counted,
    the share of its top-k documents known to the labels is below :data:`TURNOVER_SHARE`
    of the ``baseline``'s, whose own ids matched labels (at least
    :data:`~engine.evaluation.results.MIN_KNOWN_IDS`): the passages were most likely
    renamed (a new chunker, a re-index), which is no regression; ``slotwise relabel``
    carries the labels over (docs/relabelling.md)."""
    common = sorted(set(before) & set(after))
    if not common:
        return None
    a, b = before[common[0]], after[common[0]]
    if a.share is None or b.share is None or a.share < MIN_KNOWN_IDS:
        return None
    if b.share >= TURNOVER_SHARE * a.share:
        return None
    return (
        f"the ids turned over, not regressed: {b.judged:,} of {b.documents:,} documents in "
        f"its top {b.k} are known to the labels ({b.share:.1%}), under "
        f"{TURNOVER_SHARE:.0%} of {baseline}'s "
        f"{a.judged:,} of {a.documents:,} ({a.share:.1%}): if the passages were renamed "
        "(a new chunker or index), carry the labels to the new chunks by text overlap, with no "
        f"judge call: slotwise relabel {dataset or 'DATASET'} --documents DOCUMENTS.jsonl "
        "--chunks NEW_CHUNKS.jsonl --passages OLD_CHUNKS.jsonl --output RELABELLED.yaml "
        "(docs/relabelling.md), and compare on it; if they kept their ids, label the new "
        "system's documents (slotwise annotate ... --holes)"
    )


def _unknown_ids(judged: Mapping[int, Judged]) -> str | None:
    """Why a system's ids match nothing (:meth:`Diagnostics.unknown_ids`), or None."""
    counts = {k: (j.judged, j.documents) for k, j in judged.items()}
    return Diagnostics(judged=counts).unknown_ids()


def gate(
    comparison: Comparison,
    *,
    baseline: str | None = None,
    max_drop: float | Mapping[str, float] | None = None,
    allow_failures: bool = False,
    min_judged: float | None = MIN_JUDGED,
    max_judged_gap: float | None = MAX_JUDGED_GAP,
    ppi: Mapping[str, Any] | None = None,
    agreement: Any = None,
) -> Gate:
    """Each later system's verdicts against ``baseline`` (default: the first system).

    ``max_drop`` is the margin: one amount, or per metric label (the others: their
    family's default, :data:`FAMILY_MARGINS`). ``min_judged`` (None: not checked) is the
    least judged@k each system needs, ``max_judged_gap`` the most two systems' judged@k
    may differ by. ``ppi`` maps a system to its paired PPI report against the baseline
    (:meth:`Evaluation.ppi` with ``baseline``): its interval decides that system's
    metrics, the test on the judge's labels becomes advisory. ``agreement`` (a
    :class:`~engine.analysis.agreement.JudgeAgreement`) is the judge's agreement with
    the human sample: below :data:`MIN_AGREEMENT`, the advisory test says it cannot decide
    alone."""
    baseline = baseline or comparison.systems[0]
    if baseline not in comparison.systems:
        raise ValueError(f"no system {baseline!r} in the comparison: {comparison.systems}")
    if isinstance(max_drop, Mapping):
        labels = {row.label for row in comparison.rows}
        unknown = [label for label in max_drop if label not in labels]
        if unknown:
            raise InputError(
                [Problem(f"a margin for {label!r}, which is not compared") for label in unknown],
                summary=f"unknown metric labels in max_drop (compared: {', '.join(sorted(labels))})",
            )
    ppi = dict(ppi or {})
    floor = min_pairs(comparison.alpha)
    tests = sum(not math.isnan(r.p) for r in comparison.rows)  # Holm's family
    verdicts: list[Verdict] = []
    advisory: list[Verdict] = []
    for system in comparison.systems:
        if system == baseline:
            continue
        standing = _labels_verdicts(comparison, system, baseline, min_judged, max_judged_gap)
        verdicts += standing
        rows = [r for r in comparison.rows if (r.a, r.b) == (baseline, system)]
        failed = [f for f in (_failure_verdict(r, allow_failures) for r in rows) if f]
        verdicts += failed
        tested = [
            _test_verdict(
                r,
                _margin(comparison, r.label, max_drop),
                comparison.alpha,
                floor,
                tests,
                comparison.level,
            )
            for r in rows
            if r.label not in {f.metric for f in failed}
        ]
        report = ppi.get(system)
        if any(v.by == "ids" for v in standing):
            advisory += tested
        elif report is None:
            verdicts += tested
        else:
            direction = {r.label: r.higher_is_better for r in rows}
            verdicts += [
                _ppi_verdict(
                    m,
                    system,
                    baseline,
                    direction.get(m.label, True),
                    _margin(comparison, m.label, max_drop),
                )
                for m in report.metrics
            ]
            advisory += [_judge_only(v, agreement) for v in tested]
    notes = () if agreement is None else (agreement.line(),)
    return Gate(
        baseline, tuple(verdicts), tuple(advisory), rule(comparison.alpha, comparison.level), notes
    )


def _margin(
    comparison: Comparison, label: str, max_drop: float | Mapping[str, float] | None
) -> float:
    return margin_of(label, comparison.families.get(label, "other"), max_drop)


def _judge_only(verdict: Verdict, agreement: Any) -> Verdict:
    """The paired test on the judge's labels, as advice beside PPI's verdict."""
    if agreement is None or agreement.sufficient:
        return attrs.evolve(verdict, by="paired test on the judge's labels")
    return attrs.evolve(
        verdict,
        by="paired test on the judge's labels",
        reason=(
            f"{verdict.reason}; but the judge cannot decide alone: its agreement with the human "
            f"sample, {agreement.describe()}, is below {MIN_AGREEMENT:g}; the PPI verdict "
            "stands: to gate on the judge alone, use a judge that agrees with your labellers "
            "(another model or prompt, checked with --ppi on a human sample)"
        ),
    )


def _p(value: float) -> str:
    return "NA" if math.isnan(value) else ("<0.0001" if value < 0.0001 else f"{value:.4f}")
