"""Uncertainty files: JSON Lines, one unit a line, ``{query_id, doc_id, uncertainty}`` for
a query-document pair or ``{query_id, uncertainty}`` for a query, the uncertainty a
number >= 0 (a judge's expected error as a standard deviation). ``slotwise annotate
--also-judge --uncertainty-output`` writes them (:func:`write_uncertainty`); ``slotwise
sample --active --uncertainty`` reads them (:func:`read_uncertainty`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import InputError, Problem
from engine.io.writer import atomic_write

__all__ = ["read_uncertainty", "write_uncertainty"]


def write_uncertainty(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write ``rows`` to ``path`` as JSON Lines, atomically."""
    atomic_write(path, "".join(json.dumps(row) + "\n" for row in rows))


def read_uncertainty(
    path: Path, queries: Sequence[str], docs: Sequence[str] | None
) -> npt.NDArray[np.float64]:
    """The uncertainty of each unit (a query, or with ``docs`` the pair of a query and its
    document) from ``path``. Every unit needs a row and the file names no other; every
    problem (a row that does not parse, a value that is not a number >= 0, a unit missing
    or unknown) is listed, with the file and line where there is one."""
    source = str(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InputError([Problem(f"cannot read: {error.strerror}", source=source)],
                         summary="cannot draw the sample") from None  # fmt: skip
    found: dict[tuple[str, str | None], float] = {}
    problems = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = (str(row["query_id"]), None if docs is None else str(row["doc_id"]))
            value = float(row["uncertainty"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            problems.append(Problem(f"not an uncertainty row: {error!r}", source=source,
                                    line=number))  # fmt: skip
            continue
        if not (np.isfinite(value) and value >= 0):
            problems.append(Problem(f"uncertainty {value} is not a number >= 0", key[0],
                                    "/uncertainty", source, number))  # fmt: skip
        found[key] = value
    doc_of: list[str | None] = list(docs) if docs is not None else [None] * len(queries)
    keys = list(zip(queries, doc_of, strict=True))
    known = set(keys)
    unknown = [key for key in found if key not in known]  # (in the file's order)
    problems += [Problem("no such unit in the population", q, source=source) for q, _ in unknown]
    problems += [Problem(f"no uncertainty for this unit{'' if d is None else f' (doc {d})'}",
                         q, source=source) for q, d in keys if (q, d) not in found]  # fmt: skip
    if problems:
        raise InputError(problems, summary="invalid --uncertainty")
    return np.asarray([found[key] for key in keys])
