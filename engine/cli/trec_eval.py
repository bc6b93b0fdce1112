"""``slotwise trec-eval``: trec_eval's command line, options and output over slotwise's
metrics, for scripts and papers that call ``trec_eval``."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.analysis.trec_eval_measures import MEASURE_SETS, MEASURES, Stop
from engine.cli.common import Handler

if TYPE_CHECKING:  # what scores is imported when the command runs, not for its --help
    from engine.analysis.trec_eval import Options, Report, Request
    from engine.evaluation.api import Engine

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    command = commands.add_parser(
        "trec-eval",
        help="trec_eval 10's command line and output, byte for byte (a drop-in)",
        description="Evaluate a TREC run against qrels and print what trec_eval 10 prints: "
        "'measure<TAB>query<TAB>value' lines, per query with -q, then the 'all' summary; "
        "its exit statuses too (1 a bad measure or command line, 2 a bad file or parameter, "
        f"4 a query it cannot evaluate). Measures: {', '.join(MEASURES)}; "
        f"sets: {', '.join(MEASURE_SETS)} (default: official).",
    )
    command.usage_status = 1  # trec_eval's status for a command line it cannot read
    command.add_argument("qrels", type=Path, help="TREC qrels file (qid iter docno rel)")
    command.add_argument(
        "run",
        nargs="+",
        help="TREC run file (qid Q0 docno rank score tag); - for stdin; several files, "
        "directories (their files) or quoted globs: each run's output, as for it alone, "
        "one after the other (exit status: the worst run's)",
    )
    command.add_argument("-q", action="store_true", help="print every query's values too")
    command.add_argument(
        "-c",
        action="store_true",
        help="average over every query of the qrels (a query the run lacks scores as an "
        "empty ranking); without it a qrels query the run lacks stops trec_eval (status 4)",
    )
    command.add_argument("-n", action="store_true", help="no summary ('all') lines")
    command.add_argument(
        "-J", action="store_true", help="score judged documents only: unjudged ones are removed"
    )
    command.add_argument("-M", metavar="N", help="score the first N documents of each ranking")
    command.add_argument(
        "-l",
        default="1",
        metavar="N",
        help="the least label that counts as relevant, an integer (default 1; 1.5 reads as 1)",
    )
    command.add_argument(
        "-N",
        default="0",
        metavar="N",
        help="the number of documents in the collection (for utility's fourth coefficient)",
    )
    command.add_argument(
        "-R",
        default="qrels",
        metavar="FORMAT",
        help="the qrels' format: qrels (default) or qrels_jg ('qid group docno rel': the "
        "*_avgjg measures average over each query's judgment groups)",
    )
    command.add_argument(
        "-Z",
        type=Path,
        metavar="FILE",
        help="print z-scores: each query's value v as (v - mean) / stddev, with the mean and "
        "stddev of FILE's 'qid measure mean stddev' lines",
    )
    command.add_argument(
        "-m",
        action="append",
        default=[],
        metavar="MEASURE",
        help="a measure, with parameters (P.5,10; ndcg_cut.10; iprec_at_recall..10,.25; "
        "utility.2,-1,0,0; ndcg.1=3,2=9; rbp.p=0.8), or a set (official, all_trec, set); "
        "repeatable",
    )
    return {"trec-eval": _trec_eval}


def _depth(option: str, text: str | None) -> int | None:
    """A ``-M`` or ``-N`` value: a whole number >= 0 (trec_eval's ``atol`` reads anything,
    ``abc`` and ``-5`` too: status 2 here, a deliberate difference)."""
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise Stop(f"{option} must be a whole number >= 0, got {text!r}", 2)
    return value


#: The measures each -R format can calculate (runid and num_q: every format).
_KINDS = {
    "qrels_jg": ("qrels_jg", set(MEASURE_SETS["qrels_jg"])),
    "prefs": ("prefs", set(MEASURE_SETS["all_prefs"])),
    "qrels_prefs": ("prefs", set(MEASURE_SETS["all_prefs"])),
}


def _format(name: str, measures: list[str]) -> str:
    """The kind of qrels ``-R`` names (``qrels``, ``qrels_jg`` or ``prefs``); as trec_eval,
    a measure of another format cannot be calculated (status 4), an unknown format is
    status 2."""
    if name not in ("qrels", *_KINDS):
        raise Stop(f"illegal rel_format '{name}' (qrels, qrels_jg, prefs or qrels_prefs)", 2)
    kind, own = _KINDS.get(name, ("qrels", set()))
    special = set().union(*(names for _, names in _KINDS.values()))
    allowed = own if name != "qrels" else {"runid", "num_q"} | (set(MEASURES) - special)
    wrong = [m for m in measures if m not in allowed]
    if wrong:
        raise Stop(f"can't calculate measure '{wrong[0]}' with -R {name}", 4)
    return kind


def _preferences(args: argparse.Namespace, requests: list[Any], options: Options) -> int:
    """-R prefs and -R qrels_prefs: the preference measures, each run in turn."""
    from engine.analysis import trec_eval_files as files
    from engine.analysis import trec_eval_prefs as preferences

    prefs = preferences.read_prefs(args.qrels, qrels=args.R == "qrels_prefs")
    zscores = files.read_zscores(args.Z) if args.Z is not None else None

    def one(_: int, name: str) -> None:
        try:
            text = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        except OSError as error:
            raise Stop(f"cannot read results file '{name}': {error.strerror}", 2) from None
        _preferences_of(
            prefs, preferences.read_ranked(text, name), requests, options, args, zscores
        )

    return _each(args.runs, one)


def _preferences_of(
    prefs: Any, ranked: Any, requests: list[Any], options: Options, args: Any, zscores: Any
) -> None:
    import pyarrow as pa

    from engine.analysis import trec_eval_files as files
    from engine.analysis import trec_eval_prefs as preferences

    run, runid = ranked
    queries = pa.array(sorted(prefs, key=str.encode), pa.string())
    stopped = files.first_stop(queries, pa.array(list(run), pa.string()), args.c)
    if stopped is not None:
        qid, stop = stopped
        before = {q: p for q, p in prefs.items() if q.encode() < qid.encode()}
        if args.q and before:
            report = preferences.prefs_report(before, run, requests, options, runid)
            _write(report, zscores, per_query=True, summary=False)
        raise stop
    report = preferences.prefs_report(prefs, run, requests, options, runid)
    _write(report, zscores, per_query=args.q, summary=not args.n)


def _each(runs: list[str], evaluate: Callable[[int, str], None]) -> int:
    """``evaluate`` each run in turn; with several, a run that fails is named on standard
    error (its output up to where it stopped printed, as trec_eval prints it) and the
    others go on: the exit status is the worst run's. One run fails as trec_eval fails."""
    if len(runs) == 1:
        evaluate(0, runs[0])
        return 0
    return max(
        _named(name, functools.partial(evaluate, index, name)) for index, name in enumerate(runs)
    )


