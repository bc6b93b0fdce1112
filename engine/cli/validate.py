"""``slotwise validate``: check a dataset, outputs, config or results file against the
schemas, or a TREC qrels or run file against its format; every problem is listed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.cli.common import Handler
from engine.errors import InputError, Problem
from engine.io.config import CONFIG_FILENAME, Config
from engine.io.files import format_suffix, open_binary, read_document, read_jsonl

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    validate = commands.add_parser(
        "validate",
        help="check a dataset, outputs, config (slotwise.yaml) or results file against "
        "slotwise's schemas, or a TREC qrels or run file",
        description="Validate a dataset, outputs, config or results file, or a TREC qrels "
        "or run file; every problem is listed, with its line where the format has lines.",
    )
    validate.add_argument(
        "path",
        type=Path,
        help="the file: a dataset, outputs, config or results file, or a TREC qrels or run file",
    )
    validate.add_argument(
        "--kind",
        choices=("dataset", "outputs", "config", "results", "qrels", "run"),
        help="what the file is (default: guessed from its name and content; a file that is "
        "not JSON, JSONL, YAML or a table is read as TREC: 4 columns qrels, 6 a run)",
    )
    return {"validate": _validate}


def _guess_kind(path: Path) -> str:
    from engine.io.documents import DOCUMENT_SUFFIXES, RESULTS_SCHEMA_ID
    from engine.io.frames import TABLE_SUFFIXES

    suffix = format_suffix(path)
    if path.name == CONFIG_FILENAME:
        return "config"
    if suffix in TABLE_SUFFIXES:
        import pyarrow.parquet

        names = pyarrow.parquet.read_schema(path).names if suffix == ".parquet" else []
        return "outputs" if {"rank", "score"} & set(names) else "dataset"
    if suffix not in DOCUMENT_SUFFIXES:
        return _trec_kind(path)
    if suffix == ".jsonl":
        for _, first in read_jsonl(path):
            return "outputs" if isinstance(first, dict) and "actual_output" in first else "dataset"
        return "dataset"
    document = read_document(path)
    if isinstance(document, dict) and document.get("schema") == RESULTS_SCHEMA_ID:
        return "results"
    if isinstance(document, dict) and "samples" in document:
        return "dataset"
    return "outputs" if suffix == ".json" else "dataset"


def _trec_kind(path: Path) -> str:
    """``qrels`` or ``run`` by the number of columns of the first line that has any (its
    bytes: a line that is not UTF-8 is named by the reader of its kind)."""
    with open_binary(path) as handle:
        fields = next((line.split() for line in handle if line.strip()), [])
    kinds = {4: "qrels", 6: "run"}
    if len(fields) not in kinds:
        message = (
            f"not a dataset, outputs, config or results file (by its suffix {format_suffix(path)!r}), "
            f"and its first line has {len(fields)} columns, not a TREC qrels (4) or run (6) "
            "line: pass --kind"
        )
        raise InputError([Problem(message, source=str(path))], summary="unknown file kind")
    return kinds[len(fields)]


def _validate(args: argparse.Namespace) -> int:
    from engine.io import sources

    path: Path = args.path
    kind = args.kind or _guess_kind(path)
    count = ""
    if kind == "dataset":
        count = f" ({len(sources.read_dataset(path)[1])} samples)"
    elif kind == "outputs":
        count = f" ({len(sources.read_outputs(path))} outputs)"
    elif kind in ("qrels", "run"):
        columns = sources.read_qrels(path) if kind == "qrels" else sources.read_run(path)
        count = f" ({len(columns)} queries)"
    elif kind == "config":
        Config.load(path)
    else:
        from engine.io import schemas

        problems = list(schemas.problems(read_document(path), "results", source=str(path)))
        if problems:
            raise InputError(problems, summary=f"invalid results {path}")
    print(f"{path}: valid {kind}{count}")
    return 0
