"""One grammar for what comes in, shared by every reader (docs/file-formats.md, "What
comes in"): how a label or score is written, ids kept as the text a file writes, and the
limits on what is read, each named and settable by an environment variable.

- a number (a label or a score) is ASCII: an optional sign, digits with an optional
  decimal point (``1``, ``-0.5``, ``.5``, ``5.``), an optional exponent (``1e3``); it
  must be finite. Underscores (``1_0``), other digits (full-width, Arabic-Indic), hexadecimal and
  YAML's sexagesimal (``1:20``) are not numbers;
- an id is text exactly as written: a number a JSON or YAML document writes where an id
  goes is read as :class:`WrittenInt` or :class:`WrittenFloat`, whose ``str`` is the text
  (``007``, ``1e3``), so ``str()`` of it never changes the digits.
"""

from __future__ import annotations

import math
import os
import re

from engine.errors import InputError, Problem

__all__ = [
    "INTEGER",
    "LIMITS",
    "NUMBER",
    "WrittenFloat",
    "WrittenInt",
    "exceeded",
    "limit",
    "number",
    "written_number",
]

#: A number of the grammar (ASCII only: ``[0-9]``, not ``\d``).
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: An integer as C's ``atol`` reads the whole of it (trec_eval's qrels labels).
INTEGER = re.compile(r"[+-]?[0-9]+")

#: Each limit: its environment variable, default and what it bounds (in words).
LIMITS = {
    "line": ("SLOTWISE_MAX_LINE_BYTES", 1 << 20, "bytes in a line"),
    "ratio": ("SLOTWISE_MAX_DECOMPRESSION_RATIO", 200, "decompressed bytes per compressed byte"),
    "depth": ("SLOTWISE_MAX_DEPTH", 100, "levels of nesting in a JSON or YAML document"),
    "aliases": ("SLOTWISE_MAX_YAML_ALIAS_NODES", 10_000, "nodes YAML aliases repeat"),
}


def limit(name: str) -> int:
    """The limit ``name`` (see :data:`LIMITS`): its environment variable's value when it
    is a positive integer, else the default."""
    variable, default, _ = LIMITS[name]
    text = os.environ.get(variable, "")
    return int(text) if text.isascii() and text.isdigit() and int(text) > 0 else default


def exceeded(name: str, source: str, line: int | None = None, found: str = "") -> InputError:
    """The error of a limit exceeded: naming the file, the line, the limit and how to
    raise it."""
    variable, _, what = LIMITS[name]
    message = (
        f"more than {limit(name)} {what}{f' ({found})' if found else ''}; "
        f"set {variable} to read more"
    )
    return InputError([Problem(message, source=source, line=line)], summary="input over a limit")


def number(text: str) -> float | None:
    """``text`` as a finite number of the grammar; None when it is not one."""
    if NUMBER.fullmatch(text) is None:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


class WrittenInt(int):
    """An integer that keeps the text it was written as (``str`` gives it back)."""

    text: str

    def __str__(self) -> str:
        return self.text


class WrittenFloat(float):
    """A float that keeps the text it was written as (``str`` gives it back)."""

    text: str

    def __str__(self) -> str:
        return self.text


def written_number(text: str) -> int | float:
    """A number of a document written as ``text``: a plain ``int`` or ``float`` when its
    ``str`` is ``text`` (the common case), else one that keeps ``text``."""
    value: int | float
    if "." in text or "e" in text or "E" in text:
        value = float(text)
        if repr(value) == text:
            return value
        written: WrittenInt | WrittenFloat = WrittenFloat(value)
    else:
        value = int(text)
        if str(value) == text:
            return value
        written = WrittenInt(value)
    written.text = text
    return written
