"""A self-contained HTML report of one or more results of the same dataset.

One file that opens offline: the page's CSS and vanilla JS (report_assets/report.css and
report.js, package data) are inlined, charts drawn as inline SVG here (no CDN, no fetch).
Sections: summary with bootstrap CIs (each system's error count and rate, every interval
on a labelled axis shared by the metrics of one scale), a paired comparison over a stated
Holm family (two or more results; the same as ``slotwise compare`` on the same metrics),
Metric@K curves, per-stratum table, the set-based diagnosis (PROC vs %PROC at the
configured K, when the results hold both), and a per-sample table that sorts by a click on
a header, filters as you type or by problem (retrieval, selection, regressed) and, given
explanations, opens a sample's slots and misses under its row on a click (the
explanations are embedded once, as JSON, and drawn by the JS).
"""

from __future__ import annotations

import html
import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any

import numpy as np

from engine.analysis.compare import Comparison, compare
from engine.analysis.curves import curve_labels, curves
from engine.analysis.explain import DIAGNOSIS, Explanation, SystemView, labels_at
from engine.analysis.stats import DEFAULT_SEED, DEFAULT_TEST_RESAMPLES, Test
from engine.analysis.verdict import gate
from engine.evaluation.label_sources import REPORT as LABEL_SOURCES
from engine.evaluation.results import Results
from engine.evaluation.strata import NO_STRATUM, by, stratum_of
from engine.io.config import DEFAULT_K
from engine.io.writer import atomic_write

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


