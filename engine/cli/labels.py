"""The ``slotwise labels`` commands: hand a drawn sample (``slotwise sample``) to people
and read their grades back.

- ``labels export DATASET --sample SAMPLE --runs OUTPUTS...``: the pairs people must
  grade (for a query unit, every pair the runs' top ``--depth`` pool for it, as
  ``slotwise annotate --runs`` pools them; for a pair unit, the pair), with the question,
  the passage and the grade scale, as CSV, JSONL or Label Studio's import JSON with its
  labelling config.
- ``labels import DATASET ANSWERS... --sample SAMPLE --runs OUTPUTS...``: the answers
  (the handout filled in, Label Studio's export) checked row by row against the same
  pairs, settled, and written as the human-labelled dataset ``--human`` and ``run
  --ppi`` read, with each label's provenance.

Formats: :mod:`engine.io.label_exchange`; the pairs, tasks and human labels:
:mod:`engine.analysis.handout`. :func:`add` adds the commands to the program's
subparsers and returns their handler.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.common import Handler, UsageError, configured_engine, output_file, positive_int
from engine.errors import InputError
from engine.io.config import CONFIG_FILENAME

if TYPE_CHECKING:
    from engine.analysis.handout import Handout
    from engine.io.label_exchange import Resolved

__all__ = ["add"]

EXIT_USAGE = 2


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dataset",
        help=f"the questions: a dataset declared in {CONFIG_FILENAME}, or a .json/.yaml/.jsonl "
        "file (the one the sample was drawn from)",
    )
    parser.add_argument(
        "--sample",
        type=Path,
        required=True,
        help="the drawn sample, SAMPLE.jsonl from `slotwise sample` (its design "
        "SAMPLE.design.json beside it)",
    )
    parser.add_argument(
        "--runs",
        nargs="+",
        type=Path,
        metavar="OUTPUTS",
        help="the runs whose top --depth documents pool a drawn query's pairs, as `slotwise "
        "annotate --runs` pools them (outputs files; their passages' texts are the handout's)",
    )
    parser.add_argument("--depth", type=positive_int, default=10, help="pool depth per run (10)")
    parser.add_argument(
        "--scale",
        choices=("umbrela", "binary"),
        default="umbrela",
        help="the grade scale: umbrela (0-3, UMBRELA's wording, the judge's scale; default) "
        "or binary (0-1)",
    )


def add(commands: Any) -> dict[str, Handler]:
    """Add ``labels`` (``export``, ``import``) to ``commands``; returns its handler."""
    labels = commands.add_parser(
        "labels",
        help="hand a drawn sample to annotators (CSV, JSONL, Label Studio) and read their "
        "grades back as human labels",
        description="export: write the pairs people must grade for a drawn sample (`slotwise "
        "sample`), with the question, the passage and the grade scale. import: read their "
        "answers, check every row (unknown ids, rows outside the sample, grades off the "
        "scale, ungraded pairs, annotators who disagree: each named with file and line or "
        "task; exit 2 with the full list, nothing dropped) and write the human labels as a "
        "dataset for `compare --ppi ... --human` and `run --ppi`.",
    )
    actions = labels.add_subparsers(dest="labels_command", required=True)
    export = actions.add_parser(
        "export",
        help="write the pairs to grade: CSV, JSONL or Label Studio's import JSON",
        description="Write one task a pair people must grade: for a query unit every pair "
        "the runs pool for it (all of them must be graded for the query to count as "
        "labelled), for a pair unit the pair. Each task has the query and document ids, the "
        "stratum, the question, the passage (from the runs' texts, else --corpus) and the "
        "scale; the judge's grade is not shown. --format label-studio writes the tasks "
        '([{"data": {...}}]) and OUTPUT.label-config.xml, the labelling config to paste '
        "into the project.",
    )
    _common(export)
    export.add_argument(
        "--corpus",
        type=Path,
        help="passages' texts for pairs no run gave a text for: JSONL {id, text} a line",
    )
    export.add_argument(
        "--format",
        choices=("csv", "jsonl", "label-studio"),
        help="default: by --output's suffix (.csv, .jsonl; .json: label-studio)",
    )
    export.add_argument("--output", type=output_file, required=True, help="the handout to write")
    read = actions.add_parser(
        "import",
        help="read annotators' grades (CSV, JSONL, Label Studio's export) into a "
        "human-labelled dataset",
        description="Read the answers: the handout's CSV or JSONL with grade (and "
        "annotator; else the file's name) filled in, or Label Studio's JSON export (each "
        "annotation's grade choice; completed_by is the annotator; a skipped task is counted). "
        "Every problem is listed with file, line or task, ids and reason, and nothing is "
        "written (exit 2). Annotators who give one pair different grades are a problem unless "
        "--resolve says how to settle them; every annotator's grade is kept in "
        "metadata.human_labels either way.",
    )
    _common(read)
    read.add_argument("answers", nargs="+", type=Path, help="the answers files")
    read.add_argument(
        "--resolve",
        choices=("none", "majority", "mean", "median", "min", "max"),
        default="none",
        help="how to settle annotators who disagree: none (default: each disagreement is a "
        "problem), majority (the most common grade; a tie is a problem), mean, median, min, max",
    )
    read.add_argument(
        "--output",
        type=output_file,
        required=True,
        help="the human-labelled dataset (.yaml/.json/.jsonl)",
    )
    return {"labels": _labels}


def _labels(args: argparse.Namespace) -> int:
    if args.labels_command == "export":
        return _export(args)
    return _import(args)


def _handout(args: argparse.Namespace) -> Handout:
    """The handout of --sample: the dataset's samples, the drawn pairs, the runs' pool."""
    from engine.analysis.handout import check_sample, handout
    from engine.analysis.sampling import read_sample
    from engine.annotate.holes import pool
    from engine.io.sources import read_dataset, read_outputs

    engine = configured_engine(getattr(args, "config", None))
    declared = engine.config.datasets.get(args.dataset)
    path = declared.path if declared is not None else Path(args.dataset)
    _, columns = read_dataset(path)
    drawn = read_sample(args.sample)
    check_sample(columns, drawn, args.sample, path, runs=bool(args.runs))
    pooled = None
    if args.runs:
        pooled = pool(columns, [read_outputs(p) for p in args.runs], args.depth)
    return handout(columns, drawn, args.sample, pooled)


def _empty_line(frame: Handout, written: bool) -> str | None:
    """The drawn queries no run retrieved anything for, named (None: there are none)."""
    if not frame.empty:
        return None
    named = ", ".join(frame.empty[:10]) + (" ..." if len(frame.empty) > 10 else "")
    then = "written without labels" if written else "no task"
    return f"{_queries(len(frame.empty))} drawn with no pooled pair, nothing to grade ({then}): {named}"


def _queries(count: int) -> str:
    return f"{count} {'query' if count == 1 else 'queries'}"


def _format(args: argparse.Namespace) -> str:
    """``--format``, else the one ``--output``'s suffix names."""
    if args.format is not None:
        return str(args.format)
    by_suffix = {".csv": "csv", ".jsonl": "jsonl", ".json": "label-studio"}
    found = by_suffix.get(args.output.suffix.lower())
    if found is None:
        raise UsageError(
            f"--output {args.output}: name the format with --format (csv, jsonl, label-studio)"
        )
    return found


