"""Paired comparison of systems scored on the same dataset: a significance test per metric
and pair of systems, Holm-Bonferroni correction over all of them, effect sizes (mean
difference with its bootstrap CI, Cohen's d_z) and the samples that moved most. The
regression gate that reads a comparison is :mod:`engine.analysis.verdict`.

Pairing policy: samples are matched by id; a metric's test uses the samples present in
both results with neither value NA, and reports that count as ``n`` (and how many were
left out as ``dropped``, split by why: a failure on either side, another NA, or an id in
one results only). Means in a comparison are over those pairs.

Failures are never dropped silently: each row carries how many samples failed in each
system (error rows, or the metric raising).

What the numbers stand on is part of a comparison: each system's judged@k (the share of
the documents in its top k that have a label) is carried beside the rows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from engine.analysis.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    DEFAULT_TEST_RESAMPLES,
    TESTS,
    Test,
    holm,
    paired_test,
)
from engine.errors import InputError, Problem
from engine.evaluation.results import Results
from engine.evaluation.tables import html_table, render_text, text_table

__all__ = [
    "COMPARISON_SCHEMA_ID",
    "Comparison",
    "Judged",
    "Mover",
    "PairRow",
    "compare",
    "rescore",
]

COMPARISON_SCHEMA_ID = "slotwise.comparison/v1"
PAIRING = (
    "samples matched by id; pairs where either value is NA are left out (counted by why: "
    "failed, NA, unpaired)"
)


# -- the comparison --------------------------------------------------------------------


@attrs.frozen
class Mover:
    """A sample whose score changed: its id, both scores and ``b - a``."""

    id: str
    a: float
    b: float
    difference: float


@attrs.frozen
class PairRow:
    """One metric, one pair of systems (``b`` against ``a``; differences are ``b - a``)."""

    label: str
    higher_is_better: bool
    a: str
    b: str
    n: int
    dropped: int
    mean_a: float
    mean_b: float
    difference: float
    ci: tuple[float, float] | None
    dz: float | None
    statistic: float
    p: float
    p_holm: float
    significant: bool
    movers: tuple[Mover, ...]
    failed_a: int = 0  # samples of ``a`` NA because something failed (error rows, the metric)
    failed_b: int = 0
    dropped_failed: int = 0  # pairs left out because either side failed
    dropped_na: int = 0  # ... because either side is NA for another reason
    dropped_unpaired: int = 0  # ids in one of the two results only
    sd: float | None = None  # the standard deviation of the differences (ddof=1)
    varied: int = 0  # pairs whose difference is not 0

    @property
    def dropped_reasons(self) -> str:
        """Why ``dropped`` pairs were left out, in words."""
        parts = [
            (self.dropped_failed, "failed on either side"),
            (self.dropped_na, "NA on either side"),
            (self.dropped_unpaired, "in one results only"),
        ]
        return ", ".join(f"{count} {why}" for count, why in parts if count)

    @property
    def improvement(self) -> float:
        """The difference in the metric's good direction (positive: ``b`` is better)."""
        return self.difference if self.higher_is_better else -self.difference

    @property
    def verdict(self) -> str:
        if not self.significant:
            return "no significant difference"
        return "better" if self.improvement > 0 else "worse"

    @property
    def mark(self) -> str:
        """▲ significantly better, ▼ significantly worse, empty otherwise."""
        if not self.significant or self.improvement == 0:
            return ""
        return "▲" if self.improvement > 0 else "▼"


@attrs.frozen
class Judged:
    """judged@k of a system: of the ``documents`` in its samples' top k, ``judged`` have a
    label (samples with an output that did not fail)."""

    k: int
    judged: int
    documents: int

    @property
    def share(self) -> float | None:
        return self.judged / self.documents if self.documents else None

    def __str__(self) -> str:
        share = "NA" if self.share is None else f"{self.share:.3f}"
        return f"{share} ({self.documents - self.judged:,} of {self.documents:,} unjudged)"


def _clean(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _num(value: float | None, digits: int = 4) -> str:
    if value is None or math.isnan(value):
        return "NA"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}f}"


def _signed(value: float | None, digits: int = 4) -> str:
    return "NA" if value is None or math.isnan(value) else f"{value:+.{digits}f}"


def _pvalue(p: float) -> str:
    if math.isnan(p):
        return "NA"
    return "<0.0001" if p < 0.0001 else f"{p:.4f}"


def _ci(ci: Sequence[float] | None, digits: int = 4) -> str:
    return "-" if ci is None else f"[{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