def _step(low: float, high: float, count: int) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) that cuts [low, high] into
    at most ``count`` parts."""
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    step = _step(low, high, count)
    start = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = start
    while value <= high + 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


#: An axis: its ticks, the first and last at its ends.
Axis = tuple[float, ...]
#: The axis of values in [0, 1]; the Summary's metrics whose values lie there share it.
UNIT: Axis = (0.0, 0.25, 0.5, 0.75, 1.0)


def _fit(values: Sequence[float], count: int) -> Axis:
    """The axis that fits ``values``: from a round value at or below the lowest to one at
    or above the highest, in about ``count`` round steps (values all equal: from 0 to
    them, or :data:`UNIT` when they are 0)."""
    low, high = min(values), max(values)
    if high <= low:
        low, high = min(low, 0.0), max(high, 0.0)
        if high <= low:
            return UNIT
    step = _step(low, high, count)
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return tuple(round(i * step, 10) for i in range(first, last + 1))


# -- charts (inline SVG) ---------------------------------------------------------------


#: The Summary's interval charts: width, inner padding and the height of one system's lane.
CI_WIDTH, CI_PAD, CI_LANE = 300, 12, 12
#: Metrics in [0, 1] whose values all lie below this (harm, about 0.02) get an axis of
#: their own: on :data:`UNIT` their intervals would lie flat at 0.
FLAT = 0.2


def _axis_of(values: Sequence[float]) -> Axis:
    """The axis a metric's intervals are drawn on: :data:`UNIT` when every value lies in
    [0, 1] and some above :data:`FLAT` (or all are 0), else one of its own from 0 (or
    below) to a round end."""
    if all(0.0 <= v <= 1.0 for v in values) and (max(values) > FLAT or max(values) == 0):
        return UNIT
    return _fit([0.0, *values], 4)


def _ci_x(value: float, axis: Axis) -> float:
    low, high = axis[0], axis[-1]
    return CI_PAD + (value - low) / (high - low) * (CI_WIDTH - 2 * CI_PAD)


def _axis_svg(axis: Axis, y: float) -> str:
    """Tick labels of ``axis`` at height ``y``."""
    return "".join(
        f'<text x="{_ci_x(t, axis):.1f}" y="{y:.1f}" class="tick" text-anchor="middle">{t:g}</text>'
        for t in axis
    )


def _ci_chart(
    label: str,
    entries: Sequence[Mapping[str, Any] | None],
    names: Sequence[str],
    axis: Axis,
) -> str:
    """One metric's intervals, a lane per system in its colour (the CI as a line, the
    mean as a dot) on ``axis``; an axis other than :data:`UNIT` is labelled under them."""
    own = axis != UNIT
    lanes = CI_LANE * len(entries)
    height = lanes + 4 + (14 if own else 0)
    parts = [
        f'<svg class="cibar{" own" if own else ""}" width="{CI_WIDTH}" height="{height}" '
        f'viewBox="0 0 {CI_WIDTH} {height}" role="img" aria-label="{_e(label)}: 95% CIs">'
    ]
    for tick in axis:
        x = _ci_x(tick, axis)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="1" y2="{lanes + 3}" class="grid"/>')
    for index, entry in enumerate(entries):
        if entry is None or entry["mean"] is None:
            continue
        color, y = _color(index), 2 + CI_LANE * index + CI_LANE / 2
        ci = entry["ci"]
        tip = f"{names[index]}: {_num(entry['mean'])}" + (
            f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else ""
        )
        parts.append(f'<g class="system" data-system="{index}"><title>{_e(tip)}</title>')
        if ci is not None:
            x0, x1 = _ci_x(ci[0], axis), _ci_x(ci[1], axis)
            parts.append(
                f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y}" y2="{y}" stroke="{color}" class="range"/>'
                f'<line x1="{x0:.1f}" x2="{x0:.1f}" y1="{y - 4}" y2="{y + 4}" stroke="{color}" class="range"/>'
                f'<line x1="{x1:.1f}" x2="{x1:.1f}" y1="{y - 4}" y2="{y + 4}" stroke="{color}" class="range"/>'
            )
        parts.append(
            f'<circle cx="{_ci_x(entry["mean"], axis):.1f}" cy="{y}" r="3.5" fill="{color}" '
            f'class="mean"/></g>'
        )
    if own:
        parts.append(_axis_svg(axis, height - 2))
    parts.append("</svg>")
    return "".join(parts)


#: Each system's line in the Metric@K charts (by its index): solid, then dashed, so a line
#: drawn over an earlier one leaves it visible.
DASHES = ("", "7 5", "2 3", "9 3 2 3")


#: The least room (px) between two K labels of a Metric@K chart, beside their digits.
_K_LABEL_GAP = 6


def _curve_axis(series: Sequence[tuple[int, str, Sequence[Any]]]) -> Axis:
    """The y axis of a Metric@K chart: fitted to its means and CIs."""
    values = [
        v
        for _, _, points in series
        for p in points
        for v in ([p.mean] if p.mean is not None else []) + (list(p.ci) if p.ci else [])
    ]
    return _fit(values, 5) if values else UNIT


def _line_chart(name: str, series: Sequence[tuple[int, str, Sequence[Any]]], axis: Axis) -> str:
    """Metric@K: one line per system (its index, name and points) in the system's colour
    and dash, with a CI band, K on a numeric x axis from 0 (K = 1, 3, 5, 10 spaced by
    value; a K whose label would touch the one before it is drawn unlabelled), the metric
    on y along ``axis``. Later systems' points are drawn smaller, over the earlier ones',
    so equal points show both."""
    width, height = 440, 260
    left, right, top, bottom = 52, 16, 16, 40
    ks = sorted({p.k for _, _, points in series for p in points})
    low, high = axis[0], axis[-1]

    def x(k: int) -> float:
        return left + k / max(ks) * (width - left - right)

    def y(v: float) -> float:
        return top + (1 - (v - low) / (high - low)) * (height - top - bottom)

    out = [
        f'<svg class="chart curve" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(name)} at K">'
    ]
    for tick in axis:
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">{tick:g}</text>'
        )
    labelled = -math.inf
    for k in ks:
        out.append(
            f'<line x1="{x(k):.1f}" x2="{x(k):.1f}" y1="{height - bottom}" '
            f'y2="{height - bottom + 4}" class="axis"/>'
        )
        if x(k) - labelled >= _K_LABEL_GAP + 7 * len(str(k)):
            out.append(
                f'<text x="{x(k):.1f}" y="{height - bottom + 16}" class="tick" text-anchor="middle">{k}</text>'
            )
            labelled = x(k)
    out.append(
        f'<text x="{(left + width - right) / 2:.1f}" y="{height - 6}" class="label" '
        'text-anchor="middle">K (prompt slots)</text>'
    )
    for position, (index, system, points) in enumerate(series):
        color, dash = _color(index), DASHES[index % len(DASHES)]
        out.append(f'<g class="system" data-system="{index}">')
        with_ci = [p for p in points if p.ci is not None]
        if len(with_ci) >= 2:
            upper = " ".join(f"{x(p.k):.1f},{y(p.ci[1]):.1f}" for p in with_ci)
            lower = " ".join(f"{x(p.k):.1f},{y(p.ci[0]):.1f}" for p in reversed(with_ci))
            out.append(f'<polygon points="{upper} {lower}" fill="{color}" class="band"/>')
        line = " ".join(f"{x(p.k):.1f},{y(p.mean):.1f}" for p in points if p.mean is not None)
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{line}" stroke="{color}"{dashed} class="series"/>')
        radius = 3 + 1.5 * (len(series) - 1 - position)
        for p in points:
            if p.mean is None:
                continue
            tip = f"{system} {p.label}: {_num(p.mean)}"
            if p.ci is not None:
                tip += f" [{_num(p.ci[0])}, {_num(p.ci[1])}]"
            out.append(
                f'<circle cx="{x(p.k):.1f}" cy="{y(p.mean):.1f}" r="{radius}" fill="{color}" '
                f'class="mean"><title>{_e(tip)}</title></circle>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _coinciding(series: Sequence[tuple[int, str, Sequence[Any]]]) -> list[str]:
    """Per pair of systems whose means are equal (to the 4 places shown) at some K: which
    line lies on which, and where."""
    notes = []
    for (_, first, a), (_, later, b) in itertools.combinations(series, 2):
        means = {p.k: _num(p.mean) for p in a if p.mean is not None}
        same = [p.k for p in b if p.mean is not None and means.get(p.k) == _num(p.mean)]
        if same:
            where = (
                "at every K"
                if len(same) == len(means) == len(b)
                else "at K = " + ", ".join(map(str, same))
            )
            notes.append(f"{later} and {first} have the same mean {where}: their lines coincide")
    return notes


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


def _errors(result: Results) -> tuple[int, int]:
    """(failed samples, samples scored): the samples whose system call failed, from the
    results' ``diagnostics.errors``."""
    samples = result.samples if result.samples is not None else len(result.ids)
    return len(result.diagnostics.errors), samples


