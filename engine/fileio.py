"""Reading YAML/JSON/JSONL files with line-numbered errors, and atomic writes."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from engine.errors import InputError, Problem

__all__ = ["atomic_write", "read_document", "read_jsonl"]


def _unreadable(path: Path, error: OSError) -> InputError:
    return InputError([Problem(f"cannot read file: {error.strerror or error}", source=str(path))])


def read_document(path: Path) -> Any:
    """Parse a whole YAML (``.yaml``/``.yml``) or JSON file."""
    try:
        text = path.read_text("utf-8")
    except OSError as error:
        raise _unreadable(path, error) from None
    except UnicodeDecodeError as error:
        raise InputError([Problem(f"not UTF-8 text: {error.reason}", source=str(path))]) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            problem = getattr(error, "problem", None) or str(error)
            raise InputError(
                [Problem(f"malformed YAML: {problem}", source=str(path), line=line)]
            ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            [
                Problem(
                    f"malformed JSON: {error.msg} (column {error.colno})",
                    source=str(path),
                    line=error.lineno,
                )
            ]
        ) from None


def read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-blank line; all malformed lines
    are reported together."""
    problems = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as error:
                    problems.append(
                        Problem(
                            f"malformed JSON: {error.msg} (column {error.colno})",
                            source=str(path),
                            line=number,
                        )
                    )
    except OSError as error:
        raise _unreadable(path, error) from None
    if problems:
        raise InputError(problems, summary=f"malformed JSONL in {path}")


def atomic_write(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the new one, never a part."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, _mode_for(target))  # mkstemp makes 0600; keep the usual permissions
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_for(target: Path) -> int:
    """The existing file's permissions, or what a plain ``open()`` would give (0666 - umask)."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
