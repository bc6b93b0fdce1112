"""``slotwise run``: score a system's outputs against a dataset (or a TREC run against
qrels), in memory, in chunks, or streamed with bounded memory."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.cli import process
from engine.cli.common import (
    Handler,
    UsageError,
    add_ray_options,
    configured_engine,
    emit,
    emit_tables,
    load_ahead,
    metrics_with_k,
    output_or_stdout,
    parse_cutoffs,
    positive_int,
    ray_options,
    split_specs,
)
from engine.io.config import CONFIG_FILENAME
from engine.io.files import RESULT_FORMATS
from engine.io.writer import note_inputs

if TYPE_CHECKING:
    from engine.evaluation.api import Engine
    from engine.evaluation.results import Results

__all__ = ["EXIT_FAILED", "add", "run_tables"]

#: ``slotwise run``'s exit code when something failed (a metric while scoring, or the
#: system's calls of re-scored results): everything else was written, the failed values
#: are NA with the reason in the results.
EXIT_FAILED = 3

#: ``run --stream``'s samples per chunk: a chunk's arrays (a few MB) are reused from the
#: heap rather than mapped afresh, and memory stays lower (docs/scale.md).
STREAM_CHUNK_SIZE = 4096

_SHARDS = (
    "a directory, a quoted glob, or the option repeated; local or a URI such as s3://, gs://: "
    "their lines one after the other"
)


def add(commands: Any) -> dict[str, Handler]:
    run = commands.add_parser(
        "run",
        help="score outputs against a dataset",
        description="Score a system's outputs against a dataset.",
    )
    run.add_argument(
        "dataset",
        nargs="?",
        help=f"a dataset declared in {CONFIG_FILENAME}, or a .yaml/.json/.jsonl file or a "
        ".parquet/.arrow/.feather/.csv labels table, optionally .gz/.bz2/.xz/.zst, or a source "
        "plugin's scheme:reference (irds:<dataset-id>, ragas:<file.jsonl>), or a BEIR or "
        "Hugging Face datasets folder (beir:PATH, hf:PATH, or its path) (default: the only "
        "declared dataset)",
    )
    run.add_argument(
        "--split",
        metavar="NAME",
        help="with a BEIR or Hugging Face folder as DATASET: the split whose qrels are the "
        "dataset (default: test; beir:PATH#NAME says the same)",
    )
    run.add_argument(
        "--outputs",
        action="append",
        metavar="OUTPUTS",
        help="outputs file: JSON {id: actual_output}, JSONL {id, actual_output} lines, a "
        "Parquet/Arrow/Feather/CSV run table, or a results JSON that kept its outputs; or "
        f"shards of them ({_SHARDS})",
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
        choices=("table", *RESULT_FORMATS),
        default="table",
        help="table: summary; json: results document; jsonl, csv: per-sample scores; "
        "parquet: per-sample scores as a Parquet file (needs --output)",
    )
    run.add_argument(
        "--output",
        type=output_or_stdout,
        help="write the result here (atomically) instead of stdout (- : stdout)",
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="duplicate retrieved ids and outputs for unknown samples are errors",
    )
    run.add_argument(
        "--missing",
        choices=("error", "empty"),
        help="a sample with no output: an error row (NA, counted in errors, exit 3) or an "
        "empty ranking (trec_eval's -c, listed under the tables); default as in Python: "
        "error for outputs files, empty for TREC runs",
    )
    run.add_argument(
        "--qrels",
        action="append",
        metavar="QRELS",
        help="a qrels file as the dataset (instead of DATASET): TREC text, or a Parquet, Arrow, "
        "CSV, TSV or JSONL table in slotwise's, ranx's, ir_measures', BEIR's or trec_eval's "
        f"column names (told by content); or its shards ({_SHARDS})",
    )
    run.add_argument(
        "--subtopics",
        action="store_true",
        help="with --qrels: diversity qrels ('qid subtopic docid rel'), each subtopic a group "
        "of the documents labelled >= 1 (for the diversity-* metrics)",
    )
    run.add_argument(
        "--run",
        action="append",
        dest="trec_run",
        metavar="RUN",
        help="a run file as the outputs (instead of --outputs): TREC text or a table, as "
        f"--qrels; or its shards ({_SHARDS})",
    )
    run.add_argument(
        "--runs",
        nargs="+",
        metavar="RUN",
        help="several runs (files, directories: their files, quoted globs: their matches, "
        "each read as --run reads one), each scored as its own system: one row per run "
        "(--format table, csv or json)",
    )
    run.add_argument(
        "--stream",
        action="store_true",
        help="score in chunks with bounded memory, reading JSONL/TREC/Parquet inputs as a "
        "stream (two passes); rows are written as they are scored",
    )
    run.add_argument(
        "--chunk-size",
        type=positive_int,
        metavar="N",
        help=f"samples per chunk, rounded up to a multiple of 64 (default: {STREAM_CHUNK_SIZE} "
        "with --stream, 16384 with ray; in memory, about 16384 rankings of 100 a chunk, and "
        "a chunk per core from 2^18 ranked documents on)",
    )
    run.add_argument(
        "--keep-outputs",
        action="store_true",
        help="keep the outputs in the results (--format json), so that `slotwise explain` "
        "and `slotwise report` can show what each slot held without --outputs",
    )
    run.add_argument(
        "--executor",
        choices=("threads", "local", "ray"),
        default="threads",
        help="where chunks are scored: a thread per CPU of this process (the default), this "
        "thread alone, or a Ray cluster (RAY_ADDRESS; needs slotwise[ray]), whose workers read "
        "--qrels/--run files (and, with --stream, labels and run tables) themselves",
    )
    add_ray_options(run)
    ppi = run.add_argument_group("prediction-powered inference (docs/ppi.md)")
    ppi.add_argument(
        "--ppi",
        metavar="PREDICTIONS",
        help="a dataset with an LLM's labels on every sample (DATASET's labelled samples "
        "are the human subset): each metric's PPI++ mean and interval, with the human-only "
        "and LLM-only means beside it",
    )
    ppi.add_argument(
        "--ppi-baseline",
        type=Path,
        metavar="OUTPUTS",
        help="with --ppi: a second system's outputs; estimate the paired difference "
        "OUTPUTS - BASELINE per metric",
    )
    ppi.add_argument(
        "--design",
        type=Path,
        metavar="SAMPLE.design.json",
        help="with --ppi: the design DATASET's labelled samples were drawn by (`slotwise "
        "sample`): stratified and active samples are weighted as drawn",
    )
    return {"run": _run}


def _run(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from engine.io import sources, trec

    engine = configured_engine(args.config, ray_options(args), executor=args.executor)
    args.qrels, args.trec_run, args.outputs = map(_spec, (args.qrels, args.trec_run, args.outputs))
    if args.qrels is not None and args.dataset is not None:
        raise UsageError("give either DATASET or --qrels, not both")
    if args.trec_run is not None and args.outputs is not None:
        raise UsageError("give either --outputs or --run, not both")
    if args.runs is not None and (args.trec_run or args.outputs or args.stream or args.ppi):
        raise UsageError("--runs goes without --run, --outputs, --stream and --ppi")
    if args.format == "parquet" and args.output is None:
        raise UsageError("--format parquet writes a file: add --output FILE.parquet")
    if args.subtopics and (args.qrels is None or args.stream or not isinstance(args.qrels, str)):
        raise UsageError("--subtopics goes with --qrels QRELS (one file), without --stream")
    if args.split is not None:  # beir:PATH#NAME
        args.dataset = sources.with_split(_dataset_name(engine, args.dataset), args.split)
    on_workers = args.executor == "ray" and args.qrels and args.trec_run
    if on_workers and not (args.subtopics or args.ppi):
        # the workers read, score and send back rows that are written as they come: the
        # driver holds none (--by needs them all: then they are kept)
        return _run_stream(engine, args) if args.by is None else _run_on_workers(engine, args)
    if args.stream or _workers_read(args, _streamed(engine, args)):
        return _run_stream(engine, args)
    with ThreadPoolExecutor(2, thread_name_prefix="slotwise-read") as pool:
        run = None if args.trec_run is None else pool.submit(sources.read_run, args.trec_run)
        pool.submit(load_ahead, engine, split_specs(args.metrics))  # (none: the dataset's)
        if args.qrels is not None:  # read while the run is
            read = trec.read_subtopic_qrels if args.subtopics else sources.read_qrels
            dataset = engine.dataset(read(args.qrels), name=_qrels_name(args.qrels))
        else:
            dataset = engine.dataset(_dataset_name(engine, args.dataset))
        if args.format != "table":
            dataset.hash_ahead()  # the results' header has it: computed while the rest runs
        outputs: Any = (args.outputs or dataset.outputs) if run is None else run.result()
    specs = split_specs(args.metrics) or list(dataset.metrics)
    if not specs:
        raise UsageError(
            "no metrics: pass --metrics or declare them for the dataset in " + CONFIG_FILENAME
        )
    if args.runs is not None:
        from engine.cli.run_many import score_runs

        return score_runs(dataset.with_metrics(metrics_with_k(engine, specs, args.k)), args)
    if outputs is None:
        raise UsageError(
            "no outputs: pass --outputs FILE (or --run FILE) or declare `outputs:` for the dataset"
        )
    if args.ppi is not None:
        return _run_ppi(engine, dataset, metrics_with_k(engine, specs, args.k), outputs, args)
    if args.ppi_baseline is not None or args.design is not None:
        raise UsageError("--ppi-baseline and --design go with --ppi PREDICTIONS")
    chunked = args.chunk_size if args.chunk_size is not None or args.executor == "ray" else None
    evaluation = dataset.with_metrics(metrics_with_k(engine, specs, args.k))
    with _muted_with_the_results(args.format):
        results = evaluation.evaluate(
            outputs,
            strict=args.strict,
            chunk_size=chunked,
            keep_outputs=args.keep_outputs,
            missing=args.missing,
        )
    process.give_back_freed()  # what scoring freed, before the results are laid out
    _emit(results, args.format, args.output, by=args.by)
    return _status(results)


class _Streamed(NamedTuple):
    """What the streamed path reads: the dataset file (None: --qrels), the outputs file
    (None: --run), the dataset's name and the metric specs."""

    dataset: Any
    outputs: Any
    name: str | None
    specs: list[str]


