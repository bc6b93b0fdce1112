"""A Hugging Face ``datasets`` folder as a dataset: ``hf:PATH`` (``hf:PATH#dev``), or
a folder in one of these layouts wherever a dataset is named.

- saved with ``save_to_disk`` (a ``Dataset``: ``state.json``; a ``DatasetDict``:
  ``dataset_dict.json``), read with ``datasets.load_from_disk`` (``pip install
  'slotwise[hf]'``); a folder of such folders, one per config (``corpus``, ``queries``,
  ``qrels``), too;
- Parquet files as the Hub holds them: ``<config>/<split>-00000-of-00001.parquet`` (or
  ``data/<split>-*.parquet``; with ``hf:``, ``<split>.parquet`` too), read with pyarrow.

Each table is a part named by its config and split. The qrels are the part with a query
id, a document id and a label column (any of :mod:`engine.io.column_names`' names: BEIR on
the Hub writes ``query-id``, ``corpus-id``, ``score``) of the split asked for (``test``
by default; a folder of one such part needs no split). A ``queries`` part (``_id`` and
``text``, as BEIR's) gives each sample its ``input``; a ``corpus`` is not read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from engine.errors import InputError, MissingDependencyError, Problem
from engine.io import column_names, tables_in
from engine.io.beir import DEFAULT_SPLIT, query_texts, with_inputs
from engine.io.columns import Columns
from engine.io.frames import Where, labels_from_table

__all__ = ["is_hf", "read"]

_SHARD = re.compile(r"(?P<split>.+?)(?:-\d{5}-of-\d{5})?")
_HUB = re.compile(r".+-\d{5}-of-\d{5}")
_SAVED = ("dataset_dict.json", "state.json")


def _saved(folder: Path) -> bool:
    return any((folder / name).is_file() for name in _SAVED)


def is_hf(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder saved by ``datasets`` (or of such folders), or of
    Parquet files named as the Hub names them (``test-00000-of-00001.parquet``; other
    Parquet files are shards of one table, unless ``hf:`` says otherwise)."""
    folder = Path(path)
    if not folder.is_dir():
        return False
    if _saved(folder) or any(_saved(sub) for sub in folder.iterdir() if sub.is_dir()):
        return True
    files = [p for p in folder.rglob("*") if p.is_file() and not _hidden(p, folder)]
    tables = [p for p in files if p.suffix == ".parquet"]
    return (
        bool(tables)
        and all(_HUB.fullmatch(p.stem) for p in tables)
        and all(p.suffix == ".parquet" or p.name == "README.md" for p in files)
    )


def _hidden(path: Path, folder: Path) -> bool:
    return any(part[:1] in "._" for part in path.relative_to(folder).parts)


def _parts(folder: Path) -> Iterator[tuple[str, str, pa.Table]]:
    """(config, split, table) of every part of the folder."""
    if _saved(folder):
        yield from _loaded(folder, "")
        return
    saved = [sub for sub in sorted(folder.iterdir()) if sub.is_dir() and _saved(sub)]
    if saved:
        for sub in saved:
            yield from _loaded(sub, sub.name)
        return
    groups: dict[tuple[str, str], list[Path]] = {}
    for path in sorted(folder.rglob("*.parquet")):
        if _hidden(path, folder):
            continue
        parent = path.parent.relative_to(folder).as_posix()
        config = "" if parent in (".", "data") else parent
        found = _SHARD.fullmatch(path.stem)
        assert found is not None  # the pattern matches any name
        groups.setdefault((config, found["split"]), []).append(path)
    for (config, split), paths in groups.items():
        tables = [tables_in.table_of(path)[0] for path in paths]
        yield config, split, pa.concat_tables(tables, promote_options="permissive")


def _loaded(folder: Path, config: str) -> Iterator[tuple[str, str, pa.Table]]:
    """The splits of a folder ``save_to_disk`` wrote, read by ``datasets``."""
    try:
        import datasets
    except ImportError as error:
        raise MissingDependencyError(f"reading {folder}", "hf", error) from error
    try:
        found = datasets.load_from_disk(str(folder))
    except (OSError, ValueError, FileNotFoundError, json.JSONDecodeError) as error:
        message = f"datasets.load_from_disk cannot read it: {error}"
        raise InputError([Problem(message, source=str(folder))]) from None
    if isinstance(found, datasets.DatasetDict):
        for split, part in found.items():
            yield config, split, part.with_format("arrow")[:]
    else:
        yield config, str(found.split or ""), found.with_format("arrow")[:]


def _is_qrels(table: pa.Table) -> bool:
    try:
        names = column_names.canonical(table, "labels").column_names
    except InputError:
        return False
    return {"query_id", "doc_id", "relevance"} <= set(names)


def read(path: str | os.PathLike[str], split: str | None = None) -> Columns:
    """The samples of a Hugging Face datasets folder (see the module docstring)."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError([Problem("no such folder", source=str(folder))], summary="not a folder")
    parts = list(_parts(folder))
    qrels = [(c, s, t) for c, s, t in parts if _is_qrels(t)]
    wanted = [(c, s, t) for c, s, t in qrels if s == (split or DEFAULT_SPLIT)]
    if not wanted and split is None and len(qrels) == 1:
        wanted = qrels  # one table of judgements: its split's name does not matter
    named = ", ".join(f"{c}/{s}" if c else s or "(unnamed)" for c, s, _ in parts) or "none"
    if len(wanted) != 1:
        asked = split or DEFAULT_SPLIT
        reason = "no" if not wanted else "more than one"
        message = (
            f"{reason} table of qrels (a query id, a document id and a label column) "
            f"of split {asked!r}; parts: {named}"
        )
        raise InputError([Problem(message, source=str(folder))], summary="no qrels to read")
    config, part, table = wanted[0]
    where = Where(f"{folder}:{config + '/' if config else ''}{part}")
    samples = labels_from_table(table, where)
    if not len(samples):
        raise InputError([Problem("no judgement", source=where.source)], summary="empty qrels")
    queries = [t for c, s, t in parts if "queries" in (c, s) and t is not table]
    if len(queries) != 1:
        return samples
    return with_inputs(samples, query_texts(queries[0], f"{folder}:queries"))
