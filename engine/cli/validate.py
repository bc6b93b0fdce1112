"""``slotwise validate``: check a dataset, outputs, config or results file against the
schemas; every problem is listed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.cli.common import Handler
from engine.errors import InputError
from engine.io import schemas, sources
from engine.io.config import CONFIG_FILENAME, Config
from engine.io.documents import RESULTS_SCHEMA_ID
from engine.io.files import format_suffix, read_document, read_jsonl
from engine.io.frames import TABLE_SUFFIXES

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    validate = commands.add_parser(
        "validate",
        help="check a file against slotwise's schemas",
        description="Validate a dataset, outputs, config or results file; every problem is listed.",
    )
    validate.add_argument("path", type=Path)
    validate.add_argument(
        "--kind",
        choices=("dataset", "outputs", "config", "results"),
        help="what the file is (default: guessed from its name and content)",
    )
    return {"validate": _validate}


def _guess_kind(path: Path) -> str:
    suffix = format_suffix(path)
    if path.name == CONFIG_FILENAME:
        return "config"
    if suffix in TABLE_SUFFIXES:
        import pyarrow.parquet

        names = pyarrow.parquet.read_schema(path).names if suffix == ".parquet" else []
        return "outputs" if {"rank", "score"} & set(names) else "dataset"
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


def _validate(args: argparse.Namespace) -> int:
    path: Path = args.path
    kind = args.kind or _guess_kind(path)
    count = ""
    if kind == "dataset":
        count = f" ({len(sources.read_dataset(path)[1])} samples)"
    elif kind == "outputs":
        count = f" ({len(sources.read_outputs(path))} outputs)"
    elif kind == "config":
        Config.load(path)
    else:
        problems = list(schemas.problems(read_document(path), "results", source=str(path)))
        if problems:
            raise InputError(problems, summary=f"invalid results {path}")
    print(f"{path}: valid {kind}{count}")
    return 0
