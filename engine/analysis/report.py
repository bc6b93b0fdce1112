"""A self-contained HTML report of one or more results of the same dataset.

One file that opens offline: inline CSS and a little vanilla JS, charts drawn as inline
SVG here (no CDN, no fetch). Sections: summary with bootstrap CIs, Metric@K curves,
per-stratum table, the set-based diagnosis (PROC vs %PROC, when the results hold both),
a paired comparison with significance marks (two or more results), and a per-sample
table that sorts by a click on a header, filters as you type or by problem (retrieval,
selection, regressed) and, given explanations, opens a sample's slots and misses under
its row on a click (the explanations are embedded once, as JSON, and drawn by the JS).
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from engine.analysis.compare import Comparison, compare
from engine.analysis.curves import curve_labels, curves
from engine.analysis.stats import DEFAULT_SEED, DEFAULT_TEST_RESAMPLES, Test
from engine.evaluation.explain import DIAGNOSIS, Explanation, SystemView, labels_at
from engine.evaluation.results import Results
from engine.evaluation.strata import NO_STRATUM, by, stratum_of
from engine.io.files import atomic_write

__all__ = ["build_report", "write_report"]

COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
PROC, PCT_PROC = "proc-at-k", "pct-proc-at-k"
#: Scatter points get a hover tooltip up to this many samples (more would slow the page down).
MAX_TIPS = 2000
#: Rows of the per-sample table drawn at first; a button draws the rest.
MAX_ROWS = 1000


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, digits: int = 4) -> str:
    return "NA" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _color(index: int) -> str:
    return COLORS[index % len(COLORS)]


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = start
    while value <= high + 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


# -- charts (inline SVG) ---------------------------------------------------------------


def _ci_bar(ci: Sequence[float] | None, mean: float | None, low: float, high: float) -> str:
    """A small horizontal interval: the CI as a line, the mean as a dot, on [low, high]."""
    width, height, pad = 120, 14, 4
    if mean is None or high <= low:
        return ""

    def x(v: float) -> float:
        return pad + (v - low) / (high - low) * (width - 2 * pad)

    parts = [
        f'<svg class="cibar" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="confidence interval">'
    ]
    parts.append(f'<line x1="{pad}" x2="{width - pad}" y1="7" y2="7" class="axis"/>')
    if ci is not None:
        parts.append(
            f'<line x1="{x(ci[0]):.1f}" x2="{x(ci[1]):.1f}" y1="7" y2="7" class="ci"/>'
            f'<line x1="{x(ci[0]):.1f}" x2="{x(ci[0]):.1f}" y1="3" y2="11" class="ci"/>'
            f'<line x1="{x(ci[1]):.1f}" x2="{x(ci[1]):.1f}" y1="3" y2="11" class="ci"/>'
        )
    parts.append(f'<circle cx="{x(mean):.1f}" cy="7" r="3" class="dot"/></svg>')
    return "".join(parts)


def _line_chart(name: str, series: Sequence[tuple[str, Sequence[Any]]]) -> str:
    """Metric@K: one line per system (points with CI whiskers and a CI band), K evenly
    spaced on x, the metric on y."""
    width, height = 440, 260
    left, right, top, bottom = 52, 16, 16, 40
    ks = sorted({p.k for _, points in series for p in points})
    values = [
        v
        for _, points in series
        for p in points
        for v in ([p.mean] if p.mean is not None else []) + (list(p.ci) if p.ci else [])
    ]
    low = min(0.0, *values) if values else 0.0
    high = max(values) if values else 1.0
    high = 1.0 if high <= 1.0 and low >= 0 else high
    if high <= low:
        high = low + 1

    def x(k: int) -> float:
        if len(ks) == 1:
            return left + (width - left - right) / 2
        return left + ks.index(k) / (len(ks) - 1) * (width - left - right)

    def y(v: float) -> float:
        return top + (1 - (v - low) / (high - low)) * (height - top - bottom)

    out = [
        f'<svg class="chart curve" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(name)} at K">'
    ]
    for tick in _ticks(low, high):
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">{tick:g}</text>'
        )
    for k in ks:
        out.append(
            f'<text x="{x(k):.1f}" y="{height - bottom + 16}" class="tick" text-anchor="middle">{k}</text>'
        )
    out.append(
        f'<text x="{(left + width - right) / 2:.1f}" y="{height - 6}" class="label" '
        'text-anchor="middle">K (prompt slots)</text>'
    )
    for index, (system, points) in enumerate(series):
        color = _color(index)
        with_ci = [p for p in points if p.ci is not None]
        if len(with_ci) >= 2:
            upper = " ".join(f"{x(p.k):.1f},{y(p.ci[1]):.1f}" for p in with_ci)
            lower = " ".join(f"{x(p.k):.1f},{y(p.ci[0]):.1f}" for p in reversed(with_ci))
            out.append(f'<polygon points="{upper} {lower}" fill="{color}" class="band"/>')
        line = " ".join(f"{x(p.k):.1f},{y(p.mean):.1f}" for p in points if p.mean is not None)
        out.append(f'<polyline points="{line}" stroke="{color}" class="series"/>')
        for p in points:
            if p.mean is None:
                continue
            tip = f"{system} {p.label}: {_num(p.mean)}"
            if p.ci is not None:
                tip += f" [{_num(p.ci[0])}, {_num(p.ci[1])}]"
            out.append(
                f'<circle cx="{x(p.k):.1f}" cy="{y(p.mean):.1f}" r="3.5" fill="{color}">'
                f"<title>{_e(tip)}</title></circle>"
            )
    out.append("</svg>")
    return "".join(out)


def _scatter(
    system: str,
    ids: Sequence[str],
    proc: np.ndarray,
    pct: np.ndarray,
    thresholds: tuple[float, float],
    color: str,
) -> str:
    """PROC (x) against %PROC (y) per sample, with the diagnosis quadrants."""
    size, pad = 300, 44
    inner = size - 2 * pad
    tx, ty = thresholds

    def x(v: float) -> float:
        return pad + min(max(v, 0.0), 1.0) * inner

    def y(v: float) -> float:
        return pad / 2 + (1 - min(max(v, 0.0), 1.0)) * inner

    keep = ~np.isnan(proc)
    selection_na = np.isnan(pct)
    pct_shown = np.where(selection_na, 0.0, pct)
    retrieval = keep & (proc < tx)
    selection = keep & ~retrieval & (pct_shown < ty)
    fine = keep & ~retrieval & ~selection
    out = [
        f'<svg class="chart scatter" width="{size}" height="{size}" viewBox="0 0 {size} {size}" '
        f'role="img" aria-label="PROC vs %PROC, {_e(system)}">',
        f'<rect x="{x(0):.1f}" y="{y(1):.1f}" width="{x(tx) - x(0):.1f}" height="{inner:.1f}" class="q-retrieval"/>',
        f'<rect x="{x(tx):.1f}" y="{y(ty):.1f}" width="{x(1) - x(tx):.1f}" height="{y(0) - y(ty):.1f}" class="q-selection"/>',
        f'<rect x="{x(tx):.1f}" y="{y(1):.1f}" width="{x(1) - x(tx):.1f}" height="{y(ty) - y(1):.1f}" class="q-fine"/>',
        f'<line x1="{x(tx):.1f}" x2="{x(tx):.1f}" y1="{y(0):.1f}" y2="{y(1):.1f}" class="threshold"/>',
        f'<line x1="{x(tx):.1f}" x2="{x(1):.1f}" y1="{y(ty):.1f}" y2="{y(ty):.1f}" class="threshold"/>',
        f'<text x="{(x(0) + x(tx)) / 2:.1f}" y="{y(0.5):.1f}" class="quadrant" text-anchor="middle">retrieval</text>',
        f'<text x="{(x(0) + x(tx)) / 2:.1f}" y="{y(0.5) + 14:.1f}" class="quadrant" text-anchor="middle">{int(retrieval.sum())}</text>',
        f'<text x="{(x(tx) + x(1)) / 2:.1f}" y="{y(ty / 2):.1f}" class="quadrant" text-anchor="middle">selection {int(selection.sum())}</text>',
        f'<text x="{(x(tx) + x(1)) / 2:.1f}" y="{y((1 + ty) / 2):.1f}" class="quadrant" text-anchor="middle">fine {int(fine.sum())}</text>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        out.append(
            f'<text x="{x(tick):.1f}" y="{y(0) + 14:.1f}" class="tick" text-anchor="middle">{tick:g}</text>'
            f'<text x="{x(0) - 5:.1f}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">{tick:g}</text>'
        )
    out.append(
        f'<text x="{x(0.5):.1f}" y="{size - 4}" class="label" text-anchor="middle">PROC (retrieval ceiling)</text>'
        f'<text transform="translate(11 {y(0.5):.1f}) rotate(-90)" class="label" text-anchor="middle">%PROC (selection)</text>'
    )
    rng = np.random.default_rng(DEFAULT_SEED)  # a little jitter so equal points stay visible
    jitter = rng.uniform(-0.012, 0.012, size=(len(ids), 2))
    tips = len(ids) <= MAX_TIPS
    for i in map(int, np.flatnonzero(keep)):
        hollow = " hollow" if selection_na[i] else ""
        tip = f"<title>{_e(ids[i])}: PROC {_num(proc[i], 3)}, %PROC {_num(pct[i], 3)}</title>"
        out.append(
            f'<circle cx="{x(proc[i] + jitter[i, 0]):.1f}" cy="{y(pct_shown[i] + jitter[i, 1]):.1f}" '
            f'r="3.5" class="point{hollow}" fill="{color}" stroke="{color}">{tip if tips else ""}</circle>'
        )
    out.append("</svg>")
    return "".join(out)


def _forest(comparison: Comparison) -> str:
    """Mean differences with their CIs, one row per metric and pair, zero marked."""
    rows = [r for r in comparison.rows if not math.isnan(r.difference)]
    if not rows:
        return ""
    label_width, width, row_height = 260, 640, 22
    height = 30 + row_height * len(rows)
    values = [v for r in rows for v in ([r.difference] + (list(r.ci) if r.ci else []))]
    extent = max(abs(v) for v in values) or 1.0
    low, high = -extent * 1.1, extent * 1.1

    def x(v: float) -> float:
        return label_width + (v - low) / (high - low) * (width - label_width - 20)

    out = [
        f'<svg class="chart forest" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="differences with confidence intervals">',
        f'<line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="4" y2="{height - 22}" class="zero"/>',
    ]
    for tick in _ticks(low, high, 4):
        out.append(
            f'<text x="{x(tick):.1f}" y="{height - 6}" class="tick" text-anchor="middle">{tick:+g}</text>'
        )
    for index, r in enumerate(rows):
        cy = 14 + index * row_height
        pair = f" ({r.a} → {r.b})" if len(comparison.systems) > 2 else ""
        css = {"▲": "better", "▼": "worse"}.get(r.mark, "same")
        out.append(
            f'<text x="{label_width - 8}" y="{cy + 4}" class="tick" text-anchor="end">{_e(r.label + pair)}</text>'
        )
        if r.ci is not None:
            out.append(
                f'<line x1="{x(r.ci[0]):.1f}" x2="{x(r.ci[1]):.1f}" y1="{cy}" y2="{cy}" class="whisker {css}"/>'
            )
        tip = f"{r.label}{pair}: Δ {r.difference:+.4f}, p (Holm) {_num(r.p_holm)}"
        out.append(
            f'<circle cx="{x(r.difference):.1f}" cy="{cy}" r="4" class="{css}"><title>{_e(tip)}</title></circle>'
        )
    out.append("</svg>")
    return "".join(out)


# -- sections --------------------------------------------------------------------------


def _summary_section(results: Sequence[Results], names: Sequence[str]) -> str:
    summaries = [r.summary() for r in results]
    labels = list(dict.fromkeys(label for r in results for label in r.labels))
    head = "".join(f'<th colspan="2">{_e(n)}</th>' for n in names)
    rows = []
    for label in labels:
        entries = [s.get(label) for s in summaries]
        bounds = [
            v
            for e in entries
            if e
            for v in ([e["mean"]] if e["mean"] is not None else []) + (e["ci"] or [])
        ]
        low, high = (min(bounds), max(bounds)) if bounds else (0.0, 1.0)
        if high - low < 1e-9:
            low, high = low - 0.5, high + 0.5
        cells = []
        for entry in entries:
            if entry is None:
                cells.append('<td colspan="2" class="na">-</td>')
                continue
            ci = entry["ci"]
            text = _num(entry["mean"])
            ci_text = f"[{_num(ci[0])}, {_num(ci[1])}]" if ci else "-"
            cells.append(
                f'<td class="num">{text} <span class="ci">{ci_text}</span>'
                f'<span class="n">n={entry["n"]}</span></td>'
                f"<td>{_ci_bar(ci, entry['mean'], low, high)}</td>"
            )
        rows.append(f'<tr><th scope="row">{_e(label)}</th>{"".join(cells)}</tr>')
    return (
        '<section id="summary"><h2>Summary</h2>'
        '<p class="note">Mean of each metric with its 95% percentile bootstrap confidence '
        "interval (1000 resamples, seed 0; NA values left out; n = non-NA samples).</p>"
        f'<table class="summary"><thead><tr><th>metric</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _curves_section(results: Sequence[Results], names: Sequence[str]) -> str:
    per_system = [{c.name: c for c in curves(r)} for r in results]
    found = list(dict.fromkeys(name for system in per_system for name in system))
    if not found:
        return ""
    charts = []
    for name in found:
        series = [
            (system, system_curves[name].points)
            for system, system_curves in zip(names, per_system, strict=True)
            if name in system_curves
        ]
        legend = "".join(
            f'<span class="key"><i style="background:{_color(i)}"></i>{_e(s)}</span>'
            for i, (s, _) in enumerate(series)
        )
        charts.append(
            f"<figure><figcaption>{_e(name)}@K</figcaption>{_line_chart(name, series)}"
            f'<div class="legend">{legend}</div></figure>'
        )
    return (
        '<section id="curves"><h2>Metric@K curves</h2>'
        '<p class="note">Mean at each cutoff; the band is the 95% bootstrap CI.</p>'
        f'<div class="charts">{"".join(charts)}</div></section>'
    )


def _strata_section(results: Sequence[Results], names: Sequence[str], key: str) -> str:
    breakdowns = [by(r, key) for r in results]
    in_curves = set().union(*(curve_labels(r) for r in results))
    shown = {_curve_pick(c, results[0]) for r in results for c in curves(r)}
    labels = [
        label
        for label in dict.fromkeys(label for r in results for label in r.labels)
        if label not in in_curves or label in shown
    ]
    strata = list(dict.fromkeys(s for b in breakdowns for s in b.strata))
    head = "".join(f"<th>{_e(label)}</th>" for label in labels)
    rows = []
    for stratum in strata:
        present = [
            (index, name, breakdown)
            for index, (name, breakdown) in enumerate(zip(names, breakdowns, strict=True))
            if stratum in breakdown.strata
        ]
        for position, (index, name, breakdown) in enumerate(present):
            cells = []
            for label in labels:
                if label not in breakdown.labels:
                    cells.append('<td class="na">-</td>')
                    continue
                row = breakdown.row(stratum, label)
                ci = f"[{_num(row.ci[0], 3)}, {_num(row.ci[1], 3)}]" if row.ci else "-"
                cells.append(
                    f'<td class="num">{_num(row.mean)} <span class="ci">{ci}</span>'
                    f'<span class="n">n={row.n}</span></td>'
                )
            first = (
                f'<th scope="rowgroup" rowspan="{len(present)}">{_e(stratum)} '
                f'<span class="n">({breakdown.sizes[stratum]})</span></th>'
                if position == 0
                else ""
            )
            system = f'<td><i class="swatch" style="background:{_color(index)}"></i>{_e(name)}</td>'
            rows.append(f"<tr>{first}{system}{''.join(cells)}</tr>")
    return (
        f'<section id="strata"><h2>By {_e(key)}</h2>'
        f'<p class="note">Samples grouped by <code>metadata.{_e(key)}</code> '
        f"({_e(NO_STRATUM)}: samples without it); mean of the non-NA values, 95% bootstrap CI, "
        "n = non-NA samples.</p>"
        f'<div class="scroll"><table class="strata"><thead><tr><th>{_e(key)}</th><th>system</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _curve_pick(curve: Any, result: Results) -> str:
    """The label of a curve shown in the strata table: the config's default K when the
    curve has it, else its middle K."""
    default = result.provenance.get("config_default_k")
    for point in curve.points:
        if point.k == default:
            return str(point.label)
    return str(curve.points[len(curve.points) // 2].label)


def _pick(record_labels: Mapping[str, Any], alias: str) -> str | None:
    for label, record in record_labels.items():
        if record.alias == alias:
            return label
    return None


def _diagnosis_section(results: Sequence[Results], names: Sequence[str]) -> str:
    charts = []
    for index, (name, result) in enumerate(zip(names, results, strict=True)):
        records = {m.label: m for m in result.metrics}
        proc_label = _pick(records, PROC)
        if proc_label is None:
            continue
        k = records[proc_label].params.get("k")
        pct_label = next(
            (
                label
                for label, m in records.items()
                if m.alias == PCT_PROC and m.params.get("k") == k
            ),
            _pick(records, PCT_PROC),
        )
        if pct_label is None:
            continue
        diagnosis = _pick(records, DIAGNOSIS)
        params = records[diagnosis].params if diagnosis else {}
        thresholds = (
            float(params.get("proc_threshold", 0.5)),
            float(params.get("pct_proc_threshold", 0.5)),
        )
        charts.append(
            f"<figure><figcaption>{_e(name)}: {_e(proc_label)} vs {_e(pct_label)}</figcaption>"
            + _scatter(
                name,
                list(result.sample_ids),
                result.values(proc_label),
                result.values(pct_label),
                thresholds,
                _color(index),
            )
            + "</figure>"
        )
    if not charts:
        return ""
    return (
        '<section id="diagnosis"><h2>Set-based diagnosis: PROC vs %PROC</h2>'
        '<p class="note">Each point is a sample. PROC is the retrieval ceiling (how much of '
        "the best labeled evidence the pool could put in K slots); %PROC is how much of that "
        "ceiling the top K realised. Left of the PROC threshold: a retrieval problem; below "
        "the %PROC threshold on the right: a selection (reranking) problem. Hollow points have "
        f"NA %PROC (drawn at 0). Samples with NA PROC are not drawn. Up to {MAX_TIPS:,} "
        "samples, hovering a point names its sample.</p>"
        f'<div class="charts">{"".join(charts)}</div></section>'
    )


def _comparison_section(comparison: Comparison) -> str:
    columns = comparison._columns()
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    rows = []
    for row in comparison.rows:
        css = {"▲": "better", "▼": "worse"}.get(row.mark, "")
        cells = "".join(
            f'<td class="{"num" if i else ""}">{_e(c)}</td>'
            for i, c in enumerate(comparison._cells(row))
        )
        movers = ", ".join(f"{m.id} {m.difference:+.3f}" for m in row.movers[:3])
        rows.append(f'<tr class="{css}">{cells}<td class="movers">{_e(movers)}</td></tr>')
    return (
        '<section id="comparison"><h2>Comparison</h2>'
        f'<p class="note">{_e(comparison._caption())}. Δ is the mean paired difference with '
        "its 95% bootstrap CI; d_z is Cohen's effect size for paired samples; pairs where "
        "either score is NA are left out.</p>"
        f'<div class="scroll"><table class="comparison"><thead><tr>{head}<th>moved most</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>"
        f"{_forest(comparison)}</section>"
    )


def _sample_data(
    results: Sequence[Results], names: Sequence[str], key: str | None
) -> dict[str, Any]:
    ids = list(dict.fromkeys(i for r in results for i in r.sample_ids))
    labels = list(dict.fromkeys(label for r in results for label in r.labels))
    positions = [{s: i for i, s in enumerate(r.sample_ids)} for r in results]
    strata = {}
    if key is not None:
        for r, where in zip(results, positions, strict=True):
            metadata = r.metadata_of()
            for sample_id, i in where.items():
                if sample_id not in strata and r.metadata is not None:
                    strata[sample_id] = stratum_of(metadata[i], key)
    scores: dict[str, list[list[float | None]]] = {}
    for label in labels:
        columns = []
        for r, where in zip(results, positions, strict=True):
            values = (r.scores or {}).get(label)
            column: list[float | None] = []
            for sample_id in ids:
                at = where.get(sample_id)
                v = None if values is None or at is None else float(values[at])
                column.append(None if v is None or math.isnan(v) else round(v, 6))
            columns.append(column)
        scores[label] = columns
    records = {m.label: m for r in results for m in r.metrics}
    return {
        "ids": ids,
        "systems": list(names),
        "key": key,
        "strata": [strata.get(i, NO_STRATUM) for i in ids] if key else None,
        "labels": labels,
        "better": {label: records[label].higher_is_better for label in labels},
        "scores": scores,
        "verdicts": _verdicts(results, ids),
    }


def _verdicts(results: Sequence[Results], ids: Sequence[str]) -> list[list[str | None]] | None:
    """Per system, each sample's diagnosis class at the results' default K (None: NA or
    not in these results); None when no results scored the diagnosis."""
    found = []
    for r in results:
        at_k = labels_at(r.metrics, int(r.provenance.get("config_default_k") or 5))
        label = next((m.label for m in r.metrics if m.alias == DIAGNOSIS and m.label in at_k), None)
        details = dict(zip(r.sample_ids, r.details.get(label) or [], strict=False)) if label else {}
        found.append([(details.get(i) or {}).get("class") for i in ids])
    return found if any(v is not None for column in found for v in column) else None


def _explain_data(explanations: Sequence[Explanation], ids: Sequence[str]) -> dict[str, Any]:
    """The explanations (at least one), compactly: the score labels to show, each document
    id and snippet once, then per system and sample ``[k, retrieved, pool, has_output,
    slots, missed, diagnosis]`` with slots ``[doc, pool_rank, relevance, grade, utility]``
    and misses ``[doc, pool_rank, relevance, grade]`` (trailing nulls left out), and the
    diagnosis ``[label, G_obs, G_pool, G_oracle, verdict]``."""
    docs: dict[str, int] = {}
    texts: list[str | None] = []

    def doc(doc_id: str, snippet: str | None = None) -> int:
        index = docs.setdefault(doc_id, len(docs))
        if index == len(texts):
            texts.append(snippet)
        elif texts[index] is None:
            texts[index] = snippet
        return index

    def view(v: SystemView) -> list[Any]:
        d = v.diagnosis
        return [
            v.k,
            v.retrieved,
            v.pool,
            int(v.has_output),
            [
                _trimmed(doc(s.id, s.snippet), s.pool_rank, s.relevance, s.grade, s.utility)
                for s in v.slots
            ],
            [_trimmed(doc(m.id), m.pool_rank, m.relevance, m.grade) for m in v.missed],
            None
            if d is None
            else [d.label, *map(_compact, (d.g_obs, d.g_pool, d.g_oracle)), d.verdict],
        ]

    by_id = {e.sample_id: e for e in explanations}
    return {
        "questions": [by_id[i].question if i in by_id else None for i in ids],
        "labels": list(explanations[0].systems[0].scores),
        "views": [
            [view(by_id[i].systems[s]) if i in by_id else None for i in ids]
            for s in range(len(explanations[0].systems))
        ],
        "docs": list(docs),
        "texts": texts,
    }


def _trimmed(doc: int, pool_rank: int | None, *labels: float | None) -> list[float | None]:
    """A slot or a miss: its labels compacted, without the trailing nulls."""
    found = [doc, pool_rank, *map(_compact, labels)]
    while found[-1] is None:
        found.pop()
    return found


def _compact(value: float | None) -> float | None:
    """A number for the embedded JSON: integers without a decimal point, others to 4 places."""
    if value is None:
        return None
    whole = int(value)
    return whole if whole == value else round(value, 4)


def _samples_section(data: Mapping[str, Any]) -> str:
    options = "".join(
        f'<option value="{_e(label)}">{_e(label)}</option>' for label in data["labels"]
    )
    several = len(data["systems"]) > 1
    problems = [
        (value, text)
        for value, text, shown in (
            ("retrieval", "retrieval problem", data["verdicts"] is not None),
            ("selection", "selection problem", data["verdicts"] is not None),
            ("regressed", "regressed", several),
        )
        if shown
    ]
    show = "".join(f'<option value="{v}">{_e(t)}</option>' for v, t in problems)
    explained = (
        "Click a row to see what each system put in its slots, what it missed and why. "
        if data["explain"]
        else "To see each sample's slots and misses on a click, pass the outputs each "
        "results file scored and the dataset (<code>slotwise report --outputs F ... "
        "--dataset D</code>). "
    )
    return (
        '<section id="samples"><h2>Per sample</h2>'
        '<div class="controls"><label>metric <select id="metric">'
        f"{options}</select></label>"
        '<label>filter <input id="filter" type="search" placeholder="id or stratum"></label>'
        + (
            f'<label>show <select id="problem"><option value="">all samples</option>{show}'
            "</select></label>"
            if problems
            else ""
        )
        + '<span id="count" class="n"></span>'
        '<button id="more" type="button" hidden>show all</button></div>'
        f'<p class="note">{explained}Click a column header to sort (again to reverse). '
        + (
            "Δ is the last system minus the first; <i>regressed</i>: the last system is worse "
            "on the chosen metric. "
            if several
            else ""
        )
        + (
            "A retrieval or selection problem is the set-based diagnosis of some system. "
            if data["verdicts"] is not None
            else ""
        )
        + "NA sorts last.</p>"
        '<div class="scroll tall"><table id="sample-table" class="samples"><thead></thead>'
        "<tbody></tbody></table></div></section>"
    )


_CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --band: #f4f6f9; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0; background: #fff; }
header { padding: 20px 32px 12px; border-bottom: 1px solid var(--line); background: var(--band); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .meta { color: var(--muted); font-size: 13px; }
nav { padding: 8px 32px; border-bottom: 1px solid var(--line); font-size: 13px; }
nav a { margin-right: 14px; color: #0a5cad; text-decoration: none; }
main { padding: 8px 32px 40px; max-width: 1400px; }
h2 { font-size: 18px; margin: 28px 0 6px; }
.note { color: var(--muted); margin: 0 0 10px; max-width: 980px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: middle; }
thead th { background: var(--band); position: sticky; top: 0; z-index: 1; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.ci { color: var(--muted); font-size: 12px; margin-left: 4px; }
.n { color: var(--muted); font-size: 11px; margin-left: 6px; }
td.na { color: var(--muted); text-align: center; }
tr.better td { background: #eaf6ee; } tr.worse td { background: #fbeaea; }
tr.better td:nth-last-child(2) { color: #137a3a; font-weight: 600; }
tr.worse td:nth-last-child(2) { color: #b3261e; font-weight: 600; }
table.strata td { white-space: nowrap; }
td.movers { color: var(--muted); font-size: 12px; }
.scroll { overflow-x: auto; } .tall { max-height: 560px; overflow-y: auto; border: 1px solid var(--line); }
.charts { display: flex; flex-wrap: wrap; gap: 20px; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: 4px; }
svg text { font: 11px system-ui, sans-serif; fill: var(--fg); }
svg .tick { fill: var(--muted); } svg .label { font-size: 12px; }
svg .grid { stroke: #eceef2; } svg .axis { stroke: #e2e5ea; }
svg .series { fill: none; stroke-width: 2; } svg .band { opacity: 0.13; }
svg .ci { stroke: #2d3a4f; stroke-width: 1.5; } svg .dot { fill: #0072B2; }
svg .threshold { stroke: #6b7280; stroke-dasharray: 4 3; }
svg .q-retrieval { fill: #fdecea; } svg .q-selection { fill: #fff5e0; } svg .q-fine { fill: #e9f6ee; }
svg .quadrant { fill: #6b7280; font-size: 12px; font-weight: 600; }
svg .point { fill-opacity: 0.75; } svg .point.hollow { fill: #fff; fill-opacity: 1; }
svg .zero { stroke: #6b7280; stroke-dasharray: 3 3; }
svg .whisker { stroke-width: 2; } svg .whisker.better, svg circle.better { stroke: #137a3a; fill: #137a3a; }
svg .whisker.worse, svg circle.worse { stroke: #b3261e; fill: #b3261e; }
svg .whisker.same { stroke: #7b8494; } svg circle.same { fill: #7b8494; }
.legend { font-size: 12px; } .key { margin-right: 12px; }
.key i, i.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; }
.controls { display: flex; gap: 18px; align-items: center; margin: 6px 0 8px; }
.controls input, .controls select, .controls button { font: inherit; padding: 3px 6px; }
table.samples th { cursor: pointer; user-select: none; white-space: nowrap; }
table.samples th[aria-sort="ascending"]::after { content: " ▲"; font-size: 10px; }
table.samples th[aria-sort="descending"]::after { content: " ▼"; font-size: 10px; }
td.pos { color: #137a3a; } td.neg { color: #b3261e; }
tr.explainable { cursor: pointer; } tr.explainable:hover td { background: var(--band); }
tr.explain-row > td { background: #fbfcfd; padding: 10px 12px 14px; }
.explain .question { font-weight: 600; margin: 0 0 8px; }
.explain .systems { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.explain .system { flex: 1 1 420px; min-width: 0; }
.explain h4 { margin: 0 0 2px; font-size: 14px; }
.explain p { margin: 4px 0; max-width: none; }
.explain table { margin: 4px 0; font-size: 12px; }
.explain thead th { position: static; }
.explain table.scores td + td { text-align: right; font-variant-numeric: tabular-nums; }
.explain td, .explain th { padding: 2px 6px; white-space: nowrap; }
.explain table.slots td:last-child { white-space: normal; color: var(--muted); }
.explain tr.moved-in td { background: #eaf6ee; }
.explain .verdict.retrieval { color: #b3261e; } .explain .verdict.selection { color: #a15c00; }
.explain .verdict.fine { color: #137a3a; }
"""

