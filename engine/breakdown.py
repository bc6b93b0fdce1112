"""Breakdowns of results: per stratum (a metadata key) and per cutoff (Metric@K curves).
Every aggregate carries its percentile bootstrap confidence interval."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from engine.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_ci

if TYPE_CHECKING:
    from engine.results import Results

__all__ = ["NO_STRATUM", "Breakdown", "Curve", "CurvePoint", "StratumRow", "by", "curves"]

NO_STRATUM = "(none)"


def _mean(values: np.ndarray) -> float | None:
    present = values[~np.isnan(values)]
    return float(present.mean()) if present.size else None


def _fmt(value: float | None, digits: int = 4) -> str:
    return "NA" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _fmt_ci(ci: Sequence[float] | None, digits: int = 4) -> str:
    return "-" if ci is None else f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def stratum_of(metadata: Mapping[str, Any] | None, key: str) -> str:
    """The stratum name of a sample: its ``metadata[key]`` as text, or ``"(none)"``."""
    if not metadata or metadata.get(key) is None:
        return NO_STRATUM
    value = metadata[key]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@attrs.frozen
class StratumRow:
    """One metric in one stratum: non-NA count, NA count, mean of the non-NA values, CI."""

    stratum: str
    label: str
    n: int
    na: int
    mean: float | None
    ci: tuple[float, float] | None


@attrs.frozen
class Breakdown:
    """Per-stratum aggregates of every metric of some results."""

    key: str
    strata: tuple[str, ...]
    sizes: Mapping[str, int]
    labels: tuple[str, ...]
    rows: tuple[StratumRow, ...]

    def row(self, stratum: str, label: str) -> StratumRow:
        for row in self.rows:
            if row.stratum == stratum and row.label == label:
                return row
        raise KeyError((stratum, label))

    def to_dict(self) -> dict[str, Any]:
        """``{"key", "strata": [{"stratum", "samples", "metrics": {label: {mean, n, na, ci}}}]}``."""
        return {
            "key": self.key,
            "strata": [
                {
                    "stratum": stratum,
                    "samples": self.sizes[stratum],
                    "metrics": {
                        r.label: {
                            "mean": r.mean,
                            "n": r.n,
                            "na": r.na,
                            "ci": None if r.ci is None else list(r.ci),
                        }
                        for r in self.rows
                        if r.stratum == stratum
                    },
                }
                for stratum in self.strata
            ],
        }

    def table(self) -> Any:
        """A rich Table: one row per stratum and metric, with n, mean and 95% CI."""
        from rich.table import Table

        table = Table(title=f"by {self.key}", title_justify="left")
        for column, justify in (
            (self.key, "left"),
            ("metric", "left"),
            ("n", "right"),
            ("mean", "right"),
            ("95% CI", "right"),
        ):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for stratum in self.strata:
            first = True
            for r in (r for r in self.rows if r.stratum == stratum):
                name = f"{stratum} ({self.sizes[stratum]})" if first else ""
                table.add_row(name, r.label, str(r.n), _fmt(r.mean), _fmt_ci(r.ci))
                first = False
            table.add_section()
        return table


def by(
    results: Results,
    key: str,
    *,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Breakdown:
    """Break ``results`` down by ``metadata[key]``: strata sorted by name, ``"(none)"``
    (samples lacking the key) last. The mean is the plain mean of the non-NA values."""
    metadata: Sequence[Mapping[str, Any] | None] = list(results.metadata) or [None] * len(
        results.sample_ids
    )
    names = np.array([stratum_of(m, key) for m in metadata], dtype=object)
    strata = sorted(set(names), key=lambda s: (s == NO_STRATUM, s))
    rows = []
    sizes = {}
    for stratum in strata:
        mask = names == stratum
        sizes[stratum] = int(mask.sum())
        for label in results.labels:
            values = results.scores[label][mask]
            na = int(np.isnan(values).sum())
            rows.append(
                StratumRow(
                    stratum=stratum,
                    label=label,
                    n=int(values.size - na),
                    na=na,
                    mean=_mean(values),
                    ci=bootstrap_ci(values, level=level, resamples=resamples, seed=seed),
                )
            )
    return Breakdown(
        key=key, strata=tuple(strata), sizes=sizes, labels=tuple(results.labels), rows=tuple(rows)
    )


@attrs.frozen
class CurvePoint:
    k: int
    label: str
    mean: float | None
    ci: tuple[float, float] | None


@attrs.frozen
class Curve:
    """One metric (alias and parameters other than k) at several cutoffs, K ascending."""

    name: str
    alias: str
    higher_is_better: bool
    points: tuple[CurvePoint, ...]

    @property
    def ks(self) -> list[int]:
        return [p.k for p in self.points]


def curves(results: Results) -> list[Curve]:
    """The Metric@K curves in ``results``: metrics that differ only in ``k`` and appear at
    two or more cutoffs, in the order of their first label."""
    summary = results.summary()
    groups: dict[tuple[str, str], list[Any]] = {}
    for record in results.metrics:
        k = record.params.get("k")
        if not isinstance(k, int) or isinstance(k, bool):
            continue
        rest = {name: value for name, value in record.params.items() if name != "k"}
        key = (record.alias, json.dumps(rest, sort_keys=True, default=str))
        groups.setdefault(key, []).append((k, record))
    found = []
    for members in groups.values():
        if len({k for k, _ in members}) < 2:
            continue
        members.sort(key=lambda m: m[0])
        first_k, first = members[0]
        name = first.label.replace(f"@{first_k}", "", 1)
        points = tuple(
            CurvePoint(
                k=k,
                label=record.label,
                mean=summary[record.label]["mean"],
                ci=None
                if summary[record.label]["ci"] is None
                else tuple(summary[record.label]["ci"]),
            )
            for k, record in members
        )
        found.append(
            Curve(
                name=name, alias=first.alias, higher_is_better=first.higher_is_better, points=points
            )
        )
    return found


def curve_table(results: Results) -> Any:
    """A rich Table of the curves: one row per metric, one column per K (the mean)."""
    from rich.table import Table

    found = curves(results)
    ks = sorted({k for curve in found for k in curve.ks})
    table = Table(
        title=f"{results.dataset_name or 'dataset'} ({len(results.sample_ids)} samples): metric@K",
        title_justify="left",
    )
    table.add_column("metric")
    for k in ks:
        table.add_column(f"@{k}", justify="right")
    for curve in found:
        means = {p.k: p.mean for p in curve.points}
        table.add_row(curve.name, *(_fmt(means.get(k)) if k in means else "" for k in ks))
    return table


def curve_labels(results: Results) -> set[str]:
    """Labels that belong to some curve."""
    return {p.label for curve in curves(results) for p in curve.points}
