"""Exceptions raised by slotwise. Each failure has one small class; all derive from
:class:`SlotwiseError` and from the builtin they refine."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

__all__ = [
    "ClusterError",
    "ConfigError",
    "DuplicateMetricError",
    "InputError",
    "MetricLoadError",
    "MetricParameterError",
    "MetricRequirementError",
    "MetricScoreError",
    "MissingDependencyError",
    "OutputError",
    "Problem",
    "RunInterrupted",
    "SlotwiseError",
    "UnknownMetricError",
]


class SlotwiseError(Exception):
    """Base class of every error slotwise raises on purpose."""


class Problem(NamedTuple):
    """One thing wrong with the input: where it is and why it is wrong (a named tuple, not
    an attrs class: the command line imports this module before it knows its command, and
    attrs was a fifth to a third of ``slotwise --help``'s time)."""

    message: str
    sample_id: str | None = None
    pointer: str = ""
    source: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = []
        if self.source:
            where.append(f"{self.source}:{self.line}" if self.line else self.source)
        elif self.line:
            where.append(f"line {self.line}")
        if self.sample_id is not None:
            where.append(f"sample {self.sample_id!r}")
        if self.pointer:
            where.append(self.pointer)
        return f"{' '.join(where)}: {self.message}" if where else self.message


class InputError(SlotwiseError, ValueError):
    """The input (dataset, outputs, config) is invalid; ``problems`` lists every issue found."""

    def __init__(
        self, problems: Iterable[Problem], summary: str = "invalid input", hint: str = ""
    ) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.summary = summary
        count = len(self.problems)
        lines = [f"{summary}: {count} problem{'s' if count != 1 else ''}"]
        lines += [f"  {p}" for p in self.problems[:50]]
        if count > 50:
            lines.append(f"  ... and {count - 50} more")
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))


class ConfigError(InputError):
    """slotwise.yaml (or an ``Engine(config=...)`` mapping) is invalid."""


class UnknownMetricError(SlotwiseError, LookupError):
    """No installed or registered metric has this alias."""

    def __init__(self, alias: str, available: Sequence[str], suggestions: Sequence[str]) -> None:
        self.alias = alias
        self.available = tuple(available)
        self.suggestions = tuple(suggestions)
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(
            f"Unknown metric {alias!r}.{hint} `slotwise metrics` lists the installed metrics "
            "(engine.metrics() in Python)."
        )

    def __str__(self) -> str:
        return str(self.args[0])


class DuplicateMetricError(SlotwiseError, LookupError):
    """Two distributions (or an in-process registration) claim the same alias."""

    def __str__(self) -> str:
        return str(self.args[0])


class MetricLoadError(SlotwiseError, ImportError):
    """A metric plugin could not be imported or is not a valid metric; the cause is kept."""

    def __init__(self, alias: str, distribution: str | None, reason: str) -> None:
        self.alias = alias
        self.distribution = distribution
        self.reason = reason
        source = f" from distribution {distribution!r}" if distribution else ""
        super().__init__(f"metric {alias!r}{source} failed to load: {reason}")


class MetricParameterError(SlotwiseError, ValueError):
    """A metric spec or parameter is malformed or out of range."""


class MetricRequirementError(InputError):
    """The samples lack what a metric ``requires`` (answers, passage texts, groups, ...).
    Raised by ``Evaluation.run``, it keeps what the system returned in ``outputs`` (a
    ``Collected``: write it as an outputs file, label the samples, evaluate it), so that
    nothing gathered is lost; None otherwise."""

    outputs: Any = None


class MetricScoreError(SlotwiseError, RuntimeError):
    """A metric raised while scoring or returned a malformed result; the cause is kept."""


class MissingDependencyError(SlotwiseError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, cause: ImportError | None = None) -> None:
        missing = f" ({cause.name} is missing)" if cause is not None and cause.name else ""
        super().__init__(
            f"{feature} needs the optional extra '{extra}'{missing}: pip install 'slotwise[{extra}]'"
        )


class ClusterError(SlotwiseError, ConnectionError):
    """A Ray cluster cannot be reached, refused the driver, or its workers cannot import
    what the job needs; names the address, why, and the fix."""

    def __init__(self, address: str, reason: str, fix: str) -> None:
        self.address, self.reason, self.fix = address, reason, fix
        super().__init__(f"the Ray cluster at {address}: {reason}" + (f"; {fix}" if fix else ""))


class OutputError(SlotwiseError):
    """An output cannot be written: it is one of the command's inputs, or the system
    refused it (disk full, read-only, quota, file size limit); names the path and why."""

    def __init__(self, path: Any, reason: Any) -> None:
        if isinstance(reason, OSError):
            reason = reason.strerror or str(reason)
        self.path = str(path)
        self.reason = str(reason)
        super().__init__(f"cannot write {self.path}: {self.reason}")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run of a system (``Evaluation.run``, ``Dataset.collect``) at once.
    ``outputs`` (a ``Collected``) holds what the system returned before it, ``results``
    those samples scored (partial results; None from ``collect``, or when they could not
    be scored). A ``KeyboardInterrupt``, so that ``except Exception`` never swallows it."""

    def __init__(self, outputs: Any, results: Any = None) -> None:
        super().__init__(outputs, results)
        self.outputs = outputs
        self.results = results

    def __str__(self) -> str:
        gathered = len(self.outputs.outputs) + len(self.outputs.errors)
        kept = ".outputs and .results (scored)" if self.results is not None else ".outputs"
        return (
            f"interrupted after {gathered} of {self.outputs.samples} samples; what was "
            f"gathered is kept on this exception: {kept}"
        )
