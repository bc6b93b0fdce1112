"""What the commands that call an LLM share (``annotate``, ``synthesize``): the annotator
and its options, the runner's options (batches, concurrency, retries, rate limit,
executor), the cache, and a :class:`Session` that runs the work and ends it: the tally,
everything closed, how to resume after Ctrl-C or a failure, and the verdict on what was
left unlabelled (exit 3 past ``--max-unlabelled``)."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from engine.cli.common import (
    add_ray_options,
    non_negative,
    non_negative_int,
    positive_float,
    positive_int,
    ray_options,
    share,
)
from engine.errors import InputError, Problem
from engine.redact import redact

if TYPE_CHECKING:  # the annotation machinery is imported when the command runs
    from engine.annotate.runner import Runner
    from engine.io.config import Config

__all__ = ["EXIT_INCOMPLETE", "Ended", "Session", "add_llm_options"]

T = TypeVar("T")

#: Command-line options handed to the annotator's constructor (when it takes them).
ANNOTATOR_OPTIONS = (
    "device",
    "dtype",
    "max_length",
    "base_url",
    "api_key_env",
    "method",
    "samples",
    "temperature",
    "timeout",
    "no_response_token",
    "prices",
    "structured",
)
#: The exit status when more than --max-unlabelled of the items were left unlabelled
#: (everything else was written).
EXIT_INCOMPLETE = 3


def add_llm_options(parser: argparse.ArgumentParser) -> Any:
    """Add the annotator, cache and running options; returns the openai-compatible
    annotator's argument group, for the command's own options of that group."""
    parser.add_argument(
        "--annotator", required=True, help="annotator plugin: transformers, openai-compatible, ..."
    )
    parser.add_argument("--model", required=True, help="model directory, or the model's name")
    parser.add_argument(
        "--cache", type=Path, help="SQLite cache (default: OUTPUT with suffix .cache.sqlite)"
    )
    group = parser.add_argument_group("running")
    group.add_argument("--batch-size", type=positive_int, help="items per model call")
    group.add_argument("--concurrency", type=positive_int, help="batches in flight")
    group.add_argument(
        "--retries", type=non_negative_int, default=4, help="retries of a failed call (4)"
    )
    group.add_argument(
        "--backoff",
        type=float,
        default=0.5,
        help="first retry delay in seconds, doubled each time (a server's Retry-After wins)",
    )
    group.add_argument(
        "--max-wait",
        type=non_negative,
        default=300.0,
        metavar="SECONDS",
        help="the most seconds, in all, to wait out the endpoint's rate limits (HTTP 429 or "
        "503 with Retry-After; such waits spend no retry); past it the run stops (300)",
    )
    group.add_argument(
        "--max-unlabelled",
        type=share,
        default=0.05,
        metavar="SHARE",
        help="the largest share of the items asked about that may be left unlabelled "
        "(unreadable answers, failed calls) for exit 0; more: exit 3 (0.05)",
    )
    group.add_argument("--rate-limit", type=positive_float, help="at most this many requests/s")
    group.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where batches run: threads here (local), or --concurrency actors on a Ray "
        "cluster (RAY_ADDRESS, else a local Ray; needs slotwise[ray]); the cache stays here",
    )
    add_ray_options(group)
    group.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="one progress line per task: items done, retried calls, seconds waited on rate "
        "limits (default: on a terminal)",
    )
    group.add_argument(
        "--judge-max-tokens",
        type=positive_int,
        default=256,
        help="most tokens of a judge's answer, a claim list or a question (256)",
    )
    local = parser.add_argument_group("transformers annotator")
    local.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    local.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"))
    local.add_argument(
        "--max-length", type=positive_int, help="context limit in tokens (default: the model's)"
    )
    remote = parser.add_argument_group("openai-compatible annotator")
    remote.add_argument("--base-url", help="e.g. http://localhost:8000/v1")
    remote.add_argument("--api-key-env", metavar="VAR", help="environment variable with the key")
    remote.add_argument("--timeout", type=positive_float, help="request timeout in seconds (60)")
    remote.add_argument(
        "--structured",
        choices=("auto", "json-schema", "off"),
        help="ask for judge answers as structured output (response_format with the answer's "
        "JSON schema): auto (default) stops asking if the endpoint refuses it, json-schema "
        "always asks, off never does",
    )
    remote.add_argument(
        "--price",
        nargs=2,
        type=float,
        dest="prices",
        metavar=("PROMPT", "COMPLETION"),
        help="USD per million prompt and completion tokens, for the cost estimate",
    )
    return remote


def _annotator(args: argparse.Namespace) -> Any:
    """The annotator ``--annotator`` names, built with the options it takes; an option it
    does not take is an error."""
    import inspect

    from engine.annotate.base import AnnotatorRegistry

    cls = AnnotatorRegistry().get(args.annotator)
    accepted = inspect.signature(cls).parameters
    options: dict[str, Any] = {}
    for name in ANNOTATOR_OPTIONS:
        value = getattr(args, name, None)
        if value is None:
            continue
        if name not in accepted:
            flag = "--" + name.replace("_", "-")
            raise InputError(
                [Problem(f"{flag} does not apply to the {args.annotator} annotator")],
                summary="bad options",
            )
        options[name] = value
    return cls(args.model, **options)


def _runner(args: argparse.Namespace, annotator: Any, cache: Any, config: Config | None) -> Runner:
    """The runner the running options describe, with the annotator's defaults."""
    from engine.annotate.runner import Runner

    return Runner(
        cache,
        batch_size=args.batch_size or getattr(annotator, "default_batch_size", 1),
        concurrency=args.concurrency or getattr(annotator, "default_concurrency", 1),
        retries=args.retries,
        backoff=args.backoff,
        max_wait=args.max_wait,
        rate_limit=args.rate_limit,
        progress=args.progress,
        executor=_executor(args, config),
    )


