"""Results of an evaluation: per-sample scores, summaries with confidence intervals,
diagnostics and provenance, and their JSON (``schemas/results.schema.json``), CSV,
Parquet and console forms. A streamed evaluation returns the same type without the
per-sample scores (they went to its sink)."""

from __future__ import annotations

import collections
import html
import io
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from engine.errors import InputError, MissingDependencyError, Problem, SlotwiseError
from engine.evaluation.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED, Bootstrap
from engine.evaluation.tables import html_table, render_text, text_table
from engine.io import schemas
from engine.io.documents import RESULTS_SCHEMA_ID, canonical_json
from engine.io.files import read_document
from engine.io.sinks import RowChunk, Sink
from engine.io.writer import atomic_write

__all__ = [
    "MIN_KNOWN_IDS",
    "Diagnostics",
    "MetricRecord",
    "Results",
    "created_at",
    "document_header",
    "read_results",
]

FloatArray = npt.NDArray[np.float64]
Interval = tuple[float, float] | None

#: Below this share of its top-k documents known to the labels, a system's ids match
#: nothing: its numbers are flagged, and the gate gives it no verdict.
MIN_KNOWN_IDS = 0.01


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
    metric_errors: Mapping[str, str] = attrs.field(factory=dict)  # label -> why it raised
    #: per cutoff k: (documents in the samples' top k that are judged, documents in them),
    #: over the samples that have an output and did not fail
    judged: Mapping[int, tuple[int, int]] = attrs.field(factory=dict)

    def unknown_ids(self) -> str | None:
        """Why the system's ids match almost no label, or None: of the documents in its
        top k at the shallowest cutoff counted, fewer than :data:`MIN_KNOWN_IDS` have a
        label (another id field, vector-store uuids, documents without ids)."""
        if not self.judged:
            return None
        k = min(self.judged)
        judged, slots = self.judged[k]
        if not slots or judged / slots >= MIN_KNOWN_IDS:
            return None
        return (
            f"the retrieved ids match almost no label: {judged:,} of {slots:,} documents in the "
            f"top {k} are known to the labels (< {MIN_KNOWN_IDS:.0%}); check which field holds "
            "the document id (an outputs file's ids; a framework retriever's: "
            "Dataset.run(..., id_key=...)); vector-store uuids and documents without ids match "
            "nothing: these numbers say nothing of the system"
        )

    def judged_at(self, k: int) -> float | None:
        """judged@k: the share of the documents in the top k that have a label (None when
        not counted, or when no top k holds a document)."""
        judged, slots = self.judged.get(k, (0, 0))
        return judged / slots if slots else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "missing_outputs": list(self.missing_outputs),
            "duplicate_ids_dropped": self.duplicate_ids_dropped,
            "no_relevant": list(self.no_relevant),
            "unknown_output_ids": list(self.unknown_output_ids),
            "errors": [{"id": i, "error": e} for i, e in self.errors.items()],
            "metric_errors": [{"metric": m, "error": e} for m, e in self.metric_errors.items()],
            "judged": [
                {"k": k, "judged": judged, "documents": slots}
                for k, (judged, slots) in sorted(self.judged.items())
            ],
            "unknown_ids": self.unknown_ids(),
        }

    def lines(self) -> list[str]:
        """The diagnostics as sentences for the console."""
        found = []
        unknown = self.unknown_ids()
        if unknown is not None:
            found.append(f"WARNING: {unknown}")
        if self.missing_outputs:
            found.append(
                f"{len(self.missing_outputs)} sample(s) had no output and were scored as empty "
                f"rankings (missing='empty'): {few(self.missing_outputs)}"
            )
        if self.duplicate_ids_dropped:
            found.append(
                f"{self.duplicate_ids_dropped} duplicate retrieved id(s) dropped (first occurrence kept)"
            )
        if self.no_relevant:
            found.append(
                f"{len(self.no_relevant)} sample(s) have no relevant document: {few(self.no_relevant)}"
            )
        if self.unknown_output_ids:
            found.append(
                f"{len(self.unknown_output_ids)} output(s) for ids not in the dataset were ignored: "
                f"{few(self.unknown_output_ids)}"
            )
        if self.errors:
            found.append(
                f"{len(self.errors)} sample(s) failed and are NA: {few(list(self.errors))}"
            )
            reasons = collections.Counter(self.errors.values()).most_common()
            for reason, count in reasons[:3]:
                found.append(f"  {count} x {_clipped(reason)}")
            if len(reasons) > 3:
                found.append(f"  ... {len(reasons) - 3} other reason(s): see diagnostics.errors")
        for label, reason in self.metric_errors.items():
            found.append(f"metric {label} FAILED and is NA: {reason}")
        return found


