"""Metric discovery through the ``slotwise.metrics`` entry-point group (via stevedore).

Two phases, as flake8's plugin finder does it: *find* lists every entry point as a
:class:`Candidate` without importing anything; *load* imports one alias on request,
checks it against the :class:`~engine.metric.Metric` protocol, and turns any failure
into a :class:`~engine.errors.MetricLoadError` that names the distribution.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.metadata
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from stevedore import NamedExtensionManager

from engine.errors import DuplicateMetricError, MetricLoadError, UnknownMetricError
from engine.evaluation.metric import check_metric_class
from engine.logs import log

__all__ = ["GROUP", "Candidate", "MetricInfo", "Registry", "installed_entry_points"]

GROUP = "slotwise.metrics"
IN_PROCESS = "<in-process>"


@attrs.frozen
class Candidate:
    """A metric found in the entry-point group, not yet imported."""

    alias: str
    entry_point: importlib.metadata.EntryPoint
    distribution: str | None
    version: str | None


@attrs.frozen
class MetricInfo:
    """What ``engine.metrics()`` and ``slotwise metrics`` report for one alias."""

    alias: str
    distribution: str | None
    version: str | None
    family: str | None = None
    description: str | None = None
    error: str | None = None


def installed_entry_points(group: str = GROUP) -> list[importlib.metadata.EntryPoint]:
    """Every entry point of ``group``, read (not imported) through stevedore.

    stevedore's on-disk cache keys on mtimes packed as 32-bit floats (about two minutes of
    resolution today), so it can miss a plugin installed moments ago. The listing is
    therefore checked against importlib.metadata, whose entry points also name their
    distribution; when the two disagree, importlib.metadata wins.
    """
    manager: NamedExtensionManager[Any] = NamedExtensionManager(
        group, names=[], on_missing_entrypoints_callback=None
    )
    listed = {(ep.name, ep.value) for ep in manager.list_entry_points()}
    current = list(importlib.metadata.entry_points(group=group))
    if listed != {(ep.name, ep.value) for ep in current}:
        log.debug("plugin.cache_stale", group=group)
    return current


def _candidate(
    ep: importlib.metadata.EntryPoint, described: dict[int, tuple[str, str]]
) -> Candidate:
    """``described`` remembers each distribution's (name, version): reading a
    distribution's metadata parses a file, and a plugin registers many metrics."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return Candidate(alias=ep.name, entry_point=ep, distribution=None, version=None)
    if id(dist) not in described:
        described[id(dist)] = (dist.metadata["Name"], dist.version)
    name, version = described[id(dist)]
    return Candidate(alias=ep.name, entry_point=ep, distribution=name, version=version)


