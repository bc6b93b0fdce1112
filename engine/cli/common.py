"""What the CLI's command modules share: argument converters (each rejects a bad value
with a message argparse turns into a usage error, exit 2), metric specs from the command
line, and writing a command's output to stdout or, atomically, to a file."""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.analysis.defaults import DEFAULT_SEED, DEFAULT_TEST_RESAMPLES, TESTS
from engine.cli.console import print_blocks
from engine.errors import InputError, MetricParameterError, Problem
from engine.io.config import CONFIG_ENV
from engine.io.files import format_suffix, read_document
from engine.io.writer import atomic_write, note_inputs

if TYPE_CHECKING:  # what evaluates is imported when a command runs, not for its --help
    from engine.evaluation.api import Engine
    from engine.evaluation.metric import Metric
    from engine.evaluation.results import Results

__all__ = [
    "LARGEST_INT",
    "OUTPUT_TYPES",
    "Handler",
    "Parser",
    "UsageError",
    "add_ray_options",
    "configured_engine",
    "emit",
    "emit_tables",
    "explain_inputs",
    "load_results",
    "metrics_with_k",
    "names_option",
    "non_negative",
    "non_negative_int",
    "output_file",
    "output_or_stdout",
    "parse_cutoffs",
    "positive_float",
    "positive_int",
    "probability",
    "ray_options",
    "share",
    "split_specs",
    "statistics_options",
]

#: A command: takes the parsed arguments, returns the exit code.
Handler = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """The command line asks for something impossible (exit ``status``, 2 unless a command
    says otherwise, with the usage)."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


class Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit through the program's own error path, with status
    ``usage_status`` (2; ``trec-eval`` sets 1, trec_eval's), each command reporting its own
    unrecognised arguments."""

    usage_status = 2

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise UsageError(message, self.usage_status)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


#: The largest value an integer option takes (a cutoff, a count, a seed): a larger one is a
#: usage error, never an overflow deep in the arrays.
LARGEST_INT = 2**31 - 1


def _number(
    kind: type[float] | type[int], accept: Callable[[float], bool], wording: str
) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {wording}, got {text!r}") from None
        if not (math.isfinite(value) and accept(value)):
            raise argparse.ArgumentTypeError(f"must be {wording}, got {text!r}")
        return value

    return convert


positive_int = _number(
    int, lambda v: 0 < v <= LARGEST_INT, f"a positive integer up to {LARGEST_INT}"
)
non_negative_int = _number(
    int, lambda v: 0 <= v <= LARGEST_INT, f"an integer from 0 to {LARGEST_INT}"
)
positive_float = _number(float, lambda v: v > 0, "a positive number")
probability = _number(float, lambda v: 0 < v < 1, "a number between 0 and 1")
non_negative = _number(float, lambda v: v >= 0, "a number that is not negative")
share = _number(float, lambda v: 0 <= v <= 1, "a share from 0 to 1")


def output_file(text: str) -> Path:
    """An option's file to write. ``-`` is refused: the command writes a file of its own
    (a dataset, a handout, a report), not a stream to standard output."""
    if text == "-":
        raise argparse.ArgumentTypeError(
            "names the file to write; '-' (standard output) is not one: name a file"
        )
    return Path(text)


def output_or_stdout(text: str) -> Path | None:
    """An option's file to write, ``-`` for standard output (as when the option is not
    given), as trec_eval's and Unix tools' users write it."""
    return None if text == "-" else output_file(text)


#: The argument converters that mark an option as one the command writes (every other
#: file named is an input, which no output may overwrite).
OUTPUT_TYPES = (output_file, output_or_stdout)


def parse_cutoffs(text: str) -> list[int]:
    """``--k`` values: one positive integer, or several separated by commas (a curve)."""
    try:
        cutoffs = [int(positive_int(part.strip())) for part in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer up to {LARGEST_INT} or a comma-separated list of "
            f"them, got {text!r}"
        ) from None
    return list(dict.fromkeys(cutoffs))


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


