"""The ``slotwise`` command line's commands, one thin module each, assembled into one
parser. Exit codes: 0 success, 2 bad input or usage (an input or output the system
refuses too), 1 internal error (a plugin that fails while scoring, a bug), 130
interrupted."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from engine.cli import process
from engine.cli.ahead import split_command
from engine.cli.common import OUTPUT_TYPES, Handler, Parser, UsageError
from engine.errors import MetricScoreError, OutputError, SlotwiseError
from engine.io.config import CONFIG_ENV, CONFIG_FILENAME
from engine.io.writer import STDOUT, guarding_inputs, note_inputs, refuse_inputs
from engine.redact import redact
from engine.version import VERSION

__all__ = ["main"]

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
#: The modules of engine.cli that add commands, in the order the help lists them, and the
#: commands each adds.
MODULES = {
    "run": ("run",),
    "trec_eval": ("trec-eval",),
    "listing": ("metrics",),
    "validate": ("validate",),
    "convert": ("trec",),
    "compare": ("compare",),
    "report": ("report",),
    "explain": ("explain",),
    "meta": ("correlate", "fit", "calibrate", "import-udcg-reference"),
    "annotate": ("annotate",),
    "synthesize": ("synthesize",),
    "sample": ("sample",),
    "example": ("example",),
    "labels": ("labels",),
    "relabel": ("relabel",),
}


def _build_parser(argv: Sequence[str]) -> tuple[Parser, dict[str, Handler]]:
    """The parser of the command ``argv`` names, or of every command when it names none
    (``--help``, a mistyped command): a command's module imports what the command needs,
    and a command line pays for no other (20-40 ms of a fresh process)."""
    parser = Parser(
        prog="slotwise",
        description="Evaluate what a retriever put into an LLM's K prompt slots.",
        allow_abbrev=False,  # what names the command is then plain to split_command too
    )
    parser.add_argument("--version", action="version", version=f"slotwise {VERSION}")
    parser.add_argument(
        "--config",
        type=Path,
        help=f"configuration file (default: the file {CONFIG_ENV} names, else the nearest "
        f"{CONFIG_FILENAME} from the working directory upward); results record which one "
        "set each default",
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
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    handlers: dict[str, Handler] = {}
    command = split_command(argv)[0]
    named = [name for name, adds in MODULES.items() if command in adds]
    version_only = command is None and "--version" in argv and not {"-h", "--help"} & set(argv)
    if not named and not version_only:
        named = list(MODULES)
    for name in named:
        handlers.update(importlib.import_module(f"engine.cli.{name}").add(commands))
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    """:func:`engine.cli.main`, the process prepared."""
    argv = sys.argv[1:] if argv is None else argv
    parser, handlers = _build_parser(argv)
    verbose = 0
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:  # --help, --version (within a command: _command)
            return int(exit_.code or 0)
        process.prepare()  # after the arguments: --help and --version need none of it
        verbose = args.verbose
        _configure_logs(args)
        outputs = _output_options(parser) & set(vars(args))
        with guarding_inputs(), _pipes_spooled(args, outputs):
            note_inputs(*_inputs_of(args, outputs))
            args.argv = list(argv)  # the command line, for a command that says how to rerun it
            for dest in outputs:  # before any work, not at the end
                refuse_inputs(getattr(args, dest))
            code = _command(handlers[args.command], args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit, for short outputs too
        return code
    except UsageError as error:
        print(f"slotwise: error: {redact(str(error))}", file=sys.stderr)
        return error.status
    except MetricScoreError as error:
        _report(error, verbose)
        return EXIT_INTERNAL
    except SlotwiseError as error:
        print(f"slotwise: error: {redact(str(error))}", file=sys.stderr)
        if isinstance(error, OutputError) and error.path == STDOUT:
            _drop_stdout()  # what is left in its buffer would fail again at exit
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("slotwise: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as C tools do
        _drop_stdout()
        return 141
    except OSError as error:  # an input or output the system refused, named
        where = f"{error.filename}: " if error.filename else ""
        print(f"slotwise: error: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as error:
        _report(error, verbose, internal=True)
        return EXIT_INTERNAL


def _drop_stdout() -> None:
    """Send what stdout still holds to /dev/null: it can no longer be written."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _command(handler: Handler, args: argparse.Namespace) -> int:
    """The command's exit code; a ``sys.exit`` inside it (a library's, a plugin's) is a
    failure, never taken for success."""
    try:
        return int(handler(args))
    except SystemExit as exit_:
        raise RuntimeError(f"sys.exit({exit_.code!r}) called while the command ran") from None