class Registry:
    """Installed metrics (entry points) plus in-process ones (:meth:`register`).

    ``entry_points`` replaces discovery, for tests:
    ``Registry(entry_points=lambda: [EntryPoint("my-metric", "pkg.mod:Cls", GROUP)])``.
    """

    def __init__(
        self, entry_points: Callable[[], Iterable[importlib.metadata.EntryPoint]] | None = None
    ) -> None:
        self._find_entry_points = entry_points or installed_entry_points
        self._candidates: dict[str, list[Candidate]] | None = None
        self._local: dict[str, type[Any]] = {}
        self._loaded: dict[str, type[Any]] = {}

    # -- find ----------------------------------------------------------------------------

    def candidates(self) -> dict[str, list[Candidate]]:
        """Installed metrics by alias, sorted; more than one candidate is a conflict."""
        if self._candidates is None:
            found: dict[str, list[Candidate]] = {}
            seen = set()
            entry_points = list(self._find_entry_points())  # alive while ids are compared
            described: dict[int, tuple[str, str]] = {}
            for ep in entry_points:
                if (ep.name, ep.value) not in seen:
                    seen.add((ep.name, ep.value))
                    found.setdefault(ep.name, []).append(_candidate(ep, described))
            self._candidates = dict(sorted(found.items()))
        return self._candidates

    def aliases(self) -> list[str]:
        """Every available alias, without importing any plugin."""
        return sorted({*self.candidates(), *self._local})

    def preload(self, aliases: Iterable[str]) -> None:
        """Import the plugins of ``aliases`` ahead of :meth:`get` (a command does it on a
        thread while it reads its files). Quiet: what fails here fails again, and is
        reported, when :meth:`get` asks for it."""
        for alias in aliases:
            for candidate in self.candidates().get(alias, ()):
                with contextlib.suppress(Exception, SystemExit):
                    candidate.entry_point.load()

    # -- load ----------------------------------------------------------------------------

    def get(self, alias: str) -> type[Any]:
        """The metric class for ``alias``, importing only its plugin."""
        if alias in self._local:
            return self._local[alias]
        if alias in self._loaded:
            return self._loaded[alias]
        candidates = self.candidates().get(alias)
        if not candidates:
            raise UnknownMetricError(alias, self.aliases(), self._suggest(alias))
        if len(candidates) > 1:
            claims = "; ".join(
                f"{c.distribution or 'unknown distribution'} ({c.entry_point.value})"
                for c in candidates
            )
            raise DuplicateMetricError(
                f"metric alias {alias!r} is claimed by several plugins: {claims}"
            )
        cls = self._load(candidates[0])
        self._loaded[alias] = cls
        return cls

    def _load(self, candidate: Candidate) -> type[Any]:
        try:
            cls = candidate.entry_point.load()
        except (Exception, SystemExit) as error:  # a sys.exit() at import is a failure too
            reason = f"{type(error).__name__}: {error}"
            if isinstance(error, SystemExit):
                reason = f"it called sys.exit({error.code!r}) while being imported"
            log.warning(
                "plugin.load_failed",
                alias=candidate.alias,
                distribution=candidate.distribution,
                reason=reason,
            )
            raise MetricLoadError(candidate.alias, candidate.distribution, reason) from error
        reasons = check_metric_class(cls)
        if not reasons and cls.alias != candidate.alias:
            reasons = [f"its alias {cls.alias!r} differs from its entry point name"]
        if reasons:
            reason = f"{candidate.entry_point.value} is not a slotwise metric: {'; '.join(reasons)}"
            log.warning(
                "plugin.load_failed",
                alias=candidate.alias,
                distribution=candidate.distribution,
                reason=reason,
            )
            raise MetricLoadError(candidate.alias, candidate.distribution, reason)
        return cls  # type: ignore[no-any-return]

    def register(self, cls: type[Any]) -> type[Any]:
        """Add an in-process metric class; returns it, so it also works as a decorator."""
        reasons = check_metric_class(cls)
        if reasons:
            raise MetricLoadError(getattr(cls, "alias", repr(cls)), IN_PROCESS, "; ".join(reasons))
        if cls.alias in self.candidates() or self._local.get(cls.alias, cls) is not cls:
            raise DuplicateMetricError(f"metric alias {cls.alias!r} is already taken")
        self._local[cls.alias] = cls
        return cls

    def unregister(self, alias: str) -> None:
        """Remove an in-process metric (installed ones cannot be removed)."""
        self._local.pop(alias, None)

    def provenance(self, alias: str) -> tuple[str | None, str | None]:
        """(distribution, version) of the plugin providing ``alias``."""
        if alias in self._local:
            return IN_PROCESS, None
        candidates = self.candidates().get(alias) or []
        return (candidates[0].distribution, candidates[0].version) if candidates else (None, None)

    def describe(self) -> list[MetricInfo]:
        """Every alias with its family and description; broken plugins carry their error."""
        infos = []
        for alias in self.aliases():
            distribution, version = self.provenance(alias)
            try:
                cls = self.get(alias)
            except (MetricLoadError, DuplicateMetricError) as error:
                infos.append(MetricInfo(alias, distribution, version, error=str(error)))
                continue
            summary = (cls.__doc__ or "").strip().split("\n\n")[0]  # the first paragraph
            infos.append(
                MetricInfo(
                    alias,
                    distribution,
                    version,
                    family=getattr(cls, "family", None),
                    description=" ".join(summary.split()) or None,
                )
            )
        return infos

    def _suggest(self, alias: str) -> list[str]:
        aliases = self.aliases()
        close = difflib.get_close_matches(alias, aliases, n=3, cutoff=0.6)
        return close or [a for a in aliases if alias in a][:3]
