"""The ``slotwise`` command line: one thin module per command, this one assembling them.
Exit codes: 0 success, 2 bad input or usage, 1 internal error (a plugin that fails while
scoring, a bug), 130 interrupted."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from engine.cli import (
    annotate,
    compare,
    convert,
    explain,
    listing,
    meta,
    process,
    report,
    run,
    trec_eval,
    validate,
)
from engine.cli.common import Handler, Parser, UsageError
from engine.errors import MetricScoreError, SlotwiseError
from engine.io.config import CONFIG_ENV, CONFIG_FILENAME
from engine.logs import configure
from engine.version import VERSION

__all__ = ["main", "program"]

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
_COMMANDS = (run, trec_eval, listing, validate, convert, compare, report, explain, meta, annotate)


def _build_parser() -> tuple[Parser, dict[str, Handler]]:
    parser = Parser(
        prog="slotwise", description="Evaluate what a retriever put into an LLM's K prompt slots."
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
    for module in _COMMANDS:
        handlers.update(module.add(commands))
    return parser, handlers


def program() -> NoReturn:
    """The ``slotwise`` program: :func:`main` on the command line's arguments, then the
    process ends with its exit code (:func:`process.exit_with`)."""
    process.exit_with(main())


def main(argv: Sequence[str] | None = None) -> int:
    """The ``slotwise`` command line on ``argv`` (default: the process's arguments);
    returns the exit code, as many times as it is called."""
    process.prepare()
    parser, handlers = _build_parser()
    verbose = 0
    try:
        args = parser.parse_args(argv)
        verbose = args.verbose
        configure(
            args.log_format, {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
        )
        code = int(handlers[args.command](args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit, for short outputs too
        return code
    except SystemExit as exit_:  # --help, --version
        return int(exit_.code or 0)
    except UsageError as error:
        print(f"slotwise: error: {error}", file=sys.stderr)
        return error.status
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
    kind = type(error).__name__ + ": " if internal else ""
    print(f"slotwise: {prefix}: {kind}{error}", file=sys.stderr)
    if verbose >= 2:
        traceback.print_exception(error, file=sys.stderr)
    else:
        print("(run with -vv for the traceback)", file=sys.stderr)