@contextlib.contextmanager
def _pipes_spooled(args: argparse.Namespace, outputs: set[str]) -> Iterator[None]:
    """Each input named as a pipe (a FIFO, or ``--run <(zcat run.gz)``) copied once into a
    temporary folder, and named by its copy meanwhile: the readers look at a file's first
    bytes, then read it from the start, which a pipe cannot give twice (they waited for a
    second writer for ever). A pipe named without a suffix has its copy named with the one
    its bytes tell (documents and tables are read by suffix)."""
    piped = {
        dest: value
        for dest, value in vars(args).items()
        if dest not in outputs
        and any(_is_pipe(item) for item in (value if isinstance(value, list) else [value]))
    }
    if not piped:
        yield
        return
    import shutil
    import tempfile

    from engine.io.sniff import document_suffix

    with tempfile.TemporaryDirectory(prefix="slotwise-pipes-") as folder:
        copies: dict[str, Any] = {}

        def spooled(item: Any) -> Any:
            if not _is_pipe(item):
                return item
            name = os.fspath(item)
            if name not in copies:  # (two options may hold the same value)
                copy = Path(folder, f"{len(copies)}-{Path(item).name}")
                with open(item, "rb") as pipe, copy.open("wb") as out:
                    shutil.copyfileobj(pipe, out, 1 << 20)
                if not Path(item).suffix:  # (/dev/fd/63: the format told by the bytes)
                    copy = copy.rename(copy.with_name(copy.name + document_suffix(copy)))
                copies[name] = copy
            return copies[name] if isinstance(item, Path) else str(copies[name])

        for dest, value in piped.items():
            setattr(
                args,
                dest,
                [spooled(v) for v in value] if isinstance(value, list) else spooled(value),
            )
        yield


def _is_pipe(item: Any) -> bool:
    import stat

    if not isinstance(item, str | os.PathLike) or os.fspath(item) == "-":
        return False
    try:
        return stat.S_ISFIFO(os.stat(item).st_mode)
    except (OSError, ValueError):
        return False


def _output_options(parser: argparse.ArgumentParser) -> set[str]:
    """The options (by ``dest``) that name what a command writes, of every command the
    parser holds: those whose converter is one of :data:`~engine.cli.common.OUTPUT_TYPES`
    (every other file named is an input)."""
    found = set()
    for action in parser._actions:
        if action.type in OUTPUT_TYPES:
            found.add(action.dest)
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found |= _output_options(command)
    return found


def _inputs_of(args: argparse.Namespace, outputs: set[str]) -> list[str]:
    """The files the command line names, for :func:`note_inputs`: every option's value
    that is an existing file, a directory's files or a glob's matches, outputs aside."""
    import glob

    found = []
    for dest, value in vars(args).items():
        if dest in outputs:
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str | os.PathLike):
                continue
            text = os.fspath(item)
            if os.path.isdir(text):
                found += [entry.path for entry in os.scandir(text)]
            else:
                found += glob.glob(text) if glob.has_magic(text) else [text]
    return found


def _configure_logs(args: argparse.Namespace) -> None:
    """Log events as ``--log-format`` says, at the level ``-v`` sets (logging is imported
    here: --help and --version need none of it)."""
    import logging

    from engine.logs import configure

    levels = {0: logging.WARNING, 1: logging.INFO}
    configure(args.log_format, levels.get(args.verbose, logging.DEBUG))


def _report(error: BaseException, verbose: int, internal: bool = False) -> None:
    prefix = "internal error" if internal else "error"
    kind = type(error).__name__ + ": " if internal else ""
    print(f"slotwise: {prefix}: {kind}{redact(str(error))}", file=sys.stderr)
    if verbose >= 2:
        import traceback

        print(redact("".join(traceback.format_exception(error))), end="", file=sys.stderr)
    else:
        print("(run with -vv for the traceback)", file=sys.stderr)