def _executor(args: argparse.Namespace, config: Config | None) -> Any:
    """``--executor``; for ``ray``, with the cluster's options (``--ray-address``,
    ``--runtime-env``, over the ``ray`` of ``config``, the slotwise.yaml the command read;
    None: read it here)."""
    if args.executor != "ray":
        return args.executor
    from engine.evaluation.executors import RayExecutor
    from engine.io.config import Config

    if config is None:
        config = Config.load(args.config) if getattr(args, "config", None) else Config.discover()
    return RayExecutor(**{**config.ray, **ray_options(args)})


class Ended(Exception):
    """The command ended early with exit status ``code`` (a dry run's 0, Ctrl-C's 130)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _DryRun(Exception):
    """--dry-run: the plan was said; stop before any model call."""


class Session:
    """A command's annotator, cache and runner (``--dry-run``: a cache only looked in),
    its command line (for running it again, secrets as ``***``) and ``--max-unlabelled``."""

    def __init__(
        self,
        annotator: Any,
        cache: Any,
        runner: Runner,
        cache_path: Path,
        dry_run: bool,
        command: str,
        max_unlabelled: float,
    ) -> None:
        self.annotator = annotator
        self.cache = cache
        self.runner = runner
        self.cache_path = cache_path
        self.dry_run = dry_run
        self.command = command
        self.max_unlabelled = max_unlabelled

    @classmethod
    def of(
        cls, args: argparse.Namespace, cache_path: Path, config: Config | None = None
    ) -> Session:
        """The session of ``args``; ``config``: the slotwise.yaml the command read, for
        ``--executor ray``'s options (None: read it if needed)."""
        from engine.annotate.cache import Cache

        annotator = _annotator(args)
        dry_run = bool(getattr(args, "dry_run", False))
        cache = Cache(cache_path, look_only=dry_run)
        runner = _runner(args, annotator, cache, config)
        command = shlex.join(["slotwise", *map(redact, args.argv)])
        return cls(annotator, cache, runner, cache_path, dry_run, command, args.max_unlabelled)

    @property
    def resume(self) -> str:
        return (
            f"finished work is in the cache {self.cache_path}; run the same command again to "
            f"resume: {self.command}"
        )

    def announce(self, line: str) -> None:
        """Say the plan (on stderr); with ``--dry-run``, stop there."""
        print(line, file=sys.stderr)
        if self.dry_run:
            raise _DryRun

    def run(self, tasks: list[str], work: Callable[[], T]) -> T:
        """``work()``, then the tally and everything closed; :class:`Ended` after a dry
        run's plan (0) or Ctrl-C (130, saying how to resume); a failure that stops the
        run says how to resume too."""
        from engine.annotate.base import AnnotationError
        from engine.annotate.runner import AnnotationInterrupted

        try:
            return work()
        except _DryRun:
            raise Ended(0) from None
        except (KeyboardInterrupt, AnnotationInterrupted):
            print(f"slotwise: interrupted; {self.resume}", file=sys.stderr)
            raise Ended(130) from None
        except AnnotationError as error:
            raise AnnotationError(f"{error}\n{self.resume}") from error
        finally:
            if not self.dry_run:
                _log_finished(self.runner, tasks, self.cache_path)
            self.runner.close()
            self.cache.close()
            self.annotator.close()

    def finished(self, unreadable: Sequence[str], failed: Sequence[str], output: Path) -> int:
        """After the output is written: the structured-output note, what was left
        unlabelled (listed in full in OUTPUT with suffix ``.unlabelled.txt``) and how to
        ask for it alone; 0, or :data:`EXIT_INCOMPLETE` when that is more than
        ``--max-unlabelled`` of the items asked about."""
        if getattr(self.annotator, "structured", None) == "auto" and not self.annotator.structuring:
            print(
                "structured output: the endpoint refused response_format; the answers were "
                "read by their free-text patterns (docs/annotation.md#prompts-and-answers)",
                file=sys.stderr,
            )
        listed = output.with_suffix(".unlabelled.txt")
        missing = len(unreadable) + len(failed)
        if not missing:
            listed.unlink(missing_ok=True)  # a list an earlier run left
            return 0
        listed.write_text(
            "".join(f"unreadable\t{item}\n" for item in unreadable)
            + "".join(f"failed\t{item}\n" for item in failed),
            encoding="utf-8",
        )
        asked = max(self.runner.stats.items, missing)
        over = missing / asked > self.max_unlabelled
        print(
            f"slotwise: {missing} of the {asked} items asked about ({missing / asked:.1%}) "
            f"were left unlabelled: {len(unreadable)} unreadable answer(s), {len(failed)} "
            f"failed call(s); {'more than' if over else 'within'} --max-unlabelled "
            f"{self.max_unlabelled:g}; all listed in {listed}\n"
            f"to ask for those alone (the cache {self.cache_path} has the rest): {self.command}",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE if over else 0


def _log_finished(runner: Runner, tasks: list[str], cache_path: Path) -> None:
    """Log the run's tally and say it on stderr."""
    stats: Mapping[str, Any] = {
        "items": runner.stats.items,
        "cached": runner.stats.cached,
        "computed": runner.stats.computed,
        "calls": runner.stats.calls,
        "prompt_tokens": runner.stats.prompt_tokens,
        "completion_tokens": runner.stats.completion_tokens,
        "unreadable": runner.stats.unreadable,
        "failed": runner.stats.failed,
        "truncated": runner.stats.truncated,
        "retried": runner.stats.retried,
        "waited": round(runner.stats.waited, 1),
    }
    from engine.logs import log

    log.info("annotate.finished", tasks=tasks, cache=str(cache_path), **stats)
    print(runner.stats.line(), file=sys.stderr)
