"""Results broken down by stratum (the values of a metadata key): per stratum and metric
the non-NA count, the mean and its percentile Poisson bootstrap confidence interval."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from engine.evaluation.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED, poisson_ci

if TYPE_CHECKING:
    from engine.evaluation.results import Results

__all__ = ["NO_STRATUM", "Breakdown", "StratumRow", "by", "fmt", "fmt_ci", "stratum_of"]

NO_STRATUM = "(none)"


def _mean(values: np.ndarray) -> float | None:
    present = values[~np.isnan(values)]
    return float(present.mean()) if present.size else None


def fmt(value: float | None, digits: int = 4) -> str:
    return "NA" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def fmt_ci(ci: Sequence[float] | None, digits: int = 4) -> str:
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


@attrs.frozen(repr=False)
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

    def __str__(self) -> str:
        """The table (:meth:`table`) as text, as ``print(results)`` prints its summary."""
        from engine.evaluation.tables import render_text

        return render_text(self.table())

    def __repr__(self) -> str:
        counts = ", ".join(f"{stratum}={self.sizes[stratum]}" for stratum in self.strata[:4])
        more = f", ... ({len(self.strata) - 4} more)" if len(self.strata) > 4 else ""
        return f"<Breakdown by {self.key}: {len(self.labels)} metrics; samples {counts}{more}>"

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
                table.add_row(name, r.label, str(r.n), fmt(r.mean), fmt_ci(r.ci))
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
    names = np.array([stratum_of(m, key) for m in results.metadata_of()], dtype=object)
    strata = sorted(set(names), key=lambda s: (s == NO_STRATUM, s))
    scores = results.scores or {}
    rows = []
    sizes = {}
    for stratum in strata:
        mask = names == stratum
        sizes[stratum] = int(mask.sum())
        for label in results.labels:
            values = scores[label][mask]
            na = int(np.isnan(values).sum())
            rows.append(
                StratumRow(
                    stratum=stratum,
                    label=label,
                    n=int(values.size - na),
                    na=na,
                    mean=_mean(values),
                    ci=poisson_ci(values, level=level, resamples=resamples, seed=seed),
                )
            )
    return Breakdown(
        key=key, strata=tuple(strata), sizes=sizes, labels=tuple(results.labels), rows=tuple(rows)
    )