def add_ray_options(group: Any) -> None:
    """``--ray-address`` and ``--runtime-env``, for a command with ``--executor ray``."""
    group.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --executor ray: the cluster (HOST:6379 on a node of it, ray://HOST:10001 "
        "from outside, auto: the one `ray start` started here; default: ray.address in "
        "slotwise.yaml, else RAY_ADDRESS, else a local Ray); one that does not answer in "
        "5 s is an error naming it",
    )
    group.add_argument(
        "--runtime-env",
        type=Path,
        metavar="FILE",
        help="with --executor ray: a YAML or JSON file of Ray's runtime_env for the workers "
        "(env_vars, py_modules such as a slotwise wheel and plugin wheels, pip, "
        "working_dir; paths relative to the file); default: ray.runtime_env in slotwise.yaml",
    )


def ray_options(args: argparse.Namespace) -> dict[str, Any]:
    """What ``--ray-address`` and ``--runtime-env`` set, over slotwise.yaml's ``ray``."""
    from engine.io.runtime_env import read_runtime_env

    found: dict[str, Any] = {}
    if getattr(args, "ray_address", None):
        found["address"] = args.ray_address
    if getattr(args, "runtime_env", None) is not None:
        found["runtime_env"] = read_runtime_env(args.runtime_env)
    return found


def configured_engine(
    config: Path | None, ray: dict[str, Any] | None = None, **options: Any
) -> Engine:
    """The engine of a command (:meth:`Engine.from_config`: ``--config``, else the file
    ``SLOTWISE_CONFIG`` names, else the nearest ``slotwise.yaml`` upward; ``ray`` over
    its ``ray`` options), saying on stderr, before anything else is printed, which file
    it read and which defaults that file set: a file found upward moves numbers, and the
    terminal says so."""
    from engine.evaluation.api import Engine
    from engine.io.config import Config

    found = Config.load(config) if config is not None else Config.discover()
    if ray:
        found = found._replace(ray={**found.ray, **ray})
    engine = Engine(config=found, **options)
    found = engine.config
    note_inputs(found.source)
    if found.source is not None:
        if config is not None:
            how = "--config"
        elif os.environ.get(CONFIG_ENV):
            how = f"named by {CONFIG_ENV}"
        else:
            how = "the nearest upward from the working directory"
        defaults = found.provenance()["defaults"]
        ours = {name: d["value"] for name, d in defaults.items() if d["set_by"] == found.origin}
        sets = ", ".join(f"{name}={value}" for name, value in ours.items()) or "no default"
        text = f"slotwise: read {found.origin} ({how}); it sets {sets}"
        from engine.logs import say

        say("config.read", text, path=found.origin, found=how, sets=ours)
    return engine


def load_ahead(engine: Engine, specs: Sequence[str]) -> None:
    """Have ``engine`` find its plugins and import those of ``specs`` now (a command does
    it on a thread while it reads its files); a bad spec or plugin is reported where the
    command asks for its metric."""
    from engine.evaluation.metric import parse_spec

    aliases = []
    for spec in specs:
        with contextlib.suppress(MetricParameterError):
            aliases.append(parse_spec(spec).alias)
    engine.registry.preload(aliases)


def metrics_with_k(engine: Engine, specs: Sequence[str], ks: Sequence[int] | None) -> list[Metric]:
    """The metrics of ``specs``; each spec that gives no k of its own, for a metric that
    has one, at every cutoff of ``ks`` (``--k``)."""
    import attrs

    from engine.evaluation.metric import metric_label, parse_spec

    resolved: dict[str, Metric] = {}
    cutoffs: list[int | None] = list(ks) if ks else [None]
    for spec in specs:
        for k in cutoffs:
            metric = engine.metric(spec)  # unknown names get engine.metric's hints
            takes_k = any(f.name == "k" for f in attrs.fields(type(metric)))  # type: ignore[arg-type]
            if k is not None and takes_k and "k" not in parse_spec(spec).params:
                metric = engine.metric(spec, k=k)
            resolved.setdefault(metric_label(metric), metric)
    return list(resolved.values())


def emit(text: str | bytes, output: Path | None) -> None:
    """Write to stdout, or atomically to ``output`` (saying so on stderr)."""
    if output is None:
        if isinstance(text, bytes):
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text)
        return
    atomic_write(output, text)
    print(f"wrote {output}", file=sys.stderr)


