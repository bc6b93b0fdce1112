"""``slotwise.yaml``: declared datasets and metric defaults, found from the working
directory upward."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from engine.errors import ConfigError, Problem
from engine.io import schemas
from engine.io.files import read_document

__all__ = ["CONFIG_FILENAME", "DEFAULT_K", "Config", "DatasetDeclaration", "find_config"]

CONFIG_FILENAME = "slotwise.yaml"
DEFAULT_K = 5  # metrics.retrieval.default_k when slotwise.yaml does not set it


@attrs.frozen
class DatasetDeclaration:
    """A dataset declared by name: its file, default outputs file and metrics."""

    name: str
    path: Path
    outputs: Path | None = None
    metrics: tuple[str, ...] = ()


@attrs.frozen
class Config:
    """Resolved settings. ``Config()`` is the built-in default (k = 5, no datasets)."""

    default_k: int = DEFAULT_K
    datasets: Mapping[str, DatasetDeclaration] = attrs.field(factory=dict)
    metric_params: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    source: Path | None = None

    @classmethod
    def from_mapping(
        cls, data: Any, base: Path | None = None, source: Path | None = None
    ) -> Config:
        """Validate a parsed config (``config.schema.json``); relative paths resolve against ``base``."""
        data = {} if data is None else data
        problems = list(schemas.problems(data, "config", source=str(source) if source else None))
        if problems:
            raise ConfigError(problems, summary="invalid configuration")
        base = base or Path.cwd()
        datasets = {
            name: DatasetDeclaration(
                name=name,
                path=base / decl["path"],
                outputs=base / decl["outputs"] if "outputs" in decl else None,
                metrics=tuple(decl.get("metrics", ())),
            )
            for name, decl in data.get("datasets", {}).items()
        }
        metrics = data.get("metrics", {})
        return cls(
            default_k=metrics.get("retrieval", {}).get("default_k", DEFAULT_K),
            datasets=datasets,
            metric_params=metrics.get("params", {}),
            source=source,
        )

    @classmethod
    def load(cls, path: str | Path) -> Config:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(
                [Problem("no such file", source=str(path))], summary="invalid configuration"
            )
        return cls.from_mapping(read_document(path), base=path.parent, source=path)

    @classmethod
    def discover(cls, start: Path | None = None) -> Config:
        """Load the nearest ``slotwise.yaml`` at or above ``start`` (default: the working
        directory), or the defaults when there is none."""
        found = find_config(start)
        return cls.load(found) if found else cls()


def find_config(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_FILENAME
        if candidate.is_file():
            return candidate
    return None