def _streamed(engine: Engine, args: argparse.Namespace) -> _Streamed:
    """The streamed path's inputs: a dataset ``slotwise.yaml`` declares (named, or the
    only one) is its file, with its outputs file, name and metrics where the command line
    gives none."""
    specs = split_specs(args.metrics)
    known = engine.config.datasets
    key = args.dataset if args.dataset is not None or len(known) != 1 else next(iter(known))
    declared = known.get(key) if args.qrels is None and key is not None else None
    if declared is None:
        return _Streamed(args.dataset, args.outputs, None, specs)
    note_inputs(declared.path, declared.outputs)  # (no output may overwrite them)
    given = args.outputs is not None or args.trec_run is not None
    outputs = args.outputs if given else declared.outputs
    return _Streamed(declared.path, outputs, declared.name, specs or list(declared.metrics))


def _workers_read(args: argparse.Namespace, streamed: _Streamed) -> bool:
    """``run DATASET --outputs FILE --executor ray`` of document files: the workers read
    them (not with --by, --keep-outputs, --ppi or --runs, which need the samples here)."""
    if args.executor != "ray" or args.by or args.keep_outputs or args.ppi or args.runs:
        return False
    from engine.evaluation.distributed_documents import readable_by_workers

    return readable_by_workers(streamed.dataset, streamed.outputs)