def _named(name: str, evaluate: Callable[[], None]) -> int:
    """0 when ``evaluate`` prints its run's output; else its status, what went wrong
    printed on standard error naming the run."""
    from engine.errors import SlotwiseError

    try:
        evaluate()
    except Stop as stop:
        print(f"slotwise trec-eval: {name}: {stop.message}", file=sys.stderr)
        return stop.status
    except SlotwiseError as error:
        print(f"slotwise trec-eval: {name}: {error}", file=sys.stderr)
        return 2
    return 0


def _batched(
    engine: Engine,
    qrels: Any,
    pool: Any,
    reads: list[range],
    first: Any,
    requests: list[Request],
    options: Options,
    args: argparse.Namespace,
    zscores: Any,
) -> int:
    """Several runs against ``-R qrels``: read in batches (engine/analysis/trec_eval_many.py),
    each while the one before is scored (``first``: the first, being read, or None), and
    scored in batches, the runs that trec_eval evaluates whole together, then each printed
    in order; a run that fails, or at whose missing query trec_eval stops, goes alone
    (read again) and is named as :func:`_each` names it."""
    from engine.analysis import trec_eval_files as files
    from engine.analysis import trec_eval_many as many
    from engine.errors import SlotwiseError

    worst = 0
    reading = {} if first is None else {0: first}
    for at, positions in enumerate(reads):
        for ahead in range(at, min(at + 2, len(reads))):  # this batch, and the next
            if ahead not in reading:
                reading[ahead] = pool.submit(
                    many.read_runs, args.runs, reads[ahead], files.read_run
                )
        runs, runids = reading.pop(at).result()
        for batch in many.batches(positions, len(qrels)):
            whole = [] if runs is None else many.whole_runs(qrels, runs, batch, args.c)
            made: Mapping[int, Report | tuple[bytes, bytes]] = {}
            if len(whole) > 1:
                with contextlib.suppress(SlotwiseError):  # then each alone, named
                    # printed for all at once, but with z-scores (each run's values apart)
                    given = (engine, qrels, runs, runids, whole, requests, options)
                    made = many.printed(*given, args.q) if zscores is None else many.reports(*given)
            for i in batch:
                if i in made:
                    print_it = functools.partial(_write_made, made[i], zscores, args)
                else:  # read again: a failure is raised, to be named
                    read = functools.partial(files.read_run, args.runs[i])
                    print_it = functools.partial(
                        _alone, engine, qrels, read, requests, options, args, zscores
                    )
                worst = max(worst, _named(args.runs[i], print_it))
    return worst


