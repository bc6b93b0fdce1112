"""The ``slotwise`` command line. Exit codes: 0 success, 2 bad input or usage,
1 internal error (a plugin that fails while scoring, a bug)."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from engine import columnar, schemas, trec
from engine.annotate_cli import add_commands as add_annotate_commands
from engine.api import Engine
from engine.config import CONFIG_FILENAME
from engine.console import print_blocks
from engine.dataset import load_samples, write_samples
from engine.errors import InputError, MetricScoreError, SlotwiseError
from engine.fileio import atomic_write, read_document, read_jsonl
from engine.logs import configure
from engine.meta_cli import add_commands
from engine.metric import metric_label, parse_spec
from engine.outputs import RESULTS_SCHEMA_ID, load_raw_outputs
from engine.report_cli import add_commands as add_report_commands
from engine.report_cli import parse_cutoffs, run_tables
from engine.results import Results

__all__ = ["main"]

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit with status 2 through our own error path."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def split_specs(values: Sequence[str]) -> list[str]:
    """Split ``--metrics`` values on commas outside parentheses."""
    specs: list[str] = []
    for value in values:
        depth, current = 0, ""
        for char in value:
            depth += {"(": 1, ")": -1}.get(char, 0)
            if char == "," and depth == 0:
                specs.append(current.strip())
                current = ""
            else:
                current += char
        specs.append(current.strip())
    return [s for s in specs if s]


def _build_parser() -> argparse.ArgumentParser:
    from engine import __version__

    parser = _Parser(
        prog="slotwise", description="Evaluate what a retriever put into an LLM's K prompt slots."
    )
    parser.add_argument("--version", action="version", version=f"slotwise {__version__}")
    parser.add_argument(
        "--config", type=Path, help=f"configuration file (default: the nearest {CONFIG_FILENAME})"
    )
    parser.add_argument(
        "--log-format",
        choices=("console", "json"),
        default="console",
        help="how log events are written to stderr",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more log events (-vv: debug, and tracebacks on internal errors)",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser(
        "run",
        help="score outputs against a dataset",
        description="Score a system's outputs against a dataset.",
    )
    run.add_argument(
        "dataset",
        nargs="?",
        help=f"a dataset declared in {CONFIG_FILENAME}, or a .yaml/.json/.jsonl file (default: the only declared dataset)",
    )
    run.add_argument(
        "--outputs",
        type=Path,
        help="outputs file: JSON {id: actual_output}, JSONL {id, actual_output} lines, or a results JSON that kept its outputs",
    )
    run.add_argument(
        "--metrics",
        action="append",
        default=[],
        help="comma-separated metric specs, e.g. retrieval-ndcg-at-k@10,retrieval-mrr (default: the dataset's declared metrics)",
    )
    run.add_argument(
        "--k",
        type=parse_cutoffs,
        help="cutoff for every metric whose spec gives no k (a sample's metadata.k still wins); "
        "several, comma-separated (1,3,5,10), evaluate each such metric at every K: a curve",
    )
    run.add_argument(
        "--by",
        metavar="KEY",
        help="table format: also break the results down by metadata KEY (e.g. stratum)",
    )
    run.add_argument(
        "--format",
        choices=("table", "json", "csv", "parquet"),
        default="table",
        help="table: summary; json: results document; csv: per-sample scores; parquet: "
        "per-sample scores as a Parquet file (needs --output and slotwise[columnar])",
    )
    run.add_argument(
        "--output", type=Path, help="write the result here (atomically) instead of stdout"
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="duplicate retrieved ids and outputs for unknown samples are errors",
    )

    run.add_argument(
        "--qrels", type=Path, help="a TREC qrels file as the dataset (instead of DATASET)"
    )
    run.add_argument(
        "--run",
        type=Path,
        dest="trec_run",
        help="a TREC run file as the outputs (instead of --outputs)",
    )
    run.add_argument(
        "--stream",
        action="store_true",
        help="score in chunks with bounded memory, reading JSONL/TREC/Parquet inputs as a "
        "stream (two passes); json/csv rows are written as they are scored; no CI",
    )
    run.add_argument(
        "--chunk-size",
        type=int,
        metavar="N",
        help="samples per chunk for --stream or --executor (default 16384, rounded up to a multiple of 64)",
    )
    run.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where chunks are scored: this process, or a Ray cluster (RAY_ADDRESS; needs slotwise[ray])",
    )

    listing = commands.add_parser(
        "metrics",
        help="list installed metrics",
        description="List installed metrics; broken plugins are listed with the reason.",
    )
    listing.add_argument("--format", choices=("table", "json"), default="table")

    trec_command = commands.add_parser(
        "trec",
        help="convert between TREC qrels/run files and slotwise datasets/outputs",
        description="Convert TREC qrels and runs to a slotwise dataset and outputs file, or back.",
    )
    direction = trec_command.add_subparsers(dest="direction", required=True, parser_class=_Parser)
    to_slotwise = direction.add_parser("import", help="qrels (+ run) -> dataset (+ outputs)")
    to_slotwise.add_argument("qrels", type=Path)
    to_slotwise.add_argument("run", type=Path, nargs="?")
    to_slotwise.add_argument(
        "--dataset-out",
        type=Path,
        required=True,
        help="a .jsonl, .yaml or .json dataset file to write",
    )
    to_slotwise.add_argument(
        "--outputs-out", type=Path, help="a .json outputs file to write (needs RUN)"
    )
    to_trec = direction.add_parser("export", help="dataset (+ outputs) -> qrels (+ run)")
    to_trec.add_argument(
        "dataset", help=f"a dataset declared in {CONFIG_FILENAME}, or a dataset file"
    )
    to_trec.add_argument("--outputs", type=Path, help="outputs to write as a run")
    to_trec.add_argument("--qrels-out", type=Path, required=True)
    to_trec.add_argument("--run-out", type=Path, help="the run file to write (needs --outputs)")
    to_trec.add_argument("--tag", default="slotwise", help="the run tag column")

    validate = commands.add_parser(
        "validate",
        help="check a file against slotwise's schemas",
        description="Validate a dataset, outputs, config or results file; every problem is listed.",
    )
    validate.add_argument("path", type=Path)
    validate.add_argument(
        "--kind",
        choices=("dataset", "outputs", "config", "results"),
        help="what the file is (default: guessed from its name and content)",
    )
    _COMMANDS.update(add_commands(commands))
    _COMMANDS.update(add_report_commands(commands))
    _COMMANDS.update(add_annotate_commands(commands))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``slotwise`` program; returns the exit code."""
    parser = _build_parser()
    verbose = 0
    try:
        args = parser.parse_args(argv)
        verbose = args.verbose
        configure(
            args.log_format, {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
        )
        return int(_COMMANDS[args.command](args))
    except SystemExit as exit_:  # --help, --version
        return int(exit_.code or 0)
    except _UsageError as error:
        print(f"slotwise: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except MetricScoreError as error:
        _report(error, verbose)
        return EXIT_INTERNAL
    except SlotwiseError as error:
        print(f"slotwise: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("slotwise: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as C tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as error:
        _report(error, verbose, internal=True)
        return EXIT_INTERNAL


def _report(error: BaseException, verbose: int, internal: bool = False) -> None:
    prefix = "internal error" if internal else "error"
    print(
        f"slotwise: {prefix}: {type(error).__name__ + ': ' if internal else ''}{error}",
        file=sys.stderr,
    )
    if verbose >= 2:
        traceback.print_exception(error, file=sys.stderr)
    else:
        print("(run with -vv for the traceback)", file=sys.stderr)


def _engine(args: argparse.Namespace) -> Engine:
    return Engine(config=args.config)


def _run(args: argparse.Namespace) -> int:
    engine = Engine(config=args.config, executor=args.executor)
    if args.stream:
        return _run_stream(engine, args)
    if args.qrels is not None:
        if args.dataset is not None:
            raise _UsageError("give either DATASET or --qrels, not both")
        qrels = trec.read_qrels(args.qrels)
        dataset = engine.dataset(samples=trec.qrels_to_samples(qrels), name=args.qrels.stem)
    else:
        dataset = engine.dataset(_dataset_name(engine, args.dataset))
    specs = split_specs(args.metrics) or list(dataset.metrics)
    if not specs:
        raise _UsageError(
            "no metrics: pass --metrics or declare them for the dataset in " + CONFIG_FILENAME
        )
    resolved = (_with_k(engine, spec, k) for spec in specs for k in args.k or [None])
    metrics = list({metric_label(m): m for m in resolved}.values())
    if args.trec_run is not None and args.outputs is not None:
        raise _UsageError("give either --outputs or --run, not both")
    outputs: Any = args.outputs or dataset.outputs
    if args.trec_run is not None:
        outputs = trec.run_to_outputs(trec.read_run(args.trec_run))
    if outputs is None:
        raise _UsageError(
            "no outputs: pass --outputs FILE (or --run FILE) or declare `outputs:` for the dataset"
        )
    chunked = args.chunk_size if args.chunk_size is not None or args.executor != "local" else None
    results = dataset.with_metrics(metrics).evaluate(
        outputs, strict=args.strict, chunk_size=chunked
    )
    _emit(results, args.format, args.output, by=args.by)
    return EXIT_OK


def _run_stream(engine: Engine, args: argparse.Namespace) -> int:
    """``run --stream``: inputs read as streams, rows written as they are scored."""
    from engine.streaming import DEFAULT_CHUNK_SIZE, evaluate_stream

    if args.format == "parquet":
        raise _UsageError("--stream writes table, json or csv; leave out --stream for parquet")
    if args.by is not None:
        raise _UsageError("--by needs every sample in memory; leave out --stream")
    if (args.qrels is None) == (args.dataset is None):
        raise _UsageError("--stream needs a DATASET file or --qrels")
    if (args.trec_run is None) == (args.outputs is None):
        raise _UsageError("--stream needs --outputs FILE or --run FILE")
    specs = split_specs(args.metrics)
    if not specs:
        raise _UsageError("no metrics: pass --metrics")
    resolved = (_with_k(engine, spec, k) for spec in specs for k in args.k or [None])
    metrics = list({metric_label(m): m for m in resolved}.values())
    rows = args.format in ("json", "csv")
    results = evaluate_stream(
        metrics,
        dataset=args.dataset,
        qrels=args.qrels,
        outputs=args.outputs,
        run=args.trec_run,
        engine=engine,
        chunk_size=args.chunk_size or DEFAULT_CHUNK_SIZE,
        strict=args.strict,
        scores=(args.output or sys.stdout) if rows else None,
        scores_format=args.format if rows else None,
    )
    if rows:
        if args.output is not None:
            print(f"wrote {args.output}", file=sys.stderr)
        return EXIT_OK
    _emit(results, "table", args.output)  # type: ignore[arg-type]
    return EXIT_OK


def _dataset_name(engine: Engine, name: str | None) -> str:
    """The dataset named on the command line, or the only one declared."""
    if name is not None:
        return name
    declared = list(engine.config.datasets)
    if len(declared) != 1:
        hint = (
            f" (declared: {', '.join(declared)})"
            if declared
            else f" (no {CONFIG_FILENAME} declares one)"
        )
        raise _UsageError("name a dataset" + hint)
    return declared[0]


def _with_k(engine: Engine, spec: str, k: int | None) -> Any:
    """The metric for ``spec``, taking ``--k`` when the spec gives no k of its own."""
    parsed = parse_spec(spec)
    cls = engine.registry.get(parsed.alias)
    if k is not None and "k" not in parsed.params and any(f.name == "k" for f in attrs.fields(cls)):
        return engine.metric(spec, k=k)
    return engine.metric(spec)


def _emit(results: Results, fmt: str, output: Path | None, by: str | None = None) -> None:
    if fmt == "table":
        tables = run_tables(results, by) if isinstance(results, Results) else [results.table()]
        lines = [*_diagnostic_lines(results), *results.report_lines()]
        if output is None:
            print_blocks(tables, lines)
        else:
            atomic_write(output, print_blocks(tables, lines, file=io.StringIO()))
        return
    if fmt == "parquet":
        if output is None:
            raise _UsageError("--format parquet writes a file: add --output FILE.parquet")
        columnar.write_frame(results.to_pandas(), output)
        print(f"wrote {output}", file=sys.stderr)
        return
    text = results.to_json() if fmt == "json" else results.to_csv()
    if output is None:
        sys.stdout.write(text)
    else:
        atomic_write(output, text)
        print(f"wrote {output}", file=sys.stderr)


def _diagnostic_lines(results: Results) -> list[str]:
    d = results.diagnostics
    lines = []
    if d.missing_outputs:
        lines.append(
            f"{len(d.missing_outputs)} sample(s) had no output and were scored as empty rankings: {_few(d.missing_outputs)}"
        )
    if d.duplicate_ids_dropped:
        lines.append(
            f"{d.duplicate_ids_dropped} duplicate retrieved id(s) dropped (first occurrence kept)"
        )
    if d.no_relevant:
        lines.append(
            f"{len(d.no_relevant)} sample(s) have no relevant document: {_few(d.no_relevant)}"
        )
    if d.unknown_output_ids:
        lines.append(
            f"{len(d.unknown_output_ids)} output(s) for ids not in the dataset were ignored: {_few(d.unknown_output_ids)}"
        )
    if d.errors:
        lines.append(f"{len(d.errors)} sample(s) failed and are NA: {_few(list(d.errors))}")
    return lines


def _few(ids: Sequence[str], count: int = 5) -> str:
    shown = ", ".join(ids[:count])
    return shown + (f", ... ({len(ids) - count} more)" if len(ids) > count else "")


def _metrics(args: argparse.Namespace) -> int:
    infos = _engine(args).metrics()
    if args.format == "json":
        print(json.dumps([attrs.asdict(i) for i in infos], indent=2))
        return EXIT_OK
    rows = []
    for info in infos:
        dist = f"{info.distribution or '?'} {info.version or ''}".strip()
        text = f"BROKEN: {info.error}" if info.error else info.description or ""
        rows.append((info.alias, info.family or "", dist, text))
    if not sys.stdout.isatty():  # one metric per line, for grep, cut and awk
        for row in rows:
            print("\t".join(cell.replace("\t", " ").replace("\n", " ") for cell in row))
        return EXIT_OK
    from rich.table import Table

    table = Table(title="installed metrics", title_justify="left")
    for column in ("alias", "family", "distribution", "description"):
        table.add_column(column)
    for alias, family, dist, text in rows:
        table.add_row(alias, family, dist, text, style="red" if text.startswith("BROKEN") else None)
    print_blocks([table])
    return EXIT_OK


def _trec(args: argparse.Namespace) -> int:
    if args.direction == "import":
        if args.outputs_out is not None and args.run is None:
            raise _UsageError("--outputs-out needs a RUN file")
        samples = trec.qrels_to_samples(trec.read_qrels(args.qrels))
        write_samples(args.dataset_out, samples, name=args.qrels.stem)
        written = [f"{args.dataset_out} ({len(samples)} samples)"]
        if args.run is not None and args.outputs_out is not None:
            outputs = trec.run_to_outputs(trec.read_run(args.run))
            atomic_write(args.outputs_out, json.dumps(outputs, indent=1) + "\n")
            written.append(f"{args.outputs_out} ({len(outputs)} outputs)")
    else:
        if args.run_out is not None and args.outputs is None:
            raise _UsageError("--run-out needs --outputs")
        dataset = _engine(args).dataset(args.dataset)
        qrels = trec.samples_to_qrels(dataset.samples)
        trec.write_qrels(args.qrels_out, qrels)
        written = [f"{args.qrels_out} ({len(qrels)} queries)"]
        if args.outputs is not None and args.run_out is not None:
            run = trec.outputs_to_run(load_raw_outputs(args.outputs))
            trec.write_run(args.run_out, run, tag=args.tag)
            written.append(f"{args.run_out} ({len(run)} queries)")
    print("wrote " + ", ".join(written))
    return EXIT_OK


def _guess_kind(path: Path) -> str:
    if path.name == CONFIG_FILENAME:
        return "config"
    if path.suffix.lower() == ".jsonl":
        for _, first in read_jsonl(path):
            return "outputs" if isinstance(first, dict) and "actual_output" in first else "dataset"
        return "dataset"
    document = read_document(path)
    if isinstance(document, dict) and document.get("schema") == RESULTS_SCHEMA_ID:
        return "results"
    if isinstance(document, dict) and "samples" in document:
        return "dataset"
    return "outputs" if path.suffix.lower() == ".json" else "dataset"


def _validate(args: argparse.Namespace) -> int:
    path: Path = args.path
    kind = args.kind or _guess_kind(path)
    count = ""
    if kind == "dataset":
        _, samples = load_samples(path)
        count = f" ({len(samples)} samples)"
    elif kind == "outputs":
        count = f" ({len(load_raw_outputs(path))} outputs)"
    elif kind == "config":
        from engine.config import Config

        Config.load(path)
    else:
        problems = list(schemas.problems(read_document(path), "results", source=str(path)))
        if problems:
            raise InputError(problems, summary=f"invalid results {path}")
    print(f"{path}: valid {kind}{count}")
    return EXIT_OK


_COMMANDS = {"run": _run, "metrics": _metrics, "trec": _trec, "validate": _validate}

if __name__ == "__main__":
    sys.exit(main())
