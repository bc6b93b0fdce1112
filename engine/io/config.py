"""``slotwise.yaml``: declared datasets and metric defaults. A library call reads only the
file it is given (or the one ``SLOTWISE_CONFIG`` names); the CLI and the pytest fixture
also find the nearest ``slotwise.yaml`` from the working directory upward
(:meth:`Config.discover`). Results record which file, if any, set each default
(:meth:`Config.provenance`). The records are named tuples: every command line imports
this module, ``--help`` included, and attrs was a fifth to a third of its time."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from engine.errors import ConfigError, Problem
from engine.io.files import read_document

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILENAME",
    "DEFAULT_K",
    "Config",
    "DatasetDeclaration",
    "find_config",
]

CONFIG_FILENAME = "slotwise.yaml"
CONFIG_ENV = "SLOTWISE_CONFIG"  # names the config file a library call reads
DEFAULT_K = 5  # metrics.retrieval.default_k when slotwise.yaml does not set it


class DatasetDeclaration(NamedTuple):
    """A dataset declared by name: its file, default outputs file and metrics."""

    name: str
    path: Path
    outputs: Path | None = None
    metrics: tuple[str, ...] = ()


class Config(NamedTuple):
    """Resolved settings. ``Config()`` is the built-in default (k = 5, no datasets).
    ``origin`` says where they came from: the file's absolute path, ``"mapping"`` (a
    mapping given in Python) or None (the built-in defaults); ``sets_k``, whether it set
    ``default_k``."""

    default_k: int = DEFAULT_K
    datasets: Mapping[str, DatasetDeclaration] = MappingProxyType({})
    metric_params: Mapping[str, Mapping[str, Any]] = MappingProxyType({})
    source: Path | None = None
    origin: str | None = None
    sets_k: bool = False
    #: ``ray``: the Ray executor's ``address`` and ``runtime_env`` (its local paths
    #: resolved against the file's folder).
    ray: Mapping[str, Any] = MappingProxyType({})

    @classmethod
    def from_mapping(
        cls, data: Any, base: Path | None = None, source: Path | None = None
    ) -> Config:
        """Validate a parsed config (``config.schema.json``); relative paths resolve against ``base``."""
        data = {} if data is None else data
        if data != {}:  # (an empty configuration is valid: no validator to build)
            from engine.io import schemas

            found = list(schemas.problems(data, "config", source=str(source) if source else None))
            if found:
                raise ConfigError(found, summary="invalid configuration")
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
        retrieval = metrics.get("retrieval", {})
        ray = dict(data.get("ray", {}))
        if "runtime_env" in ray:  # a mapping, or the path of a YAML or JSON file of one
            from engine.io.runtime_env import read_runtime_env, resolve_runtime_env

            env = ray["runtime_env"]
            where = str(source) if source else "mapping"
            ray["runtime_env"] = (
                read_runtime_env(base / env)
                if isinstance(env, str)
                else resolve_runtime_env(env, base, where)
            )
        return cls(
            default_k=retrieval.get("default_k", DEFAULT_K),
            datasets=datasets,
            metric_params=metrics.get("params", {}),
            source=source,
            origin=str(source.resolve()) if source is not None else "mapping",
            sets_k="default_k" in retrieval,
            ray=MappingProxyType(ray),
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
    def from_environment(cls) -> Config:
        """What a library call uses: the file ``SLOTWISE_CONFIG`` names, else the built-in
        defaults; no file is searched for."""
        named = os.environ.get(CONFIG_ENV)
        return cls.load(named) if named else cls()

    @classmethod
    def discover(cls, start: Path | None = None) -> Config:
        """What the CLI and the pytest fixture use: the file ``SLOTWISE_CONFIG`` names,
        else the nearest ``slotwise.yaml`` at or above ``start`` (default: the working
        directory), else the defaults."""
        if os.environ.get(CONFIG_ENV):
            return cls.from_environment()
        found = find_config(start)
        return cls.load(found) if found else cls()

    def provenance(self) -> dict[str, Any]:
        """For a results' provenance: ``config`` (the file's path, ``"mapping"`` or None)
        and ``defaults``, each default in force with the value and what set it (the
        config's origin, or ``"built-in"``)."""
        origin = self.origin or "built-in"
        defaults: dict[str, Any] = {
            "default_k": {
                "value": self.default_k,
                "set_by": origin if self.sets_k else "built-in",
            }
        }
        for alias, params in sorted(self.metric_params.items()):
            for key, value in sorted(params.items()):
                defaults[f"metrics.params.{alias}.{key}"] = {"value": value, "set_by": origin}
        return {"config": self.origin, "defaults": defaults}


def find_config(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_FILENAME
        if candidate.is_file():
            return candidate
    return None