def _trec_eval(args: argparse.Namespace) -> int:
    try:
        return _evaluate(args)
    except Stop as stop:
        print(f"slotwise trec-eval: {stop.message}", file=sys.stderr)
        return stop.status


def _evaluate(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2, thread_name_prefix="slotwise-read") as pool:
        # the runs are found, and the first read, while the evaluation API is imported
        found = pool.submit(_runs_ahead, pool, args.run, args.R)
        from engine.analysis import trec_eval_files as files
        from engine.analysis.trec_eval import Options, parse_measures, relevance_level
        from engine.evaluation.api import Engine

        requests = parse_measures(args.m)
        level = relevance_level(args.l)
        kind = _format(args.R, [request.name for request in requests])
        options = Options(
            complete=args.c,
            max_docs=_depth("-M", args.M),
            level=float(level),
            judged_only=args.J,
            collection=_depth("-N", args.N) or 0,
        )
        args.runs, reads, first = found.result()
        if kind == "prefs":
            return _preferences(args, requests, options)
        grouped = kind == "qrels_jg"
        engine = Engine(config={}, executor="threads")
        pool.submit(_load_ahead, engine, requests, options.level)
        qrels = files.read_qrels_jg(args.qrels) if grouped else files.read_qrels(args.qrels)
        zscores = files.read_zscores(args.Z) if args.Z is not None else None
        if reads:
            return _batched(engine, qrels, pool, reads, first, requests, options, args, zscores)
        # the first run is read while the qrels are, each next one while a run is scored
        ahead = {0: first or pool.submit(files.read_run, args.runs[0])}

        def one(index: int, _: str) -> None:
            if index + 1 < len(args.runs):
                ahead[index + 1] = pool.submit(files.read_run, args.runs[index + 1])
            run, runid = ahead.pop(index).result()
            _evaluate_run(engine, qrels, run, runid, requests, options, args, zscores, grouped)

        return _each(args.runs, one)