def _run_on_workers(engine: Engine, args: argparse.Namespace) -> int:
    """``run --qrels Q --run R --executor ray --by FIELD``: the workers read the files,
    the rows are kept here for the breakdown."""
    specs = split_specs(args.metrics)
    if not specs:
        raise UsageError("no metrics: pass --metrics")
    if args.keep_outputs:
        raise UsageError("--keep-outputs needs the outputs here: leave out --executor ray")
    with _muted_with_the_results(args.format):
        results = engine.evaluate_trec(
            args.qrels,
            args.trec_run,
            metrics_with_k(engine, specs, args.k),
            strict=args.strict,
            name=_qrels_name(args.qrels),
            chunk_size=args.chunk_size,
        )
    _emit(results, args.format, args.output, by=args.by)
    return _status(results)


def _spec(values: list[str] | None) -> str | list[str] | None:
    """A repeatable file option's value: None, one path, or the list of shards."""
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _qrels_name(spec: str | list[str]) -> str:
    """The dataset name of ``--qrels``: its file's name up to the first dot, as before
    shards, or the name of a directory or of the first file."""
    from engine.io import sources

    if isinstance(spec, str) and Path(spec).is_file():
        return Path(spec).name.split(".")[0]
    return sources.input_name(spec)


def _run_ppi(engine: Engine, dataset: Any, specs: list[Any], outputs: Any, args: Any) -> int:
    """``run --ppi``: the PPI++ estimates as a table, or as JSON with ``--format json``."""
    if args.stream or args.by is not None or args.format not in ("table", "json"):
        raise UsageError("--ppi writes a table or --format json, without --stream or --by")
    from engine.analysis.sampling import read_sample, recorded_sample

    design = read_sample(args.design) if args.design is not None else recorded_sample(dataset)
    report = dataset.with_metrics(specs).ppi(
        outputs, engine.dataset(args.ppi), baseline=args.ppi_baseline, design=design
    )
    if args.format == "json":
        emit(json.dumps(report.to_dict(), indent=2) + "\n", args.output)
    else:
        emit_tables([report.table()], [f"note: {note}" for note in report.notes], args.output)
    return 0


