"""The ``slotwise annotate`` command: label a dataset's passages with an LLM annotator
plugin (p(NO-RESPONSE) utility, judged relevance, graded answers, claims of the reference
answers and the passages that support them) through the SQLite cache, and write the
labelled dataset. :func:`add` adds it to the program's
subparsers and returns its handler."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.common import (
    Handler,
    UsageError,
    configured_engine,
    output_file,
    positive_int,
    split_specs,
)
from engine.cli.llm import Ended, Session, add_llm_options
from engine.errors import InputError, Problem
from engine.io.config import CONFIG_FILENAME
from engine.io.files import format_suffix, read_document, read_jsonl

if TYPE_CHECKING:
    from engine.evaluation.api import Engine
    from engine.io.config import Config

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    """Add ``annotate`` to ``commands`` (from ``parser.add_subparsers``); returns its handler."""
    annotate = commands.add_parser(
        "annotate",
        help="label passages with an LLM: utility p(NO-RESPONSE), relevance, answer grades, "
        "claims and their support",
        description="Annotate a dataset with an LLM annotator plugin and write it with the new "
        "labels. utility: p(NO-RESPONSE) of each retrieved passage (written as utility labels "
        "{relevant, p_no_response} that udcg reads); relevance: an LLM judge (UDCG paper, "
        "Figure 5); grade: metadata.outcome (correct/wrong/abstained) of metadata.response "
        "(Figure 6); claims: the reference answer (expected_output.reference, else the first "
        "answer) split into expected_output.claims; support: for each claim and retrieved "
        "passage, whether the passage supports it, written as the group named by the claim's "
        "id (context-recall-at-k, claim-precision-at-k, coverage-recall-at-k). Answers are "
        "read strictly (a JSON object of the answer's schema, or its one documented "
        "pattern); an unreadable answer or a failed call labels nothing, is listed, and is "
        "asked again by the next run. Answers are cached: an interrupted run resumes, a "
        "re-run is free. Exit 3: more than --max-unlabelled of the items were left "
        "unlabelled (the rest was written; the items are listed, and the command that asks "
        "for them alone is said).",
    )
    annotate.add_argument(
        "dataset", help=f"a dataset declared in {CONFIG_FILENAME}, or a .json/.yaml/.jsonl file"
    )
    annotate.add_argument(
        "--outputs", type=Path, help="the retrieved passages, with their texts (JSON or JSONL)"
    )
    annotate.add_argument(
        "--output", type=output_file, required=True, help="the labelled dataset to write"
    )
    annotate.add_argument(
        "--task",
        action="append",
        default=[],
        help="utility, relevance, grade, claims, support; comma-separated or repeated "
        "(default: utility)",
    )
    annotate.add_argument("--k", type=positive_int, help="annotate only the top K passages")
    remote = add_llm_options(annotate)
    remote.add_argument(
        "--method",
        choices=("auto", "logprobs", "sampling"),
        help="auto (default): logprobs if the server returns them, else Monte-Carlo sampling",
    )
    remote.add_argument("--samples", type=positive_int, help="Monte-Carlo samples (10)")
    remote.add_argument("--temperature", type=float, help="Monte-Carlo temperature (1.0)")
    judges = annotate.add_argument_group("judge and grader")
    judges.add_argument(
        "--judge",
        choices=("auto", "umbrela", "answers"),
        default="auto",
        help="the relevance judge: umbrela grades each (question, passage) 0-3 without "
        "reference answers (UMBRELA's prompt); answers judges 1/0 against "
        "expected_output.answers (Figure 5); auto (default): answers when every sample to "
        "judge has them, else umbrela. Said before any call and recorded in each label's source",
    )
    judges.add_argument(
        "--response-field", default="response", help="metadata field with the answer to grade"
    )
    judges.add_argument(
        "--agreement",
        action="store_true",
        help="with --task support: compare the judge's links with the groups the claims "
        "already have (a person's), which are kept; print Cohen's kappa, precision, recall "
        "and the disagreements. With --runs: judge every pooled pair of the samples that "
        "have human relevance labels, and print Cohen's kappa with the human labels and "
        "Kendall's tau between the runs' rankings under each, then the graded agreement: "
        "weighted kappa (linear, quadratic), Krippendorff's alpha (nominal, ordinal, "
        "interval), the confusion matrix, the unreliable topics and the pairs the judge "
        "left unlabelled (docs/annotation.md#agreement)",
    )
    judges.add_argument(
        "--agreement-format",
        choices=("text", "json", "markdown"),
        default="text",
        help="how --agreement --runs prints its report (text)",
    )
    judges.add_argument(
        "--also-judge",
        action="append",
        default=[],
        metavar="MODEL[@BASE_URL]",
        help="with --runs: another judge (the same --annotator, this model, at this endpoint "
        "or --base-url's); repeatable. Every judge labels the same pairs and their grades "
        "are combined by --combine; each judge's grade and their spread are written with "
        "the label (metadata.judges, metadata.judge_spread), their agreement is printed",
    )
    judges.add_argument(
        "--combine",
        choices=("majority", "mean"),
        default="majority",
        help="with --also-judge: majority (the grade most judges gave; a tie: the lower) or "
        "mean (rounded to the nearest grade, a half down); a judge that gave no grade for a "
        "pair is left out of that pair's combination (default majority)",
    )
    judges.add_argument(
        "--uncertainty-output",
        type=output_file,
        metavar="FILE.jsonl",
        help="with --also-judge: write the judges' disagreement per --uncertainty-unit as "
        "`slotwise sample --active --uncertainty FILE` reads it (a pair: the standard "
        "deviation of the judges' grades; a query: the mean of its pairs')",
    )
    judges.add_argument(
        "--uncertainty-unit", choices=("query", "pair"), default="query", help="(query)"
    )
    judges.add_argument(
        "--system-model",
        action="append",
        default=[],
        metavar="MODEL",
        help="the model of a judged system (repeatable; the outputs' actual_output.model "
        "are read too): a judge of its family (gpt/o1/o3/o4: OpenAI, claude: Anthropic, "
        "gemini/gemma: Google, llama: Meta, qwen, mistral, ...) is warned about "
        "(self-preference)",
    )
    holes = annotate.add_argument_group("pooling and hole filling (--task relevance)")
    holes.add_argument(
        "--runs",
        nargs="+",
        type=Path,
        metavar="OUTPUTS",
        help="pool the top --depth documents of these runs (outputs files with the passages' "
        "texts) and judge their relevance; each label's source goes to metadata.label_sources",
    )
    holes.add_argument("--depth", type=positive_int, default=10, help="pool depth per run (10)")
    holes.add_argument(
        "--holes",
        action="store_true",
        help="with --runs: judge only the pooled pairs that have no label yet (the others "
        "keep theirs); without it every pooled pair is judged, as PPI's predictions need",
    )
    holes.add_argument(
        "--dry-run",
        action="store_true",
        help="with --runs: say how many pairs would be judged (and the cost, where the "
        "annotator knows prices) and stop before any model call",
    )
    holes.add_argument(
        "--metrics",
        action="append",
        default=[],
        help="with --runs and --agreement: metrics whose ranking of the runs is compared "
        "under the human and the LLM labels (default: retrieval-ndcg-at-k@DEPTH)",
    )
    annotate.add_argument(
        "--no-response-token", help="the abstention token to read (default: NO-RESPONSE's first)"
    )
    return {"annotate": _annotate}


def _tasks(values: list[str]) -> list[str]:
    from engine.annotate.tasks import TASKS

    tasks = [t.strip() for v in values or ["utility"] for t in v.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise InputError(
            [Problem(f"unknown task {t!r}; tasks: {', '.join(TASKS)}") for t in unknown],
            summary="bad --task",
        )
    return list(dict.fromkeys(tasks))


def _raw_samples(path: Path) -> list[dict[str, Any]]:
    """The dataset's samples as written (so that labels not touched are kept as they are)."""
    suffix = format_suffix(path)
    if suffix == ".jsonl":
        return [raw for _, raw in read_jsonl(path)]
    if suffix in (".json", ".yaml", ".yml"):
        return list(read_document(path)["samples"])
    raise InputError([Problem("annotate reads .json, .yaml and .jsonl datasets", source=str(path))])


