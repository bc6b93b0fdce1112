"""A Ray job's ``runtime_env`` (``--runtime-env FILE``, ``ray.runtime_env`` in
slotwise.yaml): what the workers get beside the data (``env_vars`` such as an S3
endpoint's, ``py_modules`` such as a slotwise wheel and metric plugins, ``pip``,
``working_dir``). Local paths are resolved against the file's folder and checked here,
before a cluster is asked for anything."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import InputError, Problem
from engine.io.files import read_document

__all__ = ["read_runtime_env", "resolve_runtime_env"]

#: ``runtime_env`` keys whose values are local paths, resolved against the file's folder.
_PATH_KEYS = ("working_dir", "py_modules")


def read_runtime_env(path: str | Path) -> dict[str, Any]:
    """A ``runtime_env`` from a YAML or JSON file, its local paths (``working_dir``,
    ``py_modules``) resolved against the file's folder and checked to exist."""
    path = Path(path)
    if not path.is_file():
        raise InputError([Problem("no such file", source=str(path))], summary="no runtime_env")
    return resolve_runtime_env(read_document(path), path.parent, str(path))


def resolve_runtime_env(env: Any, base: Path, source: str) -> dict[str, Any]:
    """``env`` (a mapping, as Ray takes it) with relative local paths made absolute from
    ``base``; a local path that does not exist is an error naming it."""
    if not isinstance(env, Mapping):
        raise InputError(
            [Problem("a runtime_env is a mapping (env_vars, py_modules, pip, ...)", source=source)],
            summary="invalid runtime_env",
        )
    found = {str(key): value for key, value in env.items()}
    problems = []
    for key in _PATH_KEYS:
        values = found.get(key)
        if values is None:
            continue
        single = isinstance(values, str)
        resolved = []
        for index, value in enumerate([values] if single else values):
            resolved.append(value)
            if not isinstance(value, str) or "://" in value:
                continue  # a URI (s3://, gs://, https://) the nodes fetch themselves
            local = base / value
            if not local.exists():
                pointer = f"/{key}" if single else f"/{key}/{index}"
                problems.append(Problem(f"no such file or folder: {local}", None, pointer, source))
            resolved[-1] = str(local.resolve())
        found[key] = resolved[0] if single else resolved
    env_vars = found.get("env_vars", {})
    if not isinstance(env_vars, Mapping) or not all(
        isinstance(value, str) for value in env_vars.values()
    ):
        problems.append(Problem("env_vars maps names to strings", None, "/env_vars", source))
    if problems:
        raise InputError(problems, summary="invalid runtime_env")
    return found
