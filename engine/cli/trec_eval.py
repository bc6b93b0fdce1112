"""``slotwise trec-eval``: trec_eval's command line, options and output over slotwise's
metrics, for scripts and papers that call ``trec_eval``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.analysis.trec_eval import MEASURE_SETS, MEASURES, Options, parse_measures, trec_eval
from engine.cli.common import Handler, positive_int
from engine.evaluation.api import Engine
from engine.io import trec

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    command = commands.add_parser(
        "trec-eval",
        help="trec_eval's command line and output (a faster drop-in)",
        description="Evaluate a TREC run against qrels and print what trec_eval prints: "
        "'measure<TAB>query<TAB>value' lines, per query with -q, then the 'all' summary. "
        f"Measures: {', '.join(MEASURES)}; sets: {', '.join(MEASURE_SETS)} "
        "(default: official).",
    )
    command.add_argument("qrels", type=Path, help="TREC qrels file (qid iter docno rel)")
    command.add_argument("run", type=Path, help="TREC run file (qid Q0 docno rank score tag)")
    command.add_argument("-q", action="store_true", help="print every query's values too")
    command.add_argument(
        "-c",
        action="store_true",
        help="average over every query of the qrels (a query the run lacks scores as an "
        "empty ranking); default: the queries of both files",
    )
    command.add_argument("-n", action="store_true", help="no summary ('all') lines")
    command.add_argument(
        "-J", action="store_true", help="score judged documents only: unjudged ones are removed"
    )
    command.add_argument(
        "-M", type=positive_int, metavar="N", help="score the first N documents of each ranking"
    )
    command.add_argument(
        "-l",
        type=float,
        default=1.0,
        metavar="N",
        help="the least label that counts as relevant (default 1)",
    )
    command.add_argument(
        "-m",
        action="append",
        default=[],
        metavar="MEASURE",
        help="a measure, with parameters (P.5,10; ndcg_cut.10; iprec_at_recall..10,.25), or a "
        "set (official, all_trec, set); repeatable",
    )
    return {"trec-eval": _trec_eval}


def _trec_eval(args: argparse.Namespace) -> int:
    requests = parse_measures(args.m)
    engine = Engine(config={}, executor="threads")
    report = trec_eval(
        engine,
        trec.read_qrels(args.qrels),
        trec.read_run(args.run),
        requests,
        Options(complete=args.c, max_docs=args.M, level=args.l, judged_only=args.J),
        runid=trec.run_tag(args.run),
    )
    sys.stdout.flush()
    report.write(sys.stdout.buffer, per_query=args.q, summary=not args.n)
    sys.stdout.buffer.flush()
    return 0
