"""Results of an evaluation: per-sample scores, summaries, diagnostics, provenance, and
their JSON (``schemas/results.schema.json``), CSV and console forms."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from engine.fileio import atomic_write
from engine.outputs import RESULTS_SCHEMA_ID

__all__ = ["Diagnostics", "MetricRecord", "Results"]


@attrs.frozen
class MetricRecord:
    """How one metric of the run was configured and where it came from."""

    label: str
    alias: str
    params: Mapping[str, Any]
    higher_is_better: bool
    distribution: str | None
    version: str | None


@attrs.frozen
class Diagnostics:
    """What the engine noticed about the input while scoring."""

    missing_outputs: tuple[str, ...] = ()
    duplicate_ids_dropped: int = 0
    no_relevant: tuple[str, ...] = ()
    unknown_output_ids: tuple[str, ...] = ()
    errors: Mapping[str, str] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "missing_outputs": list(self.missing_outputs),
            "duplicate_ids_dropped": self.duplicate_ids_dropped,
            "no_relevant": list(self.no_relevant),
            "unknown_output_ids": list(self.unknown_output_ids),
            "errors": [{"id": i, "error": e} for i, e in self.errors.items()],
        }


def _number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


@attrs.define(eq=False)
class Results:
    """Per-sample scores (NaN = NA) keyed by metric label, in dataset order."""

    dataset_name: str | None
    dataset_hash: str
    sample_ids: Sequence[str]
    metrics: Sequence[MetricRecord]
    scores: Mapping[str, npt.NDArray[np.float64]]
    aggregates: Mapping[str, float]
    diagnostics: Diagnostics
    provenance: Mapping[str, Any]
    details: Mapping[str, Sequence[Mapping[str, Any] | None]] = attrs.field(factory=dict)
    reports: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    outputs: Mapping[str, Any] | None = None
    metadata: Sequence[Mapping[str, Any]] = ()  # per sample, in dataset order (or empty)

    @property
    def labels(self) -> list[str]:
        return [m.label for m in self.metrics]

    def summary(
        self, *, level: float = 0.95, resamples: int = 1000, seed: int = 0
    ) -> dict[str, dict[str, Any]]:
        """Per metric label: ``mean`` (the metric's aggregate; None if all NA), ``n``, ``na``
        and ``ci``, the percentile bootstrap interval of the mean of the non-NA values
        (``[lo, hi]``; None when n < 2), seeded: see :func:`engine.stats.bootstrap_ci`."""
        from engine.stats import bootstrap_ci

        out = {}
        for label in self.labels:
            values = self.scores[label]
            na = int(np.isnan(values).sum())
            ci = bootstrap_ci(values, level=level, resamples=resamples, seed=seed)
            out[label] = {
                "mean": _number(self.aggregates[label]),
                "n": int(values.size - na),
                "na": na,
                "ci": None if ci is None else list(ci),
            }
        return out

    def by(self, key: str, **options: Any) -> Any:
        """Per-stratum n, mean and bootstrap CI of every metric, strata being the values of
        ``metadata[key]`` (samples without it: ``"(none)"``); see :mod:`engine.breakdown`."""
        from engine.breakdown import by

        return by(self, key, **options)

    def compare(self, *others: Results, **options: Any) -> Any:
        """Paired comparison of these results with others on the same dataset; see
        :func:`engine.compare.compare`."""
        from engine.compare import compare

        return compare([self, *others], **options)

    def per_sample(self) -> list[dict[str, Any]]:
        """One record per sample: ``{"id", "scores": {label: value or None}}`` (plus
        ``details`` and ``error`` where there are any)."""
        columns = {label: self.scores[label].tolist() for label in self.labels}
        rows = []
        for i, sample_id in enumerate(self.sample_ids):
            row: dict[str, Any] = {
                "id": sample_id,
                "scores": {
                    label: None if math.isnan(v[i]) else v[i] for label, v in columns.items()
                },
            }
            details = {label: d[i] for label, d in self.details.items() if d[i] is not None}
            if details:
                row["details"] = details
            if sample_id in self.diagnostics.errors:
                row["error"] = self.diagnostics.errors[sample_id]
            if self.metadata and self.metadata[i]:
                row["metadata"] = dict(self.metadata[i])
            rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        """The ``slotwise.results/v1`` document."""
        document: dict[str, Any] = {
            "schema": RESULTS_SCHEMA_ID,
            "dataset": {
                "name": self.dataset_name,
                "hash": self.dataset_hash,
                "samples": len(self.sample_ids),
            },
            "metrics": [attrs.asdict(m) for m in self.metrics],
            "summary": self.summary(),
            "samples": self.per_sample(),
            "diagnostics": self.diagnostics.to_dict(),
            "provenance": dict(self.provenance),
        }
        if self.reports:
            document["reports"] = {label: dict(report) for label, report in self.reports.items()}
        if self.outputs is not None:
            document["outputs"] = dict(self.outputs)
        return document

    def to_json(self, path: str | os.PathLike[str] | None = None, *, indent: int | None = 2) -> str:
        """The results as JSON; written atomically to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False) + "\n"
        if path is not None:
            atomic_write(path, text)
        return text

    def to_pandas(self) -> Any:
        """Per-sample scores as a DataFrame (``query_id`` + one column per label; needs the
        ``columnar`` extra). Write it with ``engine.columnar.write_frame(frame, path)``."""
        from engine.columnar import results_to_frame

        return results_to_frame(self)

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """One row per sample, one column per metric label (empty cell = NA)."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["id", *self.labels])
        columns = [self.scores[label].tolist() for label in self.labels]
        for i, sample_id in enumerate(self.sample_ids):
            writer.writerow([sample_id, *("" if math.isnan(c[i]) else repr(c[i]) for c in columns)])
        text = buffer.getvalue()
        if path is not None:
            atomic_write(path, text)
        return text

    def report_lines(self) -> list[str]:
        """The metrics' run-level reports as indented text lines for the console: nested
        mappings one key per line, a mapping of scalars or a list of scalars on one line,
        a list of mappings one item per line (``key=value``; NA for None)."""
        lines = []
        for label, report in self.reports.items():
            lines.append(f"{label}:")
            lines += _report_lines(report, "  ")
        return lines

    def table(self) -> Any:
        """A rich Table of the summary, for the console."""
        from rich.table import Table

        title = f"{self.dataset_name or 'dataset'} ({len(self.sample_ids)} samples)"
        table = Table(title=title, title_justify="left")
        for column, justify in (
            ("metric", "left"),
            ("mean", "right"),
            ("95% CI", "right"),
            ("n", "right"),
            ("na", "right"),
        ):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for label, stats in self.summary().items():
            mean = "NA" if stats["mean"] is None else f"{stats['mean']:.4f}"
            ci = "-" if stats["ci"] is None else f"[{stats['ci'][0]:.4f}, {stats['ci'][1]:.4f}]"
            table.add_row(label, mean, ci, str(stats["n"]), str(stats["na"]))
        return table


def _scalar(value: Any) -> str:
    if value is None:
        return "NA"
    if isinstance(value, float):
        return "NA" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _flat(value: Any) -> bool:
    return not isinstance(value, Mapping | list | tuple)


def _report_lines(value: Mapping[str, Any], indent: str) -> list[str]:
    lines = []
    for key, item in value.items():
        if _flat(item):
            lines.append(f"{indent}{key}: {_scalar(item)}")
        elif isinstance(item, Mapping) and all(map(_flat, item.values())):
            inline = " ".join(f"{k}={_scalar(v)}" for k, v in item.items())
            lines.append(f"{indent}{key}: {inline or '-'}")
        elif isinstance(item, Mapping):
            lines.append(f"{indent}{key}:")
            lines += _report_lines(item, indent + "  ")
        elif all(map(_flat, item)):
            lines.append(f"{indent}{key}: {', '.join(map(_scalar, item)) or '-'}")
        else:
            lines.append(f"{indent}{key}:")
            for entry in item:
                if isinstance(entry, Mapping) and all(map(_flat, entry.values())):
                    text = " ".join(f"{k}={_scalar(v)}" for k, v in entry.items())
                else:
                    text = json.dumps(entry, default=str)
                lines.append(f"{indent}  - {text}")
    return lines