def _dataset(args: argparse.Namespace, engine: Engine) -> tuple[Path, Path | None]:
    declared = engine.config.datasets.get(args.dataset)
    if declared is not None:
        return declared.path, args.outputs or declared.outputs
    return Path(args.dataset), args.outputs


def _annotate(args: argparse.Namespace) -> int:
    from engine.annotate.tasks import annotate_samples
    from engine.io.records import outputs_of, samples_of
    from engine.io.sources import read_dataset, read_outputs

    tasks = _tasks(args.task)
    if args.runs is not None and tasks != ["relevance"]:
        raise UsageError("--runs pools documents for --task relevance alone")
    if args.runs is not None and args.outputs is not None:
        raise UsageError("the passages come from --runs: leave out --outputs")
    if args.runs is None and (args.holes or args.dry_run or args.metrics):
        raise UsageError("--holes, --dry-run and --metrics go with --runs OUTPUTS...")
    if args.runs is not None and args.agreement and args.holes:
        raise UsageError("--agreement judges the pairs people labelled: leave out --holes")
    if args.also_judge and args.runs is None:
        raise UsageError("--also-judge combines judges of --runs' pooled pairs: give --runs")
    if args.uncertainty_output is not None and not args.also_judge:
        raise UsageError("--uncertainty-output is the judges' disagreement: give --also-judge")
    _self_preference(args)
    engine = configured_engine(getattr(args, "config", None))
    path, outputs_path = _dataset(args, engine)
    name, columns = read_dataset(path)
    samples = samples_of(columns)
    raws = _raw_samples(path)
    if args.runs is not None:
        outputs_path = None  # the passages come from the runs
    outputs = outputs_of(read_outputs(outputs_path)) if outputs_path is not None else None
    cache = args.cache or args.output.with_suffix(".cache.sqlite")
    session = Session.of(args, cache, engine.config)
    try:
        if args.runs is not None:
            return _fill(args, name, columns, samples, raws, session, engine)
        labelled, report = session.run(
            tasks,
            lambda: annotate_samples(
                raws,
                samples,
                outputs,
                session.annotator,
                session.runner,
                tasks,
                k=args.k,
                response_field=args.response_field,
                judge_max_tokens=args.judge_max_tokens,
                agreement=args.agreement,
                judge=args.judge,
                announce=session.announce,
            ),
        )
    except Ended as ended:
        return ended.code
    _write(args.output, labelled, name, report.lines(), session.cache_path)
    if report.agreement is not None:
        print("\n".join(report.agreement.lines()))
    unreadable = [*report.unreadable, *report.claims_unreadable]
    return session.finished(unreadable, report.failed, args.output)