def _export(args: argparse.Namespace) -> int:
    from engine.annotate.records import question_of
    from engine.annotate.synthesize import read_corpus
    from engine.io.label_exchange import SCALES, write_handout

    frame = _handout(args)
    questions = {query: question_of(frame.samples[query]) for query in frame.queries}
    corpus = {p.id: p.text for p in read_corpus(args.corpus)} if args.corpus else None
    tasks = frame.tasks(questions, corpus)
    written = write_handout(args.output, tasks, SCALES[args.scale], _format(args))
    line = _empty_line(frame, written=False)
    if line:
        print(line, file=sys.stderr)
    queries = len({t.query_id for t in tasks})
    print(
        f"wrote {', '.join(map(str, written))} ({len(tasks)} pairs of {_queries(queries)} "
        f"drawn, to grade on the {args.scale} scale)",
        file=sys.stderr,
    )
    return 0


def _import(args: argparse.Namespace) -> int:
    from engine.analysis.handout import human_samples
    from engine.io.documents import parse_samples, write_samples
    from engine.io.label_exchange import SCALES, read_answers, resolve

    frame = _handout(args)
    scale = SCALES[args.scale]
    answers, problems = [], []
    for path in args.answers:
        found, bad = read_answers(path, scale)
        answers += found
        problems += bad
    try:
        resolved = resolve(
            answers,
            frame.pairs,
            queries=frame.samples,
            sampled=frame.queries,
            how=args.resolve,
            unit=frame.unit,
        )
    except InputError as error:
        problems += error.problems
    if problems:
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        print(
            f"slotwise: error: cannot read the human labels: {len(problems)} problem(s), listed "
            "above; nothing written",
            file=sys.stderr,
        )
        return EXIT_USAGE
    samples = human_samples(resolved, frame, scale)
    parse_samples((raw, None) for raw in samples)
    write_samples(args.output, samples, name=args.output.stem)
    for line in [*resolved.lines(), *_panel(resolved), _empty_line(frame, written=True)]:
        if line:
            print(line, file=sys.stderr)
    print(f"wrote {args.output} ({len(samples)} samples)", file=sys.stderr)
    return 0


def _panel(resolved: Resolved) -> list[str]:
    """The annotators' agreement among themselves on the pairs two or more graded:
    Krippendorff's alpha of all, Cohen's kappa of each two (none with one annotator)."""
    from engine.analysis.agreement import LEVELS
    from engine.analysis.handout import panel_agreement

    found = panel_agreement(resolved)
    if found is None:
        return []
    number = {key: "undefined" if v is None else f"{v:.4f}" for key, v in found.alpha.items()}
    lines = [
        f"agreement among the {len(found.names)} annotators on the {found.pairs:,} pairs graded "
        "by two or more: Krippendorff's alpha  " + "  ".join(f"{lv} {number[lv]}" for lv in LEVELS)
    ]
    for first, second, pairs, _, quadratic in found.pairwise:
        kappa = "undefined" if quadratic is None else f"{quadratic:.4f}"
        lines.append(f"  {first} ~ {second}: quadratic kappa {kappa} on {pairs:,} pairs")
    return lines