def few(ids: Sequence[str], count: int = 5) -> str:
    """The first ``count`` ids, and how many more there are."""
    shown = ", ".join(ids[:count])
    return shown + (f", ... ({len(ids) - count} more)" if len(ids) > count else "")


def _clipped(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def created_at(when: datetime | str | None = None) -> str:
    """``provenance.created``: ``when`` (a datetime, or ISO 8601 text as given), else the
    time ``SOURCE_DATE_EPOCH`` (seconds since 1970) names, else now; in UTC, to the
    second. Pinning it makes two runs' results documents identical (snapshot tests). A
    value that names no time is an :class:`InputError` saying what it should be."""
    if isinstance(when, str):
        try:
            datetime.fromisoformat(when)
        except ValueError:
            raise _not_a_time("created", when, "ISO 8601 text") from None
        return when
    if when is None:
        when = _source_date_epoch() or datetime.now(UTC)
    if not isinstance(when, datetime):
        raise _not_a_time("created", when, "a datetime or ISO 8601 text")
    return when.astimezone(UTC).isoformat(timespec="seconds")


def _source_date_epoch() -> datetime | None:
    """The time ``SOURCE_DATE_EPOCH`` names (whole seconds since 1970, as ``date +%s``
    prints them; the reproducible-builds convention), None when it is unset or empty."""
    text = os.environ.get("SOURCE_DATE_EPOCH")
    if not text:
        return None
    if re.fullmatch(r"-?[0-9]+", text):
        try:
            return datetime.fromtimestamp(int(text), UTC)
        except (OverflowError, OSError, ValueError):
            pass  # a number of seconds beyond the years a datetime holds
    raise _not_a_time("SOURCE_DATE_EPOCH", text, "whole seconds since 1970, as `date +%s` prints")


def _not_a_time(name: str, value: object, wanted: str) -> InputError:
    problem = Problem(f"must be {wanted}, got {value!r}", source=name)
    return InputError([problem], summary="cannot date the results")


def document_header(
    name: str | None, digest: str, samples: int, metrics: Sequence[MetricRecord]
) -> dict[str, Any]:
    """The leading keys of a results document."""
    return {
        "schema": RESULTS_SCHEMA_ID,
        "dataset": {"name": name, "hash": digest, "samples": samples},
        "metrics": [attrs.asdict(m) for m in metrics],
    }


@attrs.define(eq=False, repr=False)
class Results:
    """Per-metric summaries and, unless streamed, per-sample scores (NaN = NA) keyed by
    metric label, in dataset order. ``print(results)`` shows the summary table;
    ``repr(results)`` is one line."""

    dataset_name: str | None
    _digest: str | Callable[[], str] = attrs.field(alias="dataset_hash")
    ids: pa.Array
    metrics: Sequence[MetricRecord]
    aggregates: Mapping[str, float]
    counts: Mapping[str, tuple[int, int]]
    diagnostics: Diagnostics
    provenance: Mapping[str, Any]
    scores: Mapping[str, FloatArray] | None = None
    details: Mapping[str, Sequence[Any]] = attrs.field(factory=dict)
    reports: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    outputs: Mapping[str, Any] | None = None
    metadata: pa.Array | None = None  # per sample, canonical JSON text (or null)
    intervals: Mapping[str, Interval] | None = None  # the default CIs, once computed
    samples: int | None = None  # how many samples were scored (default: len(ids))
    failures: Mapping[str, int] | None = None  # per label, samples NA from a failure

    @property
    def failed(self) -> bool:
        """Whether anything failed: a system call (an error row) or a metric."""
        return bool(self.diagnostics.errors or self.diagnostics.metric_errors)

    def errors(self, label: str) -> int:
        """How many samples of ``label`` are NA because something failed: the system's
        call (an error row) or the metric itself."""
        if self.failures is not None and label in self.failures:
            return self.failures[label]
        if label in self.diagnostics.metric_errors:
            return self.counts[label][1]
        if self.scores is not None:
            failed = set(self.diagnostics.errors)
            return sum(i in failed for i in self.sample_ids)
        return len(self.diagnostics.errors)

    def failed_samples(self, label: str) -> npt.NDArray[np.bool_]:
        """Per sample, whether its ``label`` value is NA because something failed."""
        values = self.values(label)
        if label in self.diagnostics.metric_errors:
            return np.isnan(values)
        failed = set(self.diagnostics.errors)
        return np.fromiter((i in failed for i in self.sample_ids), np.bool_, len(values))

    @property
    def dataset_hash(self) -> str:
        """The content hash of the dataset (computed on first use)."""
        if callable(self._digest):
            self._digest = self._digest()
        return self._digest

    @property
    def labels(self) -> list[str]:
        return [m.label for m in self.metrics]

    @cached_property
    def sample_ids(self) -> list[str]:
        return self.ids.to_pylist()  # type: ignore[no-any-return]

    def values(self, label: str) -> FloatArray:
        """The per-sample values of one metric label (NaN = NA)."""
        return self._scores()[label]

    def _scores(self) -> Mapping[str, FloatArray]:
        if self.scores is None:
            raise ValueError(
                "these results were streamed: their per-sample scores went to the sink, "
                "not into memory"
            )
        return self.scores

    def summary(
        self, *, level: float = 0.95, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
    ) -> dict[str, dict[str, Any]]:
        """Per metric label: ``mean`` (the metric's aggregate; None if all NA), ``n``,
        ``na``, ``errors`` (how many of the NA are failures: error rows, or the metric
        itself raising), ``error_rate`` (errors / samples scored), ``error`` (why the
        metric failed, only when it did) and ``ci``, the percentile Poisson bootstrap
        interval of the mean of the non-NA values (``[lo, hi]``; None when n < 2), seeded
        (see :mod:`engine.evaluation.statistics`); and ``missing_outputs``, only when
        samples without an output were scored as empty rankings (``missing="empty"``):
        how many; and ``unknown_ids``, only when the retrieved ids match almost no label
        (:meth:`Diagnostics.unknown_ids`): why these numbers say nothing of the system."""
        intervals = self._intervals(level, resamples, seed)
        unknown = self.diagnostics.unknown_ids()
        found: dict[str, dict[str, Any]] = {}
        for label in self.labels:
            n, na = self.counts[label]
            errors = self.errors(label)
            found[label] = {
                "mean": _number(self.aggregates[label]),
                "n": n,
                "na": na,
                "errors": errors,
                "error_rate": errors / (n + na) if n + na else None,
                "ci": None if intervals[label] is None else list(intervals[label]),  # type: ignore[arg-type]
            }
            if label in self.diagnostics.metric_errors:
                found[label]["error"] = self.diagnostics.metric_errors[label]
            if self.diagnostics.missing_outputs:
                found[label]["missing_outputs"] = len(self.diagnostics.missing_outputs)
            if unknown is not None:
                found[label]["unknown_ids"] = unknown
        return found

    def _intervals(self, level: float, resamples: int, seed: int) -> Mapping[str, Interval]:
        default = (level, resamples, seed) == (0.95, DEFAULT_RESAMPLES, DEFAULT_SEED)
        if default and self.intervals is not None:
            return self.intervals
        scores = self._scores()
        bootstrap = Bootstrap(len(self.labels), resamples=resamples, seed=seed)
        if self.labels:
            bootstrap.add(np.column_stack([scores[label] for label in self.labels]))
        found = dict(zip(self.labels, bootstrap.intervals(level), strict=True))
        if default:
            self.intervals = found
        return found

    def by(self, key: str, **options: Any) -> Any:
        """Per-stratum n, mean and bootstrap CI of every metric, strata being the values of
        ``metadata[key]`` (samples without it: ``"(none)"``); see
        :mod:`engine.evaluation.strata`."""
        from engine.evaluation.strata import by

        return by(self, key, **options)

    def metadata_of(self) -> list[dict[str, Any]]:
        """Each sample's metadata (empty when it has none)."""
        if self.metadata is None:
            return [{} for _ in range(len(self.ids))]
        return [{} if text is None else json.loads(text) for text in self.metadata.to_pylist()]

    def rows(self) -> RowChunk:
        """The per-sample rows, as the sinks write them."""
        return RowChunk(
            self.ids,
            {label: self._scores()[label] for label in self.labels},
            dict(self.details),
            dict(self.diagnostics.errors),
            self.metadata,
        )

    def per_sample(self) -> list[dict[str, Any]]:
        """One record per sample: ``{"id", "scores": {label: value or None}}`` (plus
        ``details``, ``error`` and ``metadata`` where there are any)."""
        return [orjson.loads(row) for row in self.rows().json_rows().to_pylist()]

    def header(self) -> dict[str, Any]:
        count = len(self.ids) if self.samples is None else self.samples
        return document_header(self.dataset_name, self.dataset_hash, count, self.metrics)

    def trailer(self) -> dict[str, Any]:
        """The keys of the results document after its samples."""
        document: dict[str, Any] = {
            "summary": self.summary(),
            "diagnostics": self.diagnostics.to_dict(),
            "provenance": dict(self.provenance),
        }
        if self.reports:
            document["reports"] = {label: dict(report) for label, report in self.reports.items()}
        if self.outputs is not None:
            document["outputs"] = dict(self.outputs)
        return document

    def write(self, fmt: str, path: str | os.PathLike[str] | None = None) -> bytes:
        """The results as ``json``, ``jsonl``, ``csv`` or ``parquet`` (as the sinks write them), also written to ``path``
        atomically when given."""
        buffer = io.BytesIO()
        sink = Sink(buffer, fmt)
        trailer = self.trailer()  # its CIs first: the header's dataset hash may be on its way
        sink.start(self.header())
        if self.scores is not None:
            sink.write(self.rows())
        sink.finish(trailer, self.labels)
        if path is not None:
            atomic_write(path, buffer.getvalue())
        return buffer.getvalue()

    def to_dict(self) -> dict[str, Any]:
        """The ``slotwise.results/v1`` document."""
        return orjson.loads(self.write("json", None))  # type: ignore[no-any-return]

    def to_json(
        self, path: str | os.PathLike[str] | None = None, *, created: datetime | str | None = None
    ) -> str:
        """The results document as JSON text (written atomically to ``path`` when given);
        streamed results have no per-sample rows here. ``created`` replaces
        ``provenance.created`` (a datetime, or ISO text); ``SOURCE_DATE_EPOCH`` pins it
        when the results are made. Either way two runs give the same document."""
        results = self
        if created is not None:
            pinned = {**self.provenance, "created": created_at(created)}
            results = attrs.evolve(self, provenance=pinned)
        return results.write("json", path).decode()

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """One row per sample, one column per metric label (empty cell = NA)."""
        self._scores()
        return self.write("csv", path).decode()

    def to_parquet(self, path: str | os.PathLike[str]) -> None:
        """Per-sample scores as Parquet: ``id`` and one float column per label."""
        self._scores()
        self.write("parquet", path)

    def to_arrow(self) -> pa.Table:
        """Per-sample scores as an Arrow table: ``id`` (the sample id, as in
        :meth:`per_sample`, CSV and JSONL) + one column per label."""
        return self.rows().table("id")

    def to_pandas(self) -> Any:
        """Per-sample scores as a pandas DataFrame (``id`` + one column per label;
        NaN = NA); needs pandas (``pip install 'slotwise[columnar]'``)."""
        try:
            import pandas  # noqa: F401
        except ImportError as error:
            raise MissingDependencyError("Results.to_pandas", "columnar", error) from error
        return self.to_arrow().to_pandas()

    def to_polars(self) -> Any:
        """Per-sample scores as a polars DataFrame (``id`` + one column per label;
        null = NA); needs polars."""
        try:
            import polars
        except ImportError as error:
            raise MissingDependencyError("Results.to_polars", "columnar", error) from error
        return polars.from_arrow(self.to_arrow())

    def report_lines(self) -> list[str]:
        """The metrics' run-level reports as indented text lines for the console: nested
        mappings one key per line, a mapping of scalars or a list of scalars on one line,
        a list of mappings one item per line (``key=value``; NA for None)."""
        lines = []
        for label, report in self.reports.items():
            lines.append(f"{label}:")
            lines += _report_lines(report, "  ")
        return lines

    def _summary_rows(self, exclude: Sequence[str] = ()) -> list[list[str]]:
        """The summary as text cells: metric, mean, 95% CI, n, na, errors (with the rate)."""
        rows = []
        for label, stats in self.summary().items():
            if label in exclude:
                continue
            mean = "NA" if stats["mean"] is None else f"{stats['mean']:.4f}"
            if "error" in stats:
                mean = "FAILED"
            ci = "-" if stats["ci"] is None else f"[{stats['ci'][0]:.4f}, {stats['ci'][1]:.4f}]"
            errors = (
                "0" if not stats["errors"] else f"{stats['errors']} ({stats['error_rate']:.1%})"
            )
            rows.append([label, mean, ci, str(stats["n"]), str(stats["na"]), errors])
        return rows

    def _title(self) -> str:
        count = len(self.ids) if self.samples is None else self.samples
        partial = self.provenance.get("partial")
        if partial:
            return (
                f"{self.dataset_name or 'dataset'} (PARTIAL: {partial['samples_scored']} of "
                f"{partial['samples_in_dataset']} samples)"
            )
        return f"{self.dataset_name or 'dataset'} ({count} samples)"

    def na_notes(self, exclude: Sequence[str] = ()) -> list[str]:
        """A sentence for each metric that is NA on every sample, saying why: every
        sample failed, or what the metric documents it is NA for."""
        notes = []
        for record in self.metrics:
            n, na = self.counts[record.label]
            if record.label in exclude or n or not na:
                continue
            if self.diagnostics.errors and len(self.diagnostics.errors) >= na:
                why = "every sample failed (see the errors)"
            else:
                why = _documented_na(record.alias)
            notes.append(f"{record.label} is NA on every sample; {why}")
        return notes

    def table(self, exclude: Sequence[str] = ()) -> Any:
        """The summary (leaving out the ``exclude`` labels) as a rich Table, which
        ``print()`` and the REPL show as text; a metric NA on every sample is explained
        in a note under it. ``print(results)`` adds the other :meth:`notes`."""
        table = text_table(self.na_notes(exclude), title=self._title(), title_justify="left")
        for index, column in enumerate(_SUMMARY_COLUMNS):
            table.add_column(column, justify="left" if index == 0 else "right")
        for row in self._summary_rows(exclude):
            table.add_row(*row)
        return table

    def notes(self) -> list[str]:
        """What ``slotwise run`` prints under its tables: each metric NA on every sample
        and why, the diagnostics (failed samples and why, samples without output, dropped
        duplicates, ...) and the metrics' run-level reports (label sources and unjudged
        slots, the diagnosis, ...)."""
        return [*self.na_notes(), *self.diagnostics.lines(), *self.report_lines()]

    def __str__(self) -> str:
        """The summary table with every note ``slotwise run`` prints under it."""
        table = self.table()
        table.notes = tuple(self.notes())
        return render_text(table)

    def __repr__(self) -> str:
        means = ", ".join(
            f"{label}={'NA' if math.isnan(value) else f'{value:.4f}'}"
            for label, value in list(self.aggregates.items())[:3]
        )
        more = f", ... ({len(self.labels) - 3} more)" if len(self.labels) > 3 else ""
        count = len(self.ids) if self.samples is None else self.samples
        return f"<Results {self.dataset_name or 'dataset'}: {count} samples; {means}{more}>"

    def _repr_html_(self) -> str:
        """The summary as an HTML table, for notebooks."""
        notes = "\n".join(self.notes())
        shown = f"<pre>{html.escape(notes)}</pre>" if notes else ""
        return html_table(self._title(), _SUMMARY_COLUMNS, self._summary_rows()) + shown


_SUMMARY_COLUMNS = ("metric", "mean", "95% CI", "n", "na", "errors")


def _documented_na(alias: str) -> str:
    """When the metric's docstring says it is NA ("NA when ..."), else a general hint."""
    from engine.evaluation.registry import Registry

    try:
        doc = " ".join((Registry().get(alias).__doc__ or "").split())
    except SlotwiseError:  # an uninstalled or broken plugin: no docs to quote
        doc = ""
    found = re.search(r"\bNA (?:when|for|if|unless) [^.;]*", doc)
    if found:
        return f"it is {found.group(0)} (from its documentation)"
    return "no sample had what it needs (see its entry in docs/metrics.md)"


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


# -- reading results files -------------------------------------------------------------------


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)