def _fill(
    args: argparse.Namespace,
    name: str | None,
    columns: Any,
    samples: Any,
    raws: list[dict[str, Any]],
    session: Session,
    engine: Engine,
) -> int:
    """``annotate --runs``: pool the runs, judge the pooled pairs (only the unlabelled
    ones with --holes) and write the dataset with each label's source."""
    from engine.annotate.holes import fill_holes, pool, relevance_agreement
    from engine.io.sources import read_outputs

    runs = [read_outputs(path) for path in args.runs]
    pooled = pool(columns, runs, args.depth)
    if pooled.unknown:
        print(
            f"{pooled.unknown} run row(s) name samples not in the dataset (left out)",
            file=sys.stderr,
        )
    only = None
    if args.agreement:  # the pairs of the samples that have human relevance labels
        has_labels = columns.column("relevance").is_valid().to_numpy(zero_copy_only=False)
        only = has_labels[pooled.rows]
    judged = []
    for judge, current in _judges(args, session, engine.config):
        work = functools.partial(
            fill_holes,
            raws,
            samples,
            pooled,
            current.annotator,
            current.runner,
            every=not args.holes,
            only=only,
            judge=args.judge,
            judge_max_tokens=args.judge_max_tokens,
            announce=current.announce,
        )
        labelled, filling = current.run(["relevance"], work)
        judged.append((judge, labelled, filling))
    several = len(judged) > 1
    lines = [
        f"{judge}: {line}" if several else line
        for judge, _, filling in judged
        for line in filling.lines()
    ]
    unreadable, failed = filling.unreadable, filling.failed
    ensemble = None
    if several:
        labelled, filling, ensemble = _combined(args, raws, judged)
        lines += ensemble.lines()
        if args.uncertainty_output is not None:
            from engine.io.uncertainty import write_uncertainty

            write_uncertainty(args.uncertainty_output, ensemble.uncertainty(args.uncertainty_unit))
            lines.append(f"wrote {args.uncertainty_output} (the judges' disagreement)")
        unreadable, failed = ensemble.unjudged, []
    _write(args.output, labelled, name, lines, session.cache_path)
    if args.agreement:
        metrics = split_specs(args.metrics) or [f"retrieval-ndcg-at-k@{args.depth}"]
        named = {str(path): run for path, run in zip(args.runs, runs, strict=True)}
        found = relevance_agreement(raws, labelled, filling, named, metrics, engine)
    mutual = _mutual(ensemble) if ensemble is not None else None
    if args.agreement:
        _print_agreement(args, engine, raws, labelled, found, mutual)
    elif mutual is not None:
        _print_mutual(args, mutual)
    return session.finished(unreadable, failed, args.output)


def _judges(args: argparse.Namespace, session: Session, config: Config) -> Any:
    """(name, session) of the judge --model names and of each --also-judge, in turn (each
    session is closed when its run ends; all share the cache and ``config``)."""
    yield args.model, session
    models = [args.model, *(spec.partition("@")[0] for spec in args.also_judge)]
    for spec in args.also_judge:
        model, _, url = spec.partition("@")
        if not model:
            raise UsageError(f"--also-judge {spec!r}: name the model (MODEL[@BASE_URL])")
        judge_args = argparse.Namespace(**{**vars(args), "model": model})
        if url:
            judge_args.base_url = url
        name = spec if models.count(model) > 1 else model
        yield name, Session.of(judge_args, session.cache_path, config)