def _runs_ahead(
    pool: Any, patterns: list[str], rel_format: str
) -> tuple[list[str], list[range], Any]:
    """The runs ``patterns`` name (engine/cli/many.py); for several against ``-R qrels``
    their batches of reading (trec_eval_many.read_batches), else none; and the first
    batch, or the first run (``-R qrels`` or ``qrels_jg``), being read (None: not read
    ahead, as standard input is not, which the command may never read)."""
    from engine.analysis import trec_eval_files as files
    from engine.analysis import trec_eval_many as many
    from engine.cli.many import expand_runs

    runs = expand_runs(patterns)
    batched = rel_format == "qrels" and len(runs) > 1
    reads = many.read_batches(runs) if batched else []
    if "-" in runs or rel_format not in ("qrels", "qrels_jg"):
        return runs, reads, None
    if batched:
        return runs, reads, pool.submit(many.read_runs, runs, reads[0], files.read_run)
    return runs, reads, pool.submit(files.read_run, runs[0])


def _alone(
    engine: Engine,
    qrels: Any,
    run: tuple[Any, str] | Callable[[], tuple[Any, str]],
    requests: list[Request],
    options: Options,
    args: argparse.Namespace,
    zscores: Any,
) -> None:
    """One run of a batch evaluated on its own (``run``: it, or what reads it)."""
    columns, runid = run() if callable(run) else run
    _evaluate_run(engine, qrels, columns, runid, requests, options, args, zscores, False)


def _evaluate_run(
    engine: Engine,
    qrels: Any,
    run: Any,
    runid: str,
    requests: list[Request],
    options: Options,
    args: argparse.Namespace,
    zscores: Any,
    grouped: bool,
) -> None:
    """One run's output, as trec_eval prints it (a query it cannot evaluate: what it
    printed before, then :class:`Stop`)."""
    import pyarrow as pa

    from engine.analysis import trec_eval_files as files
    from engine.analysis.trec_eval import GROUP_SEPARATOR, judgment_groups, trec_eval

    queries, ranked = qrels.ids, run.ids
    if grouped:  # the queries of the judgment groups
        queries = pa.array(sorted({q.split(GROUP_SEPARATOR)[0] for q in queries.to_pylist()}))
        run = files.by_judgment_group(run, qrels)
    stopped = files.first_stop(queries, ranked, args.c)
    if stopped is not None:
        qid, stop = stopped
        before = files.before(qrels, qid)
        if args.q and len(before):
            report = trec_eval(engine, before, run, requests, options)
            _write(judgment_groups(report) if grouped else report, zscores, True, False)
        raise stop
    report = trec_eval(engine, qrels, run, requests, options, runid=runid)
    _write(judgment_groups(report) if grouped else report, zscores, args.q, not args.n)


def _load_ahead(engine: Engine, requests: list[Request], level: float) -> None:
    """The plugins of the requested measures, imported while the files are read; what is
    wrong with a measure is raised where it was, by trec_eval()."""
    from engine.analysis.trec_eval import metric_specs
    from engine.cli.common import load_ahead

    with contextlib.suppress(Exception):
        load_ahead(engine, metric_specs(requests, level))


def _write(report: Report, zscores: Any, per_query: bool, summary: bool) -> None:
    """Print the report (as z-scores with ``-Z``) after whatever was printed before."""
    from engine.analysis.trec_eval import zscored

    if zscores is not None:
        report = zscored(report, zscores.table)
    sys.stdout.flush()
    report.write(sys.stdout.buffer, per_query=per_query, summary=summary)
    sys.stdout.buffer.flush()


def _write_made(made: Report | tuple[bytes, bytes], zscores: Any, args: argparse.Namespace) -> None:
    """A run of a batch printed: its report, or its per-query and ``all`` lines as they
    were formatted for the batch (trec_eval_many.printed)."""
    if not isinstance(made, tuple):
        _write(made, zscores, args.q, not args.n)
        return
    lines, summary = made
    sys.stdout.flush()
    sys.stdout.buffer.write((lines if args.q else b"") + (b"" if args.n else summary))
    sys.stdout.buffer.flush()