def results_from_dict(document: Mapping[str, Any], source: str | None = None) -> Results:
    """Results from a ``slotwise.results/v1`` document (validated against its schema)."""
    problems = list(schemas.problems(document, "results", source=source))
    if not problems and document.get("schema") != RESULTS_SCHEMA_ID:
        problems.append(Problem(f"not a {RESULTS_SCHEMA_ID} document", source=source))
    if problems:
        raise InputError(problems, summary=f"invalid results{f' {source}' if source else ''}")
    records = [MetricRecord(**m) for m in document["metrics"]]
    samples = document["samples"]
    scores = {
        r.label: np.array([_nan(s["scores"].get(r.label)) for s in samples], dtype=np.float64)
        for r in records
    }
    summary = document["summary"]
    aggregates, counts, intervals, failures = {}, {}, {}, {}
    for r in records:
        values = scores[r.label]
        present = values[~np.isnan(values)]
        stats = summary.get(r.label, {})
        aggregates[r.label] = (
            _nan(stats.get("mean"))
            if r.label in summary
            else (math.fsum(present.tolist()) / present.size if present.size else math.nan)
        )
        counts[r.label] = (
            int(stats.get("n", present.size)),
            int(stats.get("na", values.size - present.size)),
        )
        ci = stats.get("ci")
        intervals[r.label] = None if ci is None else (float(ci[0]), float(ci[1]))
        if "errors" in stats:
            failures[r.label] = int(stats["errors"])
    raw = document["diagnostics"]
    diagnostics = Diagnostics(
        missing_outputs=tuple(raw.get("missing_outputs", ())),
        duplicate_ids_dropped=int(raw.get("duplicate_ids_dropped", 0)),
        no_relevant=tuple(raw.get("no_relevant", ())),
        unknown_output_ids=tuple(raw.get("unknown_output_ids", ())),
        errors={e["id"]: e["error"] for e in raw.get("errors", ())},
        metric_errors={e["metric"]: e["error"] for e in raw.get("metric_errors", ())},
        judged={
            int(j["k"]): (int(j["judged"]), int(j["documents"])) for j in raw.get("judged", ())
        },
    )
    details = {
        r.label: [s.get("details", {}).get(r.label) for s in samples]
        for r in records
        if any(r.label in s.get("details", {}) for s in samples)
    }
    metadata = [canonical_json(s["metadata"]) if s.get("metadata") else None for s in samples]
    return Results(
        dataset_name=document["dataset"]["name"],
        dataset_hash=document["dataset"]["hash"],
        ids=pa.array([s["id"] for s in samples], pa.string()),
        metrics=records,
        aggregates=aggregates,
        counts=counts,
        diagnostics=diagnostics,
        provenance=dict(document["provenance"]),
        scores=scores,
        details=details,
        reports=dict(document.get("reports") or {}),
        outputs=document.get("outputs"),
        metadata=pa.array(metadata, pa.string()) if any(m is not None for m in metadata) else None,
        intervals=intervals,
        failures=failures or None,
    )


def read_results(path: str | os.PathLike[str]) -> Results:
    """Results from a results JSON file written by ``results.to_json`` or ``slotwise run
    --format json``."""
    return results_from_dict(read_document(Path(path)), source=str(path))