@attrs.frozen
class Comparison:
    """Paired comparisons of every metric for every pair of systems (``b`` after ``a`` in
    the order given), Holm-corrected over all of them together."""

    systems: tuple[str, ...]
    dataset_name: str | None
    dataset_hash: str
    test: Test
    alpha: float
    level: float
    resamples: int
    seed: int
    rows: tuple[PairRow, ...]
    skipped: tuple[str, ...] = ()
    judged: Mapping[str, tuple[Judged, ...]] = attrs.field(factory=dict)
    """Per system, judged@k at each cutoff its results counted (none: not counted)."""
    families: Mapping[str, str] = attrs.field(factory=dict)
    """Per metric label, its metric's family (``"other"`` when its plugin is not here)."""

    def row(self, label: str, a: str | None = None, b: str | None = None) -> PairRow:
        """The row of ``label`` for systems ``a``, ``b`` (default: the first two)."""
        a = a or self.systems[0]
        b = b or self.systems[1]
        for row in self.rows:
            if (row.label, row.a, row.b) == (label, a, b):
                return row
        raise KeyError(f"no comparison of {label!r} for {a} -> {b}")

    def judged_lines(self) -> list[str]:
        """judged@k of each system, a line per cutoff, for the console."""
        cutoffs = sorted({j.k for found in self.judged.values() for j in found})
        lines = []
        for k in cutoffs:
            shares = [
                f"{system} {j}"
                for system in self.systems
                for j in self.judged.get(system, ())
                if j.k == k
            ]
            lines.append(
                f"judged@{k} (labelled share of the top-{k} documents): " + "; ".join(shares)
            )
        return lines

    # -- renderers -----------------------------------------------------------------------

    def _columns(self) -> list[str]:
        pair = ["systems"] if len(self.systems) > 2 else []
        tail = [f"Δ [{self.level:.0%} CI]", "d_z", "p", "p (Holm)", ""]
        means = ["mean a", "mean b"] if pair else [f"mean {name}" for name in self.systems]
        return ["metric", *pair, *means, *tail]

    def _cells(self, row: PairRow) -> list[str]:
        pair = [f"{row.a} → {row.b}"] if len(self.systems) > 2 else []
        return [
            row.label,
            *pair,
            _num(row.mean_a),
            _num(row.mean_b),
            f"{_signed(row.difference)} {_ci(row.ci)}",
            _signed(row.dz, 2),
            _pvalue(row.p),
            _pvalue(row.p_holm),
            row.mark,
        ]

    def _caption(self) -> str:
        names = (
            f"{self.systems[1]} vs {self.systems[0]} (Δ = {self.systems[1]} - {self.systems[0]})"
            if len(self.systems) == 2
            else f"{', '.join(self.systems)} (Δ = b - a for each pair a → b)"
        )
        test = {
            "randomization": "paired randomization test",
            "bootstrap": "paired bootstrap test",
            "t": "paired t-test",
        }[self.test]
        return (
            f"{self.dataset_name or 'dataset'}: {names}; {test}, Holm-corrected over "
            f"{sum(not math.isnan(r.p) for r in self.rows)} comparisons; "
            f"▲/▼ significantly better/worse at alpha = {self.alpha:g}"
        )

    def notes(self, movers: int = 3) -> list[str]:
        """The lines under the table, as ``slotwise compare`` prints them: labels not
        compared, judged@k, pairs left out and why, and per metric the ``movers`` samples
        that moved most (0: none)."""
        lines = []
        if self.skipped:
            lines.append(f"not in every file, not compared: {', '.join(self.skipped)}")
        lines += self.judged_lines()
        lines += self.dropped_lines()
        moved = self.mover_lines(movers) if movers > 0 else []
        if moved:
            lines += ["moved most (b - a):", *(f"  {line}" for line in moved)]
        return lines

    def table(self) -> Any:
        """The comparison as a rich Table, which ``print()`` and the REPL show as text."""
        table = text_table(title=self._caption(), title_justify="left")
        for index, column in enumerate(self._columns()):
            table.add_column(column, justify="left" if index == 0 else "right", no_wrap=True)
        for row in self.rows:
            cells = self._cells(row)
            style = {"▲": "green", "▼": "red"}.get(row.mark)
            table.add_row(*cells, style=style)
        return table

    def __str__(self) -> str:
        return "\n".join([render_text(self.table()), *self.notes()])

    def __repr__(self) -> str:
        marks = [row.mark for row in self.rows]
        labels = len({row.label for row in self.rows})
        return (
            f"<Comparison {self.dataset_name or 'dataset'}: {' → '.join(self.systems)}; "
            f"{labels} metric(s), {marks.count('▲')} better, {marks.count('▼')} worse at "
            f"alpha = {self.alpha:g} (Holm)>"
        )

    def _repr_html_(self) -> str:
        """The comparison as an HTML table, for notebooks (better rows green, worse red)."""
        colors = [{"▲": "green", "▼": "red"}.get(row.mark) for row in self.rows]
        return html_table(
            self._caption(), self._columns(), [self._cells(r) for r in self.rows], row_colors=colors
        )

    def to_markdown(self) -> str:
        """A GitHub-flavoured Markdown table with a caption line, and a note per metric
        that left pairs out (how many, and why)."""
        columns = self._columns()
        lines = [
            f"_{self._caption()}_",
            "",
            "| " + " | ".join(columns) + " |",
            "|" + "|".join(":---" if i == 0 else "---:" for i in range(len(columns))) + "|",
        ]
        for row in self.rows:
            cells = [c.replace("|", "\\|") for c in self._cells(row)]
            lines.append("| " + " | ".join(cells) + " |")
        dropped = self.dropped_lines()
        if dropped:
            lines += ["", *(f"- {line}" for line in dropped)]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        """A booktabs ``table`` environment; significant rows marked with arrows."""
        columns = self._columns()
        marks = {"▲": r"$\blacktriangle$", "▼": r"$\blacktriangledown$", "": ""}
        header = [_latex(c).replace("Δ", r"$\Delta$") for c in columns]
        lines = [
            r"\begin{table}[t]",
            r"\centering",
            r"\begin{tabular}{l" + "r" * (len(columns) - 1) + "}",
            r"\toprule",
            " & ".join(header) + r" \\",
            r"\midrule",
        ]
        for row in self.rows:
            cells = self._cells(row)
            cells[-1] = marks[row.mark]
            text = [_latex(c).replace("→", r"$\to$") for c in cells[:-1]] + [cells[-1]]
            lines.append(" & ".join(text) + r" \\")
        caption = _latex(self._caption()).replace("▲/▼", r"$\blacktriangle$/$\blacktriangledown$")
        lines += [
            r"\bottomrule",
            r"\end{tabular}",
            rf"\caption{{{caption}}}",
            r"\end{table}",
        ]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """The ``slotwise.comparison/v1`` document (NaN as null)."""
        return {
            "schema": COMPARISON_SCHEMA_ID,
            "dataset": {"name": self.dataset_name, "hash": self.dataset_hash},
            "systems": list(self.systems),
            "test": self.test,
            "correction": "holm",
            "alpha": self.alpha,
            "level": self.level,
            "resamples": self.resamples,
            "seed": self.seed,
            "pairing": PAIRING,
            "skipped_metrics": list(self.skipped),
            "judged": {
                system: [
                    {"k": j.k, "judged": j.judged, "documents": j.documents, "judged_at_k": j.share}
                    for j in found
                ]
                for system, found in self.judged.items()
            },
            "comparisons": [
                {
                    "metric": r.label,
                    "higher_is_better": r.higher_is_better,
                    "a": r.a,
                    "b": r.b,
                    "n": r.n,
                    "dropped": r.dropped,
                    "dropped_because": {
                        "failed": r.dropped_failed,
                        "na": r.dropped_na,
                        "unpaired": r.dropped_unpaired,
                    },
                    "failed_a": r.failed_a,
                    "failed_b": r.failed_b,
                    "mean_a": _clean(r.mean_a),
                    "mean_b": _clean(r.mean_b),
                    "difference": _clean(r.difference),
                    "ci": None if r.ci is None else list(r.ci),
                    "dz": r.dz,
                    "sd": r.sd,
                    "varied": r.varied,
                    "statistic": None
                    if math.isnan(r.statistic) or math.isinf(r.statistic)
                    else r.statistic,
                    "p": _clean(r.p),
                    "p_holm": _clean(r.p_holm),
                    "significant": r.significant,
                    "verdict": r.verdict,
                    "movers": [attrs.asdict(m) for m in r.movers],
                }
                for r in self.rows
            ],
        }

    def dropped_lines(self) -> list[str]:
        """Per row that left pairs out: how many and why, for the console."""
        lines = []
        for row in self.rows:
            if row.dropped:
                pair = f" ({row.a} → {row.b})" if len(self.systems) > 2 else ""
                lines.append(
                    f"{row.label}{pair}: {row.dropped} sample(s) left out: {row.dropped_reasons}"
                )
        return lines

    def mover_lines(self, count: int = 3) -> list[str]:
        """Per row, the samples that moved most (``id +delta``), for the console."""
        lines = []
        for row in self.rows:
            if not row.movers:
                continue
            shown = ", ".join(f"{m.id} {m.difference:+.3f}" for m in row.movers[:count])
            pair = f" ({row.a} → {row.b})" if len(self.systems) > 2 else ""
            lines.append(f"{row.label}{pair}: {shown}")
        return lines