def emit_tables(tables: Sequence[Any], lines: Sequence[str], output: Path | None) -> None:
    """Rich tables and plain lines, to the terminal or as text to ``output``."""
    if output is None:
        print_blocks(tables, lines)
    else:
        emit(print_blocks(tables, lines, file=io.StringIO()), output)


def _results_of(path: Path, dataset: Any, metrics: Sequence[str]) -> Results:
    """The results in ``path``, or the outputs in it scored on ``dataset`` by ``metrics``."""
    from engine.evaluation.results import read_results

    if dataset is None or _is_results(path):
        return read_results(path)
    if not metrics:
        raise InputError(
            [
                Problem(
                    "an outputs file is scored with --metrics: name the metrics", source=str(path)
                )
            ],
            summary="no metrics",
        )
    # as `slotwise run` and `evaluate` score an outputs file: a sample it lacks is an error
    evaluation = dataset.with_metrics(list(metrics))
    return evaluation.evaluate(path, keep_outputs=True)  # type: ignore[no-any-return]


def _is_results(path: Path) -> bool:
    """Whether ``path`` holds a results document (not an outputs file)."""
    from engine.io.documents import RESULTS_SCHEMA_ID

    if format_suffix(path) != ".json":
        return False
    document = read_document(path)
    return isinstance(document, dict) and document.get("schema") == RESULTS_SCHEMA_ID


def statistics_options(parser: argparse.ArgumentParser) -> None:
    """The options of the paired tests (compare, report)."""
    parser.add_argument(
        "--test",
        choices=TESTS,
        default="randomization",
        help="paired test: randomization (Fisher sign-flip, exact for n <= 13), bootstrap, "
        "or t (paired t-test); default randomization",
    )
    parser.add_argument(
        "--alpha",
        type=probability,
        default=0.05,
        help="significance level after Holm's correction (default 0.05)",
    )
    parser.add_argument(
        "--resamples",
        type=positive_int,
        default=DEFAULT_TEST_RESAMPLES,
        help=f"resamples of the randomization/bootstrap test (default {DEFAULT_TEST_RESAMPLES})",
    )
    parser.add_argument(
        "--seed",
        type=non_negative_int,
        default=DEFAULT_SEED,
        help=f"random seed (default {DEFAULT_SEED})",
    )
    names_option(parser)


def names_option(parser: argparse.ArgumentParser) -> None:
    """``--names``: the systems of the results files."""
    parser.add_argument(
        "--names",
        type=lambda text: [name.strip() for name in text.split(",")],
        help="comma-separated system names (default: the file names without .json)",
    )


def explain_inputs(parser: argparse.ArgumentParser) -> None:
    """What explaining a sample needs besides the results (explain, report)."""
    parser.add_argument(
        "--dataset",
        help="the dataset: a file, or a name declared in slotwise.yaml (default: the "
        "results' dataset name, as declared); `report` re-scores results scored on other "
        "labels (e.g. before `annotate --holes` added some) on it, from their kept outputs",
    )
    parser.add_argument(
        "--outputs",
        type=Path,
        action="append",
        metavar="FILE",
        help="the outputs file each results file scored, once per results file in order "
        "(default: the outputs the results kept)",
    )


def load_results(
    paths: Sequence[Path],
    names: list[str] | None,
    *,
    dataset: Any = None,
    metrics: Sequence[str] = (),
) -> tuple[list[Results], list[str]]:
    """Results files and the names of their systems. With ``dataset`` and ``metrics``, a
    file that is not a results document is an outputs file, scored on ``dataset``."""
    results = [_results_of(path, dataset, metrics) for path in paths]
    if names is None:
        names = [path.stem for path in paths]
        if len(set(names)) != len(names):
            names = [str(path) for path in paths]
    if len(names) != len(paths) or len(set(names)) != len(names) or not all(names):
        raise InputError(
            [Problem(f"--names needs {len(paths)} distinct names, got {','.join(names)}")],
            summary="bad --names",
        )
    return results, names