def _run_stream(engine: Engine, args: argparse.Namespace) -> int:
    """``run --stream`` (and ``run --qrels Q --run R --executor ray``): inputs read as
    streams (on Ray, by the workers), rows written as they are scored."""
    from engine.evaluation.pipeline import DEFAULT_CHUNK_SIZE

    if args.by is not None or args.keep_outputs:
        option = "--by" if args.by is not None else "--keep-outputs"
        instead = "--stream" if args.stream else "--executor ray"
        raise UsageError(f"{option} needs every sample in memory; leave out {instead}")
    streamed = _streamed(engine, args)
    if (args.qrels is None) == (streamed.dataset is None):
        raise UsageError("--stream needs a DATASET file or --qrels")
    if (args.trec_run is None) == (streamed.outputs is None):
        raise UsageError("--stream needs --outputs FILE or --run FILE")
    specs = streamed.specs
    if not specs:
        raise UsageError(
            "no metrics: pass --metrics or declare them for the dataset in " + CONFIG_FILENAME
        )
    process.return_freed_blocks()
    rows = args.format != "table"
    with _muted_with_the_results(args.format):
        results = engine.evaluate_stream(
            metrics_with_k(engine, specs, args.k),
            dataset=streamed.dataset,
            qrels=args.qrels,
            outputs=streamed.outputs,
            run=args.trec_run,
            name=streamed.name,
            chunk_size=args.chunk_size
            or (DEFAULT_CHUNK_SIZE if args.executor == "ray" else STREAM_CHUNK_SIZE),
            strict=args.strict,
            missing=args.missing,
            scores=(args.output or sys.stdout) if rows else None,
            scores_format=args.format if rows else None,
        )
    if rows:
        if args.output is not None:
            print(f"wrote {args.output}", file=sys.stderr)
        return _status(results)
    _emit(results, "table", args.output)
    return _status(results)


def _muted_with_the_results(fmt: str) -> contextlib.AbstractContextManager[None]:
    """The log events a command's output already says muted, to be said once: a metric's
    failure (:func:`_status` prints it), and with the table, the outputs' diagnostics
    (ids not in the dataset, repeated ids dropped) printed under it."""
    from engine.logs import muted  # (logging imported as the command runs, not for --help)

    said = {"metric.failed"}
    if fmt == "table":
        said |= {"outputs.unknown_ids", "outputs.duplicates_dropped"}
    return muted(said)


def _status(results: Results) -> int:
    """:data:`EXIT_FAILED` when something failed (``results.failed``: a metric, its values
    NA, or the system's calls of re-scored results, error rows), after everything else
    was written; else 0."""
    for label, reason in results.diagnostics.metric_errors.items():
        print(f"slotwise: metric {label} FAILED, its values are NA: {reason}", file=sys.stderr)
    return EXIT_FAILED if results.failed else 0


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
        raise UsageError("name a dataset" + hint)
    return declared[0]


def run_tables(results: Results, by_key: str | None = None) -> list[Any]:
    """The console tables of ``slotwise run``: the Metric@K curves (one column per K) when
    there are any, the summary of the other metrics, and the per-stratum breakdown."""
    from engine.analysis.curves import curve_labels, curve_table

    tables = []
    in_curves = curve_labels(results)
    if in_curves:
        tables.append(curve_table(results))
    if set(results.labels) - in_curves:
        tables.append(results.table(exclude=sorted(in_curves)))
    if by_key is not None:
        tables.append(results.by(by_key).table())
    return tables


def _emit(results: Results, fmt: str, output: Path | None, by: str | None = None) -> None:
    from engine.analysis.curves import curve_labels

    if fmt == "table":
        tables = run_tables(results, by) if results.scores is not None else [results.table()]
        curves = curve_labels(results) if results.scores is not None else set()
        others = [label for label in results.labels if label not in curves]
        notes = results.na_notes(exclude=others) if curves else []  # the summary has its own
        lines = [*notes, *results.diagnostics.lines(), *results.report_lines()]
        emit_tables(tables, lines, output)
    elif fmt == "parquet":
        assert output is not None
        results.to_parquet(output)
        print(f"wrote {output}", file=sys.stderr)
    else:
        emit(results.write(fmt), output)
