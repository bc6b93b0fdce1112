"""Datasets that plugins read: a reference ``scheme:rest`` (``irds:vaswani``,
``ragas:eval.jsonl``) names a plugin in the entry-point group ``slotwise.sources`` by its
scheme. A plugin is a callable ``load(rest) -> Loaded``, found and imported only when its
scheme is used, so a broken one fails alone, with its distribution named."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from engine.errors import InputError, Problem, SlotwiseError
from engine.evaluation.registry import installed_entry_points
from engine.logs import log

__all__ = ["GROUP", "Loaded", "SourceLoadError", "SourceRegistry", "is_reference"]

GROUP = "slotwise.sources"

_REFERENCE = re.compile(r"(?P<scheme>[a-z][a-z0-9_+-]+):(?P<rest>.+)", re.DOTALL)


@attrs.frozen
class Loaded:
    """What a source plugin read: ``samples`` (anything ``engine.dataset`` takes in
    Python: raw samples, qrels ``{qid: {docid: label}}``, a labels frame, Columns),
    optionally ``outputs`` for them (anything ``evaluate`` takes), a dataset ``name``."""

    samples: Any
    outputs: Any = None
    name: str | None = None


class SourceLoadError(SlotwiseError):
    """A source plugin could not be imported, or failed reading its reference."""


def is_reference(text: str) -> bool:
    """True for ``scheme:rest`` with a scheme of two or more characters (so ``C:\\data``
    stays a Windows path)."""
    return _REFERENCE.fullmatch(text) is not None


class SourceRegistry:
    """Installed source plugins by scheme. ``entry_points`` replaces discovery, for tests."""

    def __init__(
        self, entry_points: Callable[[], Iterable[importlib.metadata.EntryPoint]] | None = None
    ) -> None:
        self._find = entry_points or (lambda: installed_entry_points(GROUP))

    def schemes(self) -> list[str]:
        """Every installed scheme, without importing any plugin."""
        return sorted({ep.name for ep in self._find()})

    def load(self, reference: str) -> Loaded:
        """Read ``scheme:rest`` through the plugin of its scheme."""
        found = _REFERENCE.fullmatch(reference)
        if found is None:
            raise ValueError(f"{reference!r} is not a scheme:reference")
        scheme, rest = found["scheme"], found["rest"]
        candidates = {ep.value: ep for ep in self._find() if ep.name == scheme}
        if not candidates:
            known = ", ".join(f"{s}:" for s in self.schemes()) or "none installed"
            raise InputError(
                [Problem(f"no source plugin for {scheme}: (installed: {known})")],
                summary=f"unknown source {reference!r}",
            )
        if len(candidates) > 1:
            raise SourceLoadError(
                f"source {scheme}: is claimed by several plugins: {', '.join(sorted(candidates))}"
            )
        (entry_point,) = candidates.values()
        dist = getattr(entry_point, "dist", None)
        owner = f" (distribution {dist.metadata['Name']})" if dist is not None else ""
        try:
            read = entry_point.load()
        except Exception as error:
            log.warning("plugin.load_failed", source=scheme, reason=str(error))
            raise SourceLoadError(
                f"source plugin {scheme}:{owner} failed to load: {type(error).__name__}: {error}"
            ) from error
        try:
            loaded = read(rest)
        except SlotwiseError:
            raise
        except Exception as error:
            raise SourceLoadError(
                f"source plugin {scheme}:{owner} failed reading {rest!r}: "
                f"{type(error).__name__}: {error}"
            ) from error
        if not isinstance(loaded, Loaded):
            raise SourceLoadError(
                f"source plugin {scheme}:{owner} returned {type(loaded).__name__}, not Loaded"
            )
        return loaded