def _combined(
    args: argparse.Namespace, raws: list[dict[str, Any]], judged: list[Any]
) -> tuple[list[dict[str, Any]], Any, Any]:
    """The judges' labels combined by --combine, the filling that reads the combined
    labels' source, and the ensemble."""
    import attrs

    from engine.annotate.ensemble import combine

    labelled, ensemble = combine(
        raws, [(name, labels, filling.source) for name, labels, filling in judged], args.combine
    )
    return labelled, attrs.evolve(judged[0][2], source=ensemble.source), ensemble


def _mutual(ensemble: Any) -> Any:
    from engine.analysis.agreement import mutual_agreement

    return mutual_agreement(ensemble.names, ensemble.grades)


def _print_mutual(args: argparse.Namespace, mutual: Any) -> None:
    """The judges' agreement among themselves in --agreement-format."""
    import json

    if args.agreement_format == "json":
        print(json.dumps({"among_judges": mutual.to_dict()}, indent=2, ensure_ascii=False))
    else:
        print(mutual.to_markdown() if args.agreement_format == "markdown" else mutual.text())


def _preference(args: argparse.Namespace) -> list[str]:
    """A self-preference warning for each judge of the family of a --system-model or of
    a model the outputs name."""
    from engine.annotate.families import self_preference

    models = {args.model: args.model, **{s: s.partition("@")[0] for s in args.also_judge}}
    paths = tuple(args.runs or ([args.outputs] if args.outputs is not None else []))
    return self_preference(models, [*args.system_model, *_named_models(paths)])


@functools.lru_cache(maxsize=4)
def _named_models(paths: tuple[Path, ...]) -> tuple[str, ...]:
    """The models that JSON/JSONL outputs files name (``actual_output.model``), once each."""
    from engine.io.files import parse_json, read_text

    found: dict[str, None] = {}
    for path in paths:
        suffix = format_suffix(path)
        if suffix not in (".json", ".jsonl"):
            continue
        text = read_text(path, lines=False)
        if '"model"' not in text:
            continue
        if suffix == ".jsonl":
            outputs = [
                raw.get("actual_output") for _, raw in read_jsonl(path) if isinstance(raw, dict)
            ]
        else:
            document = parse_json(text, str(path))
            if isinstance(document, dict) and "schema" in document:
                document = document.get("outputs")  # a results file that kept its outputs
            outputs = list(document.values()) if isinstance(document, dict) else []
        for output in outputs:
            if isinstance(output, dict) and isinstance(output.get("model"), str):
                found[output["model"]] = None
    return tuple(found)


def _self_preference(args: argparse.Namespace) -> None:
    """Log each self-preference warning (WARNING: on stderr)."""
    from engine.logs import log

    for warning in _preference(args):
        log.warning("judge.self_preference", warning=warning)


def _print_agreement(
    args: argparse.Namespace,
    engine: Engine,
    raws: Any,
    labelled: Any,
    found: Any,
    mutual: Any = None,
) -> None:
    """The judge's agreement with the human labels (and, with --also-judge, the judges'
    among themselves) in --agreement-format."""
    import json

    import attrs

    from engine.analysis.agreement import SystemOrder, judge_agreement

    graded = judge_agreement(engine.dataset(samples=raws), engine.dataset(samples=labelled))
    if args.agreement_format == "text":  # the runs' order is in found's lines
        print("\n".join([*found.lines(), *graded.lines()]))
        if mutual is not None:
            print(mutual.text())
        return
    orders = tuple(SystemOrder(r.metric, r.human, r.llm, r.tau) for r in found.rankings)
    graded = attrs.evolve(graded, rankings=orders)
    if args.agreement_format == "markdown":
        among = "\n" + mutual.to_markdown() if mutual is not None else ""
        print(graded.to_markdown() + among, end="")
        return
    document = {
        **graded.to_dict(),
        "source": found.source,
        "self_preference": _preference(args),
        "among_judges": None if mutual is None else mutual.to_dict(),
    }
    print(json.dumps(document, indent=2, ensure_ascii=False))


def _write(output: Path, labelled: list[Any], name: Any, lines: Any, cache: Any) -> None:
    """Write the labelled dataset (validated first: never an invalid one) and say so."""
    from engine.io.documents import parse_samples, write_samples

    parse_samples((raw, None) for raw in labelled)
    write_samples(output, labelled, name=name)
    for line in lines:
        print(line, file=sys.stderr)
    print(f"wrote {output} ({len(labelled)} samples; cache {cache})", file=sys.stderr)
