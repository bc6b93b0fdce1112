"""Metric@K curves: metrics that differ only in ``k``, evaluated at several cutoffs, with
the mean and confidence interval at each K."""

from __future__ import annotations

import json
from typing import Any

import attrs

from engine.evaluation.results import Results
from engine.evaluation.strata import fmt

__all__ = ["Curve", "CurvePoint", "curve_labels", "curve_table", "curves"]


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
    """A rich Table of the curves: one row per metric, one column per K (the mean and
    its confidence interval)."""
    from rich.table import Table

    found = curves(results)
    ks = sorted({k for curve in found for k in curve.ks})
    table = Table(
        title=f"{results.dataset_name or 'dataset'} ({len(results.sample_ids)} samples): "
        "metric@K, mean [95% CI]",
        title_justify="left",
    )
    table.add_column("metric")
    for k in ks:
        table.add_column(f"@{k}", justify="right")
    for curve in found:
        points = {p.k: p for p in curve.points}
        table.add_row(curve.name, *(_cell(points[k]) if k in points else "" for k in ks))
    return table


def _cell(point: CurvePoint) -> str:
    """The mean at one K and its 95% CI."""
    if point.ci is None:
        return fmt(point.mean)
    return f"{fmt(point.mean)} [{fmt(point.ci[0])}, {fmt(point.ci[1])}]"


def curve_labels(results: Results) -> set[str]:
    """Labels that belong to some curve."""
    return {p.label for curve in curves(results) for p in curve.points}
