"""The ``slotwise synthesize`` command: evaluation questions made from a corpus by an LLM,
checked by the reference-free judge, written as a dataset whose labels are the source
passages. :func:`add` adds it to the program's subparsers and returns its handler."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.cli.common import Handler, non_negative_int, output_file, positive_int
from engine.cli.llm import Ended, Session, add_llm_options

__all__ = ["add"]

EXIT_USAGE = 2


def _at_least_one(text: str) -> float:
    value = float(text)
    if not value >= 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def add(commands: Any) -> dict[str, Handler]:
    """Add ``synthesize`` to ``commands``; returns its handler."""
    synthesize = commands.add_parser(
        "synthesize",
        help="make evaluation questions from a corpus with an LLM (labels: their passages)",
        description="Draw passages from a JSONL corpus ({id, text, metadata?} a line), ask "
        "the LLM for a question each passage answers, drop repeated questions and those the "
        "reference-free judge (UMBRELA) does not grade as answered by their own passage, and "
        "write a dataset of the first --questions that remain: each sample's label is its "
        "source passage with the judge's grade, and its source names the generator's model "
        "and prompt version. The plan (passages drawn, most calls, cost) is said before any "
        "call; answers are cached: a killed run resumes, a re-run is free. Then run the "
        "systems, and fill the rest of the labels with `slotwise annotate --task relevance "
        "--runs ... --holes`. Exit 3: more than --max-unlabelled of the items were left "
        "unlabelled (unreadable answers, failed calls; the rest was written).",
    )
    synthesize.add_argument("corpus", type=Path, help="the corpus, JSONL: {id, text, metadata?}")
    synthesize.add_argument(
        "--questions", type=positive_int, required=True, help="how many questions to write"
    )
    synthesize.add_argument(
        "--output",
        type=output_file,
        required=True,
        help="the dataset to write (.yaml, .json, .jsonl)",
    )
    synthesize.add_argument(
        "--stratify",
        metavar="FIELD",
        help="draw passages stratified by this field of metadata (its values take turns), "
        "recorded as each sample's metadata.stratum (for --by stratum); default: uniformly",
    )
    synthesize.add_argument("--seed", type=non_negative_int, default=0, help="the draw's seed (0)")
    synthesize.add_argument(
        "--oversample",
        type=_at_least_one,
        default=1.25,
        help="passages drawn per question wanted, for the questions dropped (1.25)",
    )
    synthesize.add_argument(
        "--min-grade",
        type=int,
        choices=(0, 1, 2, 3),
        default=2,
        help="the judge's least grade of a question's own passage for it to be kept (2: the "
        "passage has some answer; 3: it is dedicated to the question)",
    )
    synthesize.add_argument(
        "--dry-run",
        action="store_true",
        help="say how many passages would be drawn and the most calls and cost, then stop",
    )
    add_llm_options(synthesize)
    return {"synthesize": _synthesize}


def _synthesize(args: argparse.Namespace) -> int:
    from engine.annotate.synthesize import read_corpus, synthesize
    from engine.io.documents import parse_samples, write_samples

    passages = read_corpus(args.corpus, args.stratify)
    session = Session.of(args, args.cache or args.output.with_suffix(".cache.sqlite"))
    try:
        samples, found = session.run(
            ["question", "relevance"],
            lambda: synthesize(
                passages,
                session.annotator,
                session.runner,
                questions=args.questions,
                seed=args.seed,
                oversample=args.oversample,
                min_grade=args.min_grade,
                judge_max_tokens=args.judge_max_tokens,
                announce=session.announce,
            ),
        )
    except Ended as ended:
        return ended.code
    for line in found.lines():
        print(line, file=sys.stderr)
    if not samples:
        print(f"slotwise: no question was kept; {args.output} not written", file=sys.stderr)
        return session.finished(found.unreadable, found.failed, args.output) or EXIT_USAGE
    parse_samples((sample, None) for sample in samples)
    write_samples(args.output, samples, name=args.output.stem)
    print(
        f"wrote {args.output} ({len(samples)} samples; cache {session.cache_path})",
        file=sys.stderr,
    )
    return session.finished(found.unreadable, found.failed, args.output)
