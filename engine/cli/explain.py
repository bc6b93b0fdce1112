"""``slotwise explain``: why a sample scored what it did, system by system: the top K
slots, the relevant documents missed and where they sat in the pool, the scores and the
set-based diagnosis."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.common import (
    Handler,
    UsageError,
    configured_engine,
    emit,
    explain_inputs,
    load_results,
    names_option,
    output_or_stdout,
    positive_int,
)
from engine.evaluation.tables import printable

if TYPE_CHECKING:
    from engine.analysis.explain import Explanation, Missed, Slot, SystemView

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    parser = commands.add_parser(
        "explain",
        help="why a sample scored what it did: each system's slots, misses and diagnosis",
        description="For a sample: each system's top K slots (rank, id, relevance label, "
        "grade, utility, the relevance label's source when the dataset records it, pool rank, "
        "snippet), the relevant documents it missed and where "
        "they sat in its pool, its scores and, for set-based metrics, G_obs, G_pool and "
        "G_oracle with the diagnosis. Needs the outputs each results file scored (kept in "
        "it, or --outputs) and the dataset (--dataset, or the one slotwise.yaml declares "
        "under the results' dataset name).",
    )
    parser.add_argument("results", type=Path, nargs="+", help="results JSON files (baseline first)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--sample", action="append", metavar="ID", help="a sample id (repeatable)")
    which.add_argument(
        "--worst",
        type=positive_int,
        metavar="N",
        help="the N samples where --metric is worst: its lowest values (its highest for a "
        "metric where lower is better, e.g. harm-at-k); with two or more files, the largest "
        "changes for the worse from the first file to the last",
    )
    parser.add_argument("--metric", metavar="LABEL", help="the metric label --worst ranks by")
    explain_inputs(parser)
    parser.add_argument(
        "--k",
        type=positive_int,
        help="the cutoff to show (default: the results' default K; a sample's metadata.k wins)",
    )
    names_option(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--output", type=output_or_stdout, help="write here instead of stdout (- : stdout)"
    )
    return {"explain": _explain}


def _explain(args: argparse.Namespace) -> int:
    from engine.analysis.explain import explain, worst

    if args.worst is not None and args.metric is None:
        raise UsageError("--worst needs --metric LABEL: the metric to rank the samples by")
    results, names = load_results(args.results, args.names)
    lines: list[str] = []
    ids = args.sample
    if args.worst is not None:
        picked = worst(results, args.metric, args.worst)
        ids = [sample_id for sample_id, _ in picked]
        better = next(m.higher_is_better for m in results[0].metrics if m.label == args.metric)
        lines += [_worst_line(args.metric, picked, names, better), ""]
    found = explain(
        results,
        ids,
        names=names,
        dataset=args.dataset,
        outputs=args.outputs,
        k=args.k,
        engine=configured_engine(args.config),
    )
    if args.format == "json":
        document = [e.to_dict() for e in found]
        emit(json.dumps(document, indent=2, ensure_ascii=False) + "\n", args.output)
        return 0
    for explanation in found:
        lines += [*explanation_lines(explanation), ""]
    emit("\n".join(map(printable, lines)), args.output)
    return 0


def _worst_line(
    label: str, picked: Sequence[tuple[str, float]], names: Sequence[str], higher_is_better: bool
) -> str:
    """The heading of ``--worst``: worst by the metric's direction (the highest values of
    a metric where lower is better)."""
    if len(names) == 1:
        extreme = "lowest" if higher_is_better else "highest"
        what, shown = f"{extreme} {label}", ", ".join(f"{i} {v:.4f}" for i, v in picked)
    else:
        change = "drops" if higher_is_better else "rises (lower is better)"
        what = f"largest {change} in {label} ({names[-1]} - {names[0]})"
        shown = ", ".join(f"{i} {v:+.4f}" for i, v in picked)
    return f"{what}: {shown or 'none'}"


# -- text ----------------------------------------------------------------------------------


def explanation_lines(explanation: Explanation) -> list[str]:
    """The explanation as text: the question, each system's slots, misses and diagnosis,
    then the scores side by side."""
    from engine.evaluation.label_sources import SOURCES_KEY

    lines = [f"{explanation.sample_id}: {explanation.question}"]
    if explanation.metadata:
        lines.append(
            "  "
            + " ".join(
                f"{key}={value}"
                for key, value in explanation.metadata.items()
                if key != SOURCES_KEY  # shown per slot
            )
        )
    kinds = _label_kinds(explanation.systems)
    for index, system in enumerate(explanation.systems):
        lines += ["", _heading(system)]
        if system.error is not None:
            lines.append(f"  (the system failed: {system.error}; NA, an error row)")
        elif not system.has_output:
            lines.append("  (no output: scored as an empty ranking)")
        elif system.slots:
            lines += _slot_table(system.slots, kinds)
        lines.append("  missed: " + ("; ".join(_missed(m) for m in system.missed) or "none"))
        lines += [f"  {hop.line()}" for hop in system.hops]
        if index:
            moved_in, moved_out = explanation.moved(index)
            base = explanation.systems[0].name
            lines.append(
                f"  vs {base}: moved in {', '.join(moved_in) or 'none'}; "
                f"moved out {', '.join(moved_out) or 'none'}"
            )
        if system.diagnosis is not None:
            d = system.diagnosis
            lines.append(
                f"  {d.label}: {d.verdict or 'NA'} "
                f"(G_obs {d.g_obs:.4g}, G_pool {d.g_pool:.4g}, G_oracle {d.g_oracle:.4g})"
            )
    return [*lines, "", *_score_table(explanation.systems)]


def _label_kinds(systems: Sequence[SystemView]) -> list[str]:
    """The label columns some slot or miss of this sample has a value for."""
    slots = [slot for s in systems for slot in s.slots]
    entries = [*slots, *(m for s in systems for m in s.missed)]
    kinds = [k for k in ("relevance", "grade") if any(getattr(e, k) is not None for e in entries)]
    return kinds + (["utility"] if any(s.utility is not None for s in slots) else [])


def _heading(system: SystemView) -> str:
    pool = "the ranking is the pool" if system.pool is None else f"pool of {system.pool}"
    return f"{system.name}: top {system.k} of {system.retrieved} retrieved, {pool}"


_HEADERS = {"relevance": "rel", "grade": "grade", "utility": "utility"}


def _slot_table(slots: Sequence[Slot], kinds: Sequence[str]) -> list[str]:
    sourced = any(s.source is not None for s in slots)
    header = [
        "rank",
        "id",
        *(_HEADERS[k] for k in kinds),
        *(["source"] if sourced else []),
        "pool",
        "text",
    ]
    rows = [
        [
            str(s.rank),
            s.id,
            *(_value(getattr(s, k)) for k in kinds),
            *([s.source or "-"] if sourced else []),
            _value(s.pool_rank),
            s.snippet or "-",
        ]
        for s in slots
    ]
    left = {1, len(header) - 1, *([header.index("source")] if sourced else [])}
    return ["  " + line for line in _aligned([header, *rows], left)]


def _score_table(systems: Sequence[SystemView]) -> list[str]:
    names = [s.name for s in systems]
    delta = len(systems) > 1
    rows = [["scores", *names, *(["Δ"] if delta else [])]]
    for label in systems[0].scores:
        values = [s.scores.get(label) for s in systems]
        row = [label, *("NA" if v is None else f"{v:.4f}" for v in values)]
        if delta:
            first, last = values[0], values[-1]
            row.append("NA" if first is None or last is None else f"{last - first:+.4f}")
        rows.append(row)
    return _aligned(rows, {0})


def _aligned(rows: Sequence[Sequence[str]], left: set[int]) -> list[str]:
    """Rows as lines, columns two spaces apart: those in ``left`` left-aligned, the others
    right-aligned; the last column is not padded (control characters escaped first, as
    they are shown)."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    last = len(widths) - 1
    return [
        "  ".join(
            cell if i == last and i in left else cell.ljust(w) if i in left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def _missed(missed: Missed) -> str:
    labels = ", ".join(
        f"{name} {_value(value)}"
        for name, value in (("rel", missed.relevance), ("grade", missed.grade))
        if value is not None
    )
    where = "not in the pool" if missed.pool_rank is None else f"at pool rank {missed.pool_rank}"
    return f"{missed.id} ({labels}) {where}"


def _value(value: float | None) -> str:
    """A label as text: integers without a decimal point, '-' when absent."""
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"