_JS = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var table = document.getElementById("sample-table");
  var select = document.getElementById("metric");
  var filter = document.getElementById("filter");
  var problem = document.getElementById("problem");
  var count = document.getElementById("count");
  var more = document.getElementById("more");
  var ex = data.explain;
  var sortColumn = 0, sortDirection = 1, openIndex = null, limit = data.maxRows;

  function columns() {
    var names = ["id"];
    if (data.key) names.push(data.key);
    names = names.concat(data.systems);
    if (data.systems.length > 1) names.push("\\u0394");
    if (data.verdicts) names.push("diagnosis");
    return names;
  }

  function rows() {
    var scores = data.scores[select.value];
    return data.ids.map(function (id, i) {
      var row = [id];
      if (data.key) row.push(data.strata[i]);
      var values = scores.map(function (column) { return column[i]; });
      row = row.concat(values);
      if (values.length > 1) {
        var first = values[0], last = values[values.length - 1];
        row.push(first === null || last === null ? null : last - first);
      }
      if (data.verdicts) {
        row.push(data.verdicts.map(function (column) { return column[i] || "NA"; }).join(" \\u2192 "));
      }
      row.index = i;
      return row;
    });
  }

  function shows(row) {
    var wanted = problem ? problem.value : "";
    if (!wanted) return true;
    if (wanted === "regressed") {
      var delta = row[data.systems.length + (data.key ? 1 : 0) + 1];
      return delta !== null && (data.better[select.value] ? delta < 0 : delta > 0);
    }
    return data.verdicts.some(function (column) { return column[row.index] === wanted; });
  }

  function format(value, column) {
    if (value === null) return "NA";
    if (typeof value !== "number") return String(value);
    var text = value.toFixed(4);
    return column === "\\u0394" && value > 0 ? "+" + text : text;
  }

  function compare(a, b) {
    if (a === b) return 0;
    if (a === null) return 1;
    if (b === null) return -1;
    if (typeof a === "number" && typeof b === "number") return sortDirection * (a - b);
    return sortDirection * String(a).localeCompare(String(b), undefined, {numeric: true});
  }

  function node(tag, className, text) {
    var element = document.createElement(tag);
    if (className) element.className = className;
    if (text !== undefined) element.textContent = text;
    return element;
  }

  function label(value) { return value === null || value === undefined ? "-" : String(value); }

  function tableOf(className, header, body) {
    var t = node("table", className), head = node("tr");
    header.forEach(function (text) { head.appendChild(node("th", null, text)); });
    t.appendChild(node("thead")).appendChild(head);
    var tbody = t.appendChild(node("tbody"));
    body.forEach(function (cells) {
      var tr = tbody.appendChild(node("tr", cells.className));
      cells.forEach(function (text) { tr.appendChild(node("td", null, text)); });
    });
    return t;
  }

  function slotIds(view) { return view ? view[4].map(function (slot) { return slot[0]; }) : []; }

  function explanation(index) {
    var box = node("div", "explain");
    box.appendChild(node("p", "question", data.ids[index] + ": " + (ex.questions[index] || "")));
    var views = ex.views.map(function (system) { return system[index]; });
    var kinds = [2, 3, 4].filter(function (k) {
      return views.some(function (v) {
        return v && v[4].concat(k < 4 ? v[5] : []).some(function (entry) { return entry[k] != null; });
      });
    });
    var heads = {2: "rel", 3: "grade", 4: "utility"};
    var base = slotIds(views[0]);
    var systems = box.appendChild(node("div", "systems"));
    views.forEach(function (view, s) {
      var column = systems.appendChild(node("div", "system"));
      column.appendChild(node("h4", null, data.systems[s]));
      if (!view) { column.appendChild(node("p", "note", "not in these results")); return; }
      var pool = view[2] === null ? "the ranking is the pool" : "pool of " + view[2];
      column.appendChild(node("p", "note", "top " + view[0] + " of " + view[1] + " retrieved, " + pool));
      if (!view[3]) column.appendChild(node("p", "note", "no output: scored as an empty ranking"));
      var mine = slotIds(view);
      var body = view[4].map(function (slot, rank) {
        var cells = [String(rank + 1), ex.docs[slot[0]]];
        kinds.forEach(function (k) { cells.push(label(slot[k])); });
        cells.push(label(slot[1]), ex.texts[slot[0]] || "-");
        if (s > 0 && base.indexOf(slot[0]) < 0) cells.className = "moved-in";
        return cells;
      });
      var header = ["rank", "id"].concat(kinds.map(function (k) { return heads[k]; }), ["pool", "text"]);
      if (body.length) column.appendChild(tableOf("slots", header, body));
      var missed = view[5].map(function (m) {
        var labels = [[2, "rel"], [3, "grade"]].filter(function (p) { return m[p[0]] != null; })
          .map(function (p) { return p[1] + " " + m[p[0]]; }).join(", ");
        return ex.docs[m[0]] + " (" + labels + ") " + (m[1] == null ? "not in the pool" : "at pool rank " + m[1]);
      });
      column.appendChild(node("p", "missed", "missed: " + (missed.join("; ") || "none")));
      if (s > 0) {
        var names = function (list) { return list.map(function (d) { return ex.docs[d]; }).join(", ") || "none"; };
        var moved = "vs " + data.systems[0] + ": moved in " + names(mine.filter(function (d) { return base.indexOf(d) < 0; })) +
          "; moved out " + names(base.filter(function (d) { return mine.indexOf(d) < 0; }));
        column.appendChild(node("p", "moved", moved));
      }
      var d = view[6];
      if (d) {
        column.appendChild(node("p", "verdict " + (d[4] || "na"), d[0] + ": " + (d[4] || "NA") +
          " (G_obs " + d[1] + ", G_pool " + d[2] + ", G_oracle " + d[3] + ")"));
      }
    });
    var several = data.systems.length > 1;
    var scoreRows = ex.labels.map(function (name) {
      var values = data.scores[name].map(function (system) { return system[index]; });
      var cells = [name].concat(values.map(function (v) { return format(v); }));
      if (several) {
        var first = values[0], last = values[values.length - 1];
        cells.push(first === null || last === null ? "NA" : format(last - first, "\\u0394"));
      }
      return cells;
    });
    box.appendChild(tableOf("scores", ["scores"].concat(data.systems, several ? ["\\u0394"] : []), scoreRows));
    return box;
  }

  function openRow(tr, width) {
    var detail = node("tr", "explain-row");
    var cell = detail.appendChild(node("td"));
    cell.colSpan = width;
    cell.appendChild(explanation(openIndex));
    tr.after(detail);
  }

  function render() {
    var names = columns();
    var head = document.createElement("tr");
    names.forEach(function (name, index) {
      var th = document.createElement("th");
      th.textContent = name;
      th.setAttribute("data-column", String(index));
      if (index === sortColumn) th.setAttribute("aria-sort", sortDirection > 0 ? "ascending" : "descending");
      th.addEventListener("click", function () {
        sortDirection = sortColumn === index ? -sortDirection : 1;
        sortColumn = index;
        render();
      });
      head.appendChild(th);
    });
    table.tHead.replaceChildren(head);
    var needle = filter.value.trim().toLowerCase();
    var shown = rows().filter(function (row) {
      if (!shows(row)) return false;
      if (!needle) return true;
      return String(row[0]).toLowerCase().indexOf(needle) >= 0 ||
        (data.key && String(row[1]).toLowerCase().indexOf(needle) >= 0);
    });
    shown.sort(function (a, b) {
      var order = compare(a[sortColumn], b[sortColumn]);
      return order !== 0 ? order : String(a[0]).localeCompare(String(b[0]), undefined, {numeric: true});
    });
    var body = document.createDocumentFragment(), open = null;
    var drawn = shown.slice(0, limit);
    drawn.forEach(function (row) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-index", String(row.index));
      if (ex) tr.className = "explainable";
      row.forEach(function (value, index) {
        var td = document.createElement("td");
        td.textContent = format(value, names[index]);
        if (typeof value === "number" || value === null) td.className = "num";
        if (names[index] === "\\u0394" && value) td.className += value > 0 ? " pos" : " neg";
        tr.appendChild(td);
      });
      if (row.index === openIndex) open = tr;
      body.appendChild(tr);
    });
    table.tBodies[0].replaceChildren(body);
    if (open) openRow(open, names.length);
    count.textContent = shown.length + " of " + data.ids.length + " samples" +
      (drawn.length < shown.length ? " (the first " + drawn.length + " drawn)" : "");
    more.hidden = drawn.length === shown.length;
  }

  if (ex) {
    table.tBodies[0].addEventListener("click", function (event) {
      var tr = event.target.closest("tr.explainable");
      if (!tr) return;
      var index = Number(tr.getAttribute("data-index"));
      var previous = table.querySelector("tr.explain-row");
      if (previous) previous.remove();
      openIndex = openIndex === index ? null : index;
      if (openIndex !== null) openRow(tr, columns().length);
    });
  }
  select.addEventListener("change", render);
  filter.addEventListener("input", render);
  if (problem) problem.addEventListener("change", render);
  more.addEventListener("click", function () { limit = Infinity; render(); });
  render();
})();
"""


def _default_key(results: Sequence[Results]) -> str | None:
    for r in results:
        if any("stratum" in m for m in r.metadata_of()):
            return "stratum"
    return None


def build_report(
    results: Sequence[Results],
    *,
    names: Sequence[str] | None = None,
    by_key: str | None = None,
    title: str | None = None,
    test: Test = "randomization",
    alpha: float = 0.05,
    resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = DEFAULT_SEED,
    explanations: Sequence[Explanation] | None = None,
) -> str:
    """The report as one HTML document. ``by_key`` defaults to ``stratum`` when samples
    carry it; with two or more results the comparison uses ``test``/``alpha``/... (see
    :func:`engine.compare.compare`), which also checks that they share a dataset.
    ``explanations`` (:func:`engine.evaluation.explain.explain` of the same results)
    open under a row of the per-sample table when it is clicked."""
    results = list(results)
    if not results:
        raise ValueError("build_report needs at least one results")
    names = list(names) if names is not None else [f"system {i + 1}" for i in range(len(results))]
    if len(names) != len(results):
        raise ValueError(f"names must be {len(results)} strings, got {names!r}")
    comparison = (
        compare(results, names=names, test=test, alpha=alpha, resamples=resamples, seed=seed)
        if len(results) > 1
        else None
    )
    key = by_key if by_key is not None else _default_key(results)
    first = results[0]
    title = title or f"slotwise report: {first.dataset_name or 'dataset'}"
    sections = [
        ("summary", "Summary", _summary_section(results, names)),
        ("comparison", "Comparison", _comparison_section(comparison) if comparison else ""),
        ("curves", "Metric@K", _curves_section(results, names)),
        ("strata", f"By {key}", _strata_section(results, names, key) if key else ""),
        ("diagnosis", "Diagnosis", _diagnosis_section(results, names)),
    ]
    data = _sample_data(results, names, key)
    data["explain"] = _explain_data(explanations, data["ids"]) if explanations else None
    data["maxRows"] = MAX_ROWS
    sections.append(("samples", "Per sample", _samples_section(data)))
    nav = "".join(f'<a href="#{anchor}">{_e(text)}</a>' for anchor, text, body in sections if body)
    systems = ", ".join(
        f'<i class="swatch" style="background:{_color(i)}"></i>{_e(n)}' for i, n in enumerate(names)
    )
    provenance = first.provenance
    meta = (
        f"dataset <b>{_e(first.dataset_name or '-')}</b> ({len(first.sample_ids)} samples, "
        f"{_e(first.dataset_hash[:15])}…) · systems: {systems} · "
        f"slotwise {_e(provenance.get('slotwise', '?'))} · generated "
        f"{datetime.now(UTC).isoformat(timespec='seconds')}"
    )
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f'<header><h1>{_e(title)}</h1><div class="meta">{meta}</div></header>'
        f"<nav>{nav}</nav><main>{''.join(body for _, _, body in sections)}</main>"
        f'<script type="application/json" id="report-data">{payload}</script>'
        f"<script>{_JS}</script></body></html>\n"
    )


def write_report(results: Sequence[Results], path: str | os.PathLike[str], **options: Any) -> str:
    """Write :func:`build_report` to ``path`` (atomically); returns the HTML."""
    text = build_report(results, **options)
    atomic_write(path, text)
    return text