def _check(results: Sequence[Results], names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(labels to compare, labels skipped); raises InputError on different datasets or
    differently configured metrics."""
    problems = []
    first = results[0]
    for name, other in zip(names[1:], results[1:], strict=True):
        if other.dataset_hash != first.dataset_hash:
            problems.append(
                Problem(
                    f"{name} was scored on a different dataset ({other.dataset_name} "
                    f"{other.dataset_hash[:19]}...) than {names[0]} ({first.dataset_name} "
                    f"{first.dataset_hash[:19]}...); paired comparison needs the same samples "
                    "and labels: to compare on the newer labels, re-score the results (they "
                    "keep their outputs with --keep-outputs) with `slotwise compare --dataset "
                    "NEWER ...` (Python: compare(..., dataset=engine.dataset(NEWER)))"
                )
            )
    records = [{m.label: m for m in r.metrics} for r in results]
    common = [label for label in first.labels if all(label in r for r in records)]
    skipped = sorted({label for r in records for label in r} - set(common))
    for label in common:
        reference = records[0][label]
        for name, by_label in zip(names[1:], records[1:], strict=True):
            record = by_label[label]
            if (_set(record.params), record.higher_is_better) != (
                _set(reference.params),
                reference.higher_is_better,
            ):
                problems.append(
                    Problem(
                        f"metric {label!r} was computed with different parameters: "
                        f"{names[0]} {dict(reference.params)}, {name} {dict(record.params)}"
                    )
                )
    if not common and not problems:
        problems.append(
            Problem(
                "the results share no metric label: "
                + "; ".join(
                    f"{n}: {', '.join(r.labels)}" for n, r in zip(names, results, strict=True)
                )
            )
        )
    if problems:
        raise InputError(problems, summary="these results cannot be compared")
    return common, skipped


def rescore(results: Results, dataset: Any, name: str = "the results") -> Results:
    """``results`` scored on ``dataset`` (an :class:`~engine.Dataset`): its metrics on its
    kept outputs, its failed samples still errors; as it is when it was scored on the
    same dataset already. :class:`InputError` when it kept no outputs."""
    if results.dataset_hash == dataset.hash:
        return results
    if results.outputs is None:
        raise InputError(
            [
                Problem(
                    f"{name} kept no outputs to score on {dataset.name or 'the dataset'}: "
                    "score it with `slotwise run ... --keep-outputs` (run() keeps them)"
                )
            ],
            summary="cannot re-score",
        )
    return dataset.with_metrics(results.labels).evaluate(results)  # type: ignore[no-any-return]


def _set(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that are set: one that is None equals one a results file written
    before the parameter existed leaves out."""
    return {name: value for name, value in params.items() if value is not None}


def compare(
    results: Sequence[Results] | Mapping[str, Results],
    *,
    test: Test = "randomization",
    names: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    alpha: float = 0.05,
    level: float = 0.95,
    resamples: int = DEFAULT_TEST_RESAMPLES,
    ci_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    movers: int = 5,
    dataset: Any = None,
) -> Comparison:
    """Compare two or more results of the same dataset, every pair (``b`` against each
    earlier ``a``) on every metric they share (or the given ``metrics`` labels).

    ``test`` is ``"randomization"`` (Fisher's paired sign-flip test, exact for small n),
    ``"bootstrap"`` (paired bootstrap) or ``"t"`` (paired t-test); ``resamples`` drives
    the first two; p-values are Holm-corrected over all metrics x pairs and compared with
    ``alpha``. Each row carries the mean difference with its percentile bootstrap CI
    (``ci_resamples``, ``level``), Cohen's d_z and the ``movers`` samples that moved most.
    Labels present in some results only are listed in ``skipped``. ``dataset`` (an
    :class:`~engine.Dataset`, e.g. with labels added since) re-scores each results' kept
    outputs on it first (:func:`rescore`). The systems are named by ``names``, or by the
    keys of ``results`` given as a mapping ``{name: results}``, else ``system 1``,
    ``system 2``, ... in order.
    """
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose one of {', '.join(TESTS)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if isinstance(results, Mapping):
        if names is not None:
            raise ValueError("names come from the mapping's keys: pass names or a mapping")
        names = list(results)
    results = list(results.values() if isinstance(results, Mapping) else results)
    if len(results) < 2:
        raise ValueError("compare needs at least two results")
    names = list(names) if names is not None else [f"system {i + 1}" for i in range(len(results))]
    if len(names) != len(results) or len(set(names)) != len(names):
        raise ValueError(f"names must be {len(results)} distinct strings, got {names!r}")
    if dataset is not None:
        results = [rescore(r, dataset, name) for r, name in zip(results, names, strict=True)]
    labels, skipped = _check(results, names)
    if metrics is not None:
        unknown = [m for m in metrics if m not in labels]
        if unknown:
            raise InputError(
                [
                    Problem(f"metric {m!r} is not in every results (shared: {', '.join(labels)})")
                    for m in unknown
                ],
                summary="unknown metric labels",
            )
        labels = list(metrics)
    direction = {m.label: m.higher_is_better for m in results[0].metrics}
    raw: list[dict[str, Any]] = []
    for (i, left), (j, right) in itertools.combinations(enumerate(results), 2):
        position = {sample_id: index for index, sample_id in enumerate(right.sample_ids)}
        shared = [(k, position[s]) for k, s in enumerate(left.sample_ids) if s in position]
        ids = np.array([left.sample_ids[k] for k, _ in shared], dtype=object)
        li = np.array([k for k, _ in shared], dtype=np.intp)
        ri = np.array([m for _, m in shared], dtype=np.intp)
        union = len(left.sample_ids) + len(right.sample_ids) - len(shared)
        for label in labels:
            x, y = left.values(label)[li], right.values(label)[ri]
            keep = ~(np.isnan(x) | np.isnan(y))
            failed = left.failed_samples(label)[li] | right.failed_samples(label)[ri]
            outcome = paired_test(
                x[keep],
                y[keep],
                test=test,
                resamples=resamples,
                ci_resamples=ci_resamples,
                level=level,
                seed=seed,
            )
            delta = y[keep] - x[keep]
            sd = float(delta.std(ddof=1)) if delta.size > 1 else None
            order = np.argsort(-np.abs(delta), kind="stable")[:movers]
            kept_ids = ids[keep]
            moved = tuple(
                Mover(
                    id=str(kept_ids[o]),
                    a=float(x[keep][o]),
                    b=float(y[keep][o]),
                    difference=float(delta[o]),
                )
                for o in order
                if delta[o] != 0
            )
            raw.append(
                {
                    "label": label,
                    "higher_is_better": direction[label],
                    "a": names[i],
                    "b": names[j],
                    "n": outcome.n,
                    "dropped": union - outcome.n,
                    "failed_a": left.errors(label),
                    "failed_b": right.errors(label),
                    "dropped_failed": int(failed.sum()),
                    "dropped_na": int((~keep & ~failed).sum()),
                    "dropped_unpaired": union - len(shared),
                    "mean_a": outcome.mean_a,
                    "mean_b": outcome.mean_b,
                    "difference": outcome.difference,
                    "ci": outcome.ci,
                    "dz": outcome.dz,
                    "sd": sd,
                    "varied": int(np.count_nonzero(delta)),
                    "statistic": outcome.statistic,
                    "p": outcome.p if outcome.n else math.nan,
                    "movers": moved,
                }
            )
    adjusted = holm([r["p"] for r in raw])
    rows = tuple(
        PairRow(
            **r,
            p_holm=float(p_holm),
            significant=bool(p_holm < alpha) and r["difference"] != 0,
        )
        for r, p_holm in zip(raw, adjusted, strict=True)
    )
    return Comparison(
        systems=tuple(names),
        dataset_name=results[0].dataset_name,
        dataset_hash=results[0].dataset_hash,
        test=test,
        alpha=alpha,
        level=level,
        resamples=resamples,
        seed=seed,
        rows=rows,
        skipped=tuple(skipped),
        judged={
            name: tuple(Judged(k, *counts) for k, counts in sorted(r.diagnostics.judged.items()))
            for name, r in zip(names, results, strict=True)
        },
        families=_families([m for m in results[0].metrics if m.label in labels]),
    )


def _families(records: Sequence[Any]) -> dict[str, str]:
    """Per metric label, the family its plugin declares ("other" when the plugin is not
    installed here, or fails to load)."""
    from engine.evaluation.registry import Registry

    registry, found = Registry(), {}
    for record in records:
        try:
            found[record.label] = str(getattr(registry.get(record.alias), "family", "other"))
        except Exception:  # missing or broken here: the default margin applies
            found[record.label] = "other"
    return found