def _legend(names: Sequence[str], lines: bool = False) -> str:
    """Each system's colour by its name; ``lines``: as a stretch of its Metric@K line."""

    def key(index: int) -> str:
        if not lines:
            return f'<i style="background:{_color(index)}"></i>'
        dash = DASHES[index % len(DASHES)]
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        return (
            f'<svg class="line" width="24" height="10" viewBox="0 0 24 10"><line x1="0" x2="24" '
            f'y1="5" y2="5" stroke="{_color(index)}" stroke-width="2"{dashed}/></svg>'
        )

    keys = "".join(f'<span class="key">{key(i)}{_e(n)}</span>' for i, n in enumerate(names))
    return f'<div class="legend">{keys}</div>'


def _summary_section(results: Sequence[Results], names: Sequence[str]) -> str:
    summaries = [r.summary() for r in results]
    labels = list(dict.fromkeys(label for r in results for label in r.labels))
    head = "".join(
        f'<th class="system"><i class="swatch" style="background:{_color(i)}"></i>{_e(n)}</th>'
        for i, n in enumerate(names)
    )
    failed = []
    for result in results:
        count, samples = _errors(result)
        rate = count / samples if samples else 0.0
        css = "num errors" + (" some" if count else "")
        failed.append(f'<td class="{css}">{count} of {samples} ({rate:.1%})</td>')
    rows = [
        '<tr class="errors"><th scope="row">errors (failed samples)</th>'
        f"{''.join(failed)}<td></td></tr>"
    ]
    for label in labels:
        entries = [s.get(label) for s in summaries]
        bounds = [
            v
            for e in entries
            if e
            for v in ([e["mean"]] if e["mean"] is not None else []) + (e["ci"] or [])
        ]
        cells = []
        for entry in entries:
            if entry is None:
                cells.append('<td class="na">-</td>')
                continue
            ci = entry["ci"]
            ci_text = f"[{_num(ci[0])}, {_num(ci[1])}]" if ci else "-"
            cells.append(
                f'<td class="num">{_num(entry["mean"])} <span class="ci">{ci_text}</span>'
                f'<span class="n">n={entry["n"]}</span></td>'
            )
        chart = _ci_chart(label, entries, names, _axis_of(bounds)) if bounds else ""
        rows.append(
            f'<tr><th scope="row">{_e(label)}</th>{"".join(cells)}<td class="chart">{chart}</td></tr>'
        )
    axis = (
        f'<svg class="axis" width="{CI_WIDTH}" height="14" viewBox="0 0 {CI_WIDTH} 14" '
        f'role="img" aria-label="shared axis, 0 to 1">{_axis_svg(UNIT, 11)}</svg>'
    )
    warnings = "".join(
        f'<p class="note warn">{_e(name)}: {_e(r.diagnostics.unknown_ids() or "")}</p>'
        for name, r in zip(names, results, strict=True)
        if r.diagnostics.unknown_ids() is not None
    )
    return (
        '<section id="summary"><h2>Summary</h2>'
        '<p class="note">Mean of each metric with its 95% percentile bootstrap confidence '
        "interval (1000 resamples, seed 0; NA values left out; n = non-NA samples). The "
        "chart draws each system's interval in its colour; metrics whose values lie in "
        "[0, 1] share the axis at the head of the column, the others have an axis of their "
        f"own under their row, as do those whose values all lie below {FLAT:g} (they would "
        "lie flat at 0 on the shared one). <i>errors</i>: samples whose system call failed "
        "(NA in every metric), of all samples scored.</p>"
        f"{warnings}{_legend(names)}"
        f'<div class="scroll"><table class="summary"><thead><tr><th>metric</th>{head}'
        f'<th class="chart">95% CI, axis 0 to 1<br>{axis}</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _label_sources_section(results: Sequence[Results], names: Sequence[str]) -> str:
    """What the metrics stand on, when the dataset records label sources: per system and
    cutoff, the top-K slots by label source and judged@K before and after filling."""
    rows = []
    for index, (result, name) in enumerate(zip(results, names, strict=True)):
        for key, found in sorted(result.reports.items()):
            if not key.startswith(f"{LABEL_SOURCES}@"):
                continue
            counts = ", ".join(
                f"{_e(source)} {count}" for source, count in found["sources"].items()
            )
            rows.append(
                f'<tr><th scope="row"><i class="swatch" style="background:{_color(index)}"></i>'
                f'{_e(name)}</th><td class="num">{found["k"]}</td><td>{counts}</td>'
                f'<td class="num">{_num(found["judged@k (human labels)"])}</td>'
                f'<td class="num">{_num(found["judged@k (all labels)"])}</td></tr>'
            )
    if not rows:
        return ""
    return (
        '<section id="label-sources"><h2>Label sources</h2>'
        '<p class="note">Whose labels the metrics stand on: the top-K slots of every sample '
        "by the source of their label (<i>human</i>, the LLM judge and its prompt version, or "
        "<i>unjudged</i>), and judged@K (judged slots over K, averaged over the samples) with "
        "the human labels alone, as before filling the holes, and with every label.</p>"
        '<div class="scroll"><table class="summary"><thead><tr><th>system</th><th>K</th>'
        "<th>top-K slots by label source</th><th>judged@K, human labels</th>"
        f"<th>judged@K, all labels</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "</div></section>"
    )


def _curves_section(results: Sequence[Results], names: Sequence[str]) -> str:
    per_system = [{c.name: c for c in curves(r)} for r in results]
    found = list(dict.fromkeys(name for system in per_system for name in system))
    if not found:
        return ""
    charts = []
    for name in found:
        series = [
            (index, system, system_curves[name].points)
            for index, (system, system_curves) in enumerate(zip(names, per_system, strict=True))
            if name in system_curves
        ]
        axis = _curve_axis(series)
        notes = "".join(f'<p class="overlap">{_e(note)}</p>' for note in _coinciding(series))
        charts.append(
            f'<figure><figcaption>{_e(name)}@K <span class="scale">axis {axis[0]:g} to '
            f"{axis[-1]:g}</span></figcaption>{_line_chart(name, series, axis)}{notes}</figure>"
        )
    return (
        '<section id="curves"><h2>Metric@K curves</h2>'
        '<p class="note">Mean at each cutoff; the band is the 95% bootstrap CI. Each '
        "chart's axis fits its own values (its range is beside the title), so read the "
        "ticks before comparing heights across charts. Each system has its colour and "
        "dash and later systems' points are drawn smaller, so a line that lies on another "
        "still shows; a note under a chart says where two systems' means are equal.</p>"
        f'{_legend(names, lines=True)}<div class="charts">{"".join(charts)}</div></section>'
    )


#: Strata per table of the By-stratum section: more go into further tables below, so that
#: each fits an 800 px window (a metric, a system and four strata of a mean and its CI).
STRATA_PER_TABLE = 4


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
    sizes = {s: b.sizes[s] for b in reversed(breakdowns) for s in b.strata}
    tables = "".join(
        _strata_table(breakdowns, names, labels, strata[at : at + STRATA_PER_TABLE], sizes)
        for at in range(0, len(strata), STRATA_PER_TABLE)
    )
    return (
        f'<section id="strata"><h2>By {_e(key)}</h2>'
        f'<p class="note">Samples grouped by <code>metadata.{_e(key)}</code> '
        f"(how many samples each holds in parentheses; {_e(NO_STRATUM)}: samples without "
        "it); per metric and "
        "system, the mean of the non-NA values with its 95% bootstrap CI and n = non-NA "
        "samples. A metric scored at several K is shown at the configured K (at its middle "
        f"K when it was not scored at that one). At most {STRATA_PER_TABLE} groups a table."
        f"</p>{tables}</section>"
    )


def _strata_table(
    breakdowns: Sequence[Any],
    names: Sequence[str],
    labels: Sequence[str],
    strata: Sequence[str],
    sizes: dict[str, int],
) -> str:
    """One table of the By-stratum section: every metric and system, ``strata``'s columns."""
    head = "".join(
        f'<th class="num">{_e(s)} <span class="n">({sizes[s]})</span></th>' for s in strata
    )
    rows = []
    for label in labels:
        present = [
            (index, name, breakdown)
            for index, (name, breakdown) in enumerate(zip(names, breakdowns, strict=True))
            if label in breakdown.labels
        ]
        for position, (index, name, breakdown) in enumerate(present):
            cells = []
            for stratum in strata:
                if stratum not in breakdown.strata:
                    cells.append('<td class="na">-</td>')
                    continue
                row = breakdown.row(stratum, label)
                ci = f"[{_num(row.ci[0], 3)}, {_num(row.ci[1], 3)}]" if row.ci else "-"
                cells.append(
                    f'<td class="num">{_num(row.mean)}<span class="ci">{ci} '
                    f'<span class="n">n={row.n}</span></span></td>'
                )
            first = (
                f'<th scope="rowgroup" rowspan="{len(present)}">{_e(label)}</th>'
                if position == 0
                else ""
            )
            system = f'<td><i class="swatch" style="background:{_color(index)}"></i>{_e(name)}</td>'
            rows.append(
                f'<tr class="{"first" if position == 0 else ""}">{first}{system}{"".join(cells)}</tr>'
            )
    return (
        f'<div class="scroll"><table class="strata"><thead><tr><th>metric</th><th>system</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _curve_pick(curve: Any, result: Results) -> str:
    """The label of a curve shown in the strata table: the config's default K when the
    curve has it, else its middle K."""
    default = result.provenance.get("config_default_k")
    for point in curve.points:
        if point.k == default:
            return str(point.label)
    return str(curve.points[len(curve.points) // 2].label)


def _default_k(result: Results) -> int:
    """The configured K: ``metrics.retrieval.default_k`` when the results were scored,
    the K the CLI's tables and the diagnosis column show."""
    return int(result.provenance.get("config_default_k") or DEFAULT_K)


def _diagnosis_views(result: Results) -> list[tuple[str, str, dict[str, Any]]]:
    """(PROC label, %PROC label, diagnosis parameters) per view: one at the configured K
    when the results hold PROC there (or hold a single PROC), else one per K."""
    at_k = set(labels_at(result.metrics, _default_k(result)))
    procs = [m for m in result.metrics if m.alias == PROC]
    procs = [m for m in procs if m.label in at_k] or procs
    views = []
    for proc in procs:
        k = proc.params.get("k")
        same_k = [m for m in result.metrics if m.params.get("k") == k]
        pct = next((m.label for m in same_k if m.alias == PCT_PROC), None)
        if pct is None:
            continue
        diagnosis = next((m for m in same_k if m.alias == DIAGNOSIS), None)
        views.append((proc.label, pct, dict(diagnosis.params) if diagnosis else {}))
    return views


def _diagnosis_section(results: Sequence[Results], names: Sequence[str]) -> str:
    charts = []
    for index, (name, result) in enumerate(zip(names, results, strict=True)):
        for proc_label, pct_label, params in _diagnosis_views(result):
            thresholds = (
                float(params.get("proc_threshold", 0.5)),
                float(params.get("pct_proc_threshold", 0.5)),
            )
            charts.append(
                f"<figure><figcaption>{_e(name)}: {_e(proc_label)} vs {_e(pct_label)}"
                "</figcaption>"
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
    ks = sorted({_default_k(r) for r in results})
    return (
        '<section id="diagnosis"><h2>Set-based diagnosis: PROC vs %PROC</h2>'
        '<p class="note">Each point is a sample. PROC is the retrieval ceiling (how much of '
        "the best labeled evidence the pool could put in K slots); %PROC is how much of that "
        "ceiling the top K realised. Left of the PROC threshold: a retrieval problem; below "
        "the %PROC threshold on the right: a selection (reranking) problem. Each view is at "
        f"the configured K (K = {', '.join(map(str, ks))}: the K of <code>slotwise run</code>'s "
        "tables and of the per-sample diagnosis column, so the quadrant counts are "
        "<code>diagnosis-at-k</code>'s there), or one view per K when the results hold PROC "
        "at other cutoffs only; each caption names its labels. Hollow points have "
        f"NA %PROC (drawn at 0). Samples with NA PROC are not drawn. Up to {MAX_TIPS:,} "
        "samples, hovering a point names its sample.</p>"
        f'<div class="charts">{"".join(charts)}</div></section>'
    )


def _family(comparison: Comparison, chosen: bool) -> str:
    """The Holm family in words: which metrics and pairs, and the ``slotwise compare``
    options that test the same one."""
    labels = list(dict.fromkeys(r.label for r in comparison.rows))
    pairs = len({(r.a, r.b) for r in comparison.rows})
    tests = sum(not math.isnan(r.p) for r in comparison.rows)
    option = (
        f"<code>--metrics {_e(','.join(labels))}</code>"
        if chosen
        else "no <code>--metrics</code> (every metric the files share)"
    )
    return (
        f"Holm family: {tests} test(s), the {len(labels)} metric(s) "
        f"{_e(', '.join(labels))} &times; {pairs} pair(s) of systems; "
        f"<code>slotwise compare</code> on the same files with {option} tests the same "
        "family and gives the same numbers and marks."
    )


def _comparison_section(comparison: Comparison, chosen: bool) -> str:
    columns = comparison._columns()
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    rows = []
    for row in comparison.rows:
        css = {"▲": "better", "▼": "worse"}.get(row.mark, "")
        cells = "".join(
            f'<td class="{"num" if i else ""}">{_e(c)}</td>'
            for i, c in enumerate(comparison._cells(row))
        )
        rows.append(f'<tr class="{css}">{cells}</tr>')
        if row.movers:  # a row of its own under the metric's: one line at any width
            movers = ", ".join(f"{m.id} {m.difference:+.3f}" for m in row.movers[:3])
            rows.append(
                f'<tr class="{css} movers"><td colspan="{len(columns)}" class="movers">'
                f"moved most: {_e(movers)}</td></tr>"
            )
    return (
        '<section id="comparison"><h2>Comparison</h2>'
        f'<p class="note">{_e(comparison._caption())}. Δ is the mean paired difference with '
        "its 95% bootstrap CI; d_z is Cohen's effect size for paired samples; pairs where "
        "either score is NA are left out.</p>"
        f'<p class="note family">{_family(comparison, chosen)}</p>'
        + "".join(f'<p class="note judged">{_e(line)}</p>' for line in comparison.judged_lines())
        + f'<div class="scroll"><table class="comparison"><thead><tr>{head}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>"
        f"{_forest(comparison)}{_verdict(comparison)}</section>"
    )


def _verdict(comparison: Comparison) -> str:
    """The gate's verdict with its defaults (``slotwise compare --fail-on-regression``):
    each later system against the first, a line per verdict."""
    verdict = gate(comparison)
    css = {"regressed": "regressed", "held": "held", "can't tell": "cant-tell"}
    who = len(comparison.systems) > 2
    items = "".join(
        f'<li class="{css[v.outcome]}">{_e(v.system + ": " if who else "")}{_e(v.line())}</li>'
        for v in sorted(verdict.verdicts, key=lambda v: v.outcome == "held")
    )
    return (
        f'<div class="gate-verdict"><h3>Verdict: {_e(verdict.outcome)}</h3>'
        '<p class="note">As <code>slotwise compare --fail-on-regression</code> with its '
        f"defaults gives it (margins per metric family, judged@k): {_e(verdict.rule)}.</p>"
        f"<ul>{items}</ul></div>"
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
    id and its whole text once, then per system and sample ``[k, retrieved, pool, has_output,
    slots, missed, diagnosis, error, hops]`` (``hops``: a line per hop of an agent) with slots ``[doc, pool_rank, relevance, grade, utility]``
    and misses ``[doc, pool_rank, relevance, grade]`` (trailing nulls left out), and the
    diagnosis ``[label, G_obs, G_pool, G_oracle, verdict]``."""
    docs: dict[str, int] = {}
    texts: list[str | None] = []

    def doc(doc_id: str, text: str | None = None) -> int:
        index = docs.setdefault(doc_id, len(docs))
        if index == len(texts):
            texts.append(text)
        elif texts[index] is None:
            texts[index] = text
        return index

    def view(v: SystemView) -> list[Any]:
        d = v.diagnosis
        return [
            v.k,
            v.retrieved,
            v.pool,
            int(v.has_output),
            [
                _trimmed(doc(s.id, s.text), s.pool_rank, s.relevance, s.grade, s.utility)
                for s in v.slots
            ],
            [_trimmed(doc(m.id), m.pool_rank, m.relevance, m.grade) for m in v.missed],
            None
            if d is None
            else [d.label, *map(_compact, (d.g_obs, d.g_pool, d.g_oracle)), d.verdict],
            v.error,
            [hop.line() for hop in v.hops],
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
        f'<option value="{_e(label)}"{" selected" if label == data["main"] else ""}>'
        f"{_e(label)}</option>"
        for label in data["labels"]
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


def _main_metric(results: Sequence[Results], metrics: Sequence[str] | None) -> str | None:
    """The metric the per-sample table shows first: the first of ``metrics`` (the
    compared labels) when given, else the first metric the first results were scored
    with (the first of the dataset's ``metrics:`` or of ``--metrics``) at the configured
    K when it was scored at several."""
    if metrics:
        return metrics[0]
    first = results[0]
    return next(iter(labels_at(first.metrics, _default_k(first)) or first.labels), None)


def _asset(name: str) -> str:
    """A front-end file of the page (package data in ``report_assets``), to inline."""
    return (files("engine.analysis") / "report_assets" / name).read_text(encoding="utf-8")


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
    metrics: Sequence[str] | None = None,
) -> str:
    """The report as one HTML document. ``by_key`` defaults to ``stratum`` when samples
    carry it; with two or more results the comparison uses ``test``/``alpha``/... (see
    :func:`engine.compare.compare`), which also checks that they share a dataset.
    ``metrics`` (labels) are the comparison's metrics and so its Holm family, as in
    :func:`engine.compare.compare` (default: every shared label); the first of them is the
    per-sample table's first metric (see :func:`_main_metric`). ``explanations``
    (:func:`engine.analysis.explain.explain` of the same results) open under a row of
    the per-sample table when it is clicked."""
    results = list(results)
    if not results:
        raise ValueError("build_report needs at least one results")
    names = list(names) if names is not None else [f"system {i + 1}" for i in range(len(results))]
    if len(names) != len(results):
        raise ValueError(f"names must be {len(results)} strings, got {names!r}")
    comparison = (
        compare(
            results,
            names=names,
            metrics=metrics,
            test=test,
            alpha=alpha,
            resamples=resamples,
            seed=seed,
        )
        if len(results) > 1
        else None
    )
    key = by_key if by_key is not None else _default_key(results)
    first = results[0]
    title = title or f"slotwise report: {first.dataset_name or 'dataset'}"
    sections = [
        ("summary", "Summary", _summary_section(results, names)),
        ("label-sources", "Label sources", _label_sources_section(results, names)),
        (
            "comparison",
            "Comparison",
            _comparison_section(comparison, bool(metrics)) if comparison else "",
        ),
        ("curves", "Metric@K", _curves_section(results, names)),
        ("strata", f"By {key}", _strata_section(results, names, key) if key else ""),
        ("diagnosis", "Diagnosis", _diagnosis_section(results, names)),
    ]
    data = _sample_data(results, names, key)
    data["explain"] = _explain_data(explanations, data["ids"]) if explanations else None
    data["maxRows"] = MAX_ROWS
    data["main"] = _main_metric(results, metrics)
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
    payload = _script_json(data)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f'<header><h1>{_e(title)}</h1><div class="meta">{meta}</div></header>'
        f"<nav>{nav}</nav><main>{''.join(body for _, _, body in sections)}</main>"
        f'<script type="application/json" id="report-data">{payload}</script>'
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def _script_json(data: Any) -> str:
    """``data`` as JSON that no string in it can end or reopen the ``<script>`` it sits in
    (``</script>``, ``<!--<script>``): every ``<``, ``>`` and ``&`` written as a JSON
    escape, which ``JSON.parse`` reads back as the character."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def write_report(results: Sequence[Results], path: str | os.PathLike[str], **options: Any) -> str:
    """Write :func:`build_report` to ``path`` (atomically); returns the HTML."""
    text = build_report(results, **options)
    atomic_write(path, text)
    return text
