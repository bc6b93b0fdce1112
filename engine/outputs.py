"""System outputs: ``{sample_id: actual_output}`` from Python, a JSON object file, a JSONL
file of ``{id, actual_output}`` lines, or a results file that kept its outputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from engine import schemas
from engine.errors import InputError, Problem
from engine.fileio import read_document, read_jsonl
from engine.records import Output

__all__ = ["RESULTS_SCHEMA_ID", "load_outputs", "parse_outputs"]

RESULTS_SCHEMA_ID = "slotwise.results/v1"


def parse_outputs(
    items: Iterable[tuple[Any, Any, int | None]], source: str | None = None
) -> dict[str, Any]:
    """Validate (sample id, actual_output, line) triples; returns id -> raw actual_output.

    Raises :class:`InputError` listing every invalid output and duplicate id.
    """
    problems: list[Problem] = []
    raw_outputs: dict[str, Any] = {}
    for sample_id, actual, line in items:
        sample_id = str(sample_id)
        found = list(
            schemas.problems(
                actual,
                "outputs",
                definition="actualOutput",
                sample_id=sample_id,
                source=source,
                line=line,
                prefix=["actual_output"],
            )
        )
        if sample_id in raw_outputs:
            found.append(
                Problem(
                    "duplicate output for this sample id",
                    sample_id=sample_id,
                    source=source,
                    line=line,
                )
            )
        problems.extend(found)
        raw_outputs[sample_id] = actual
    if problems:
        raise InputError(problems, summary=f"invalid outputs{f' {source}' if source else ''}")
    return raw_outputs


def _from_jsonl(path: Path) -> dict[str, Any]:
    """Outputs from ``{"id": ..., "actual_output": ...}`` lines (``$defs/line``)."""
    problems: list[Problem] = []
    triples = []
    for line, record in read_jsonl(path):
        sample_id = schemas.sample_id_of(record)
        if sample_id is None or "actual_output" not in record:
            message = 'an outputs line is an object {"id": ..., "actual_output": ...}'
            problems.append(Problem(message, sample_id=sample_id, source=str(path), line=line))
        else:
            triples.append((sample_id, record["actual_output"], line))
    try:
        raw = parse_outputs(triples, str(path))
    except InputError as error:
        problems.extend(error.problems)
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise InputError(problems, summary=f"invalid outputs {path}")
    return raw


def load_outputs(source: Mapping[str, Any] | str | Path) -> dict[str, Output]:
    """Validated outputs by sample id, from a mapping or a file. A mapping of
    :class:`Output` objects (already validated when built) is taken as it is."""
    if isinstance(source, Mapping):
        if set(map(type, source.values())) == {Output} and set(map(type, source)) == {str}:
            return dict(source)
        if _bare_lists(source):  # the fast path: fully checked here, at C speed
            return {k: Output(retrieved=tuple(v)) for k, v in source.items()}
        raw = parse_outputs((k, v, None) for k, v in source.items())
    else:
        raw = load_raw_outputs(Path(source))
    return {sample_id: Output.from_raw(actual) for sample_id, actual in raw.items()}


def _bare_lists(source: Mapping[Any, Any]) -> bool:
    """True if every key is a string and every output a valid bare list of string ids."""
    return set(map(type, source)) <= {str} and all(map(_bare_ids, source.values()))


def _bare_ids(value: Any) -> bool:
    return type(value) is list and set(map(type, value)) <= {str} and "" not in value


def load_raw_outputs(path: Path) -> dict[str, Any]:
    """Validated raw outputs from a ``.json``/``.jsonl`` file or a results file."""
    if path.suffix.lower() == ".jsonl":
        return _from_jsonl(path)
    if path.suffix.lower() in (".parquet", ".arrow", ".feather"):  # a long-format run
        from engine import columnar

        ranked = columnar.run_to_outputs(columnar.read_frame(path), str(path))
        return parse_outputs(((k, v, None) for k, v in ranked.items()), str(path))
    document = read_document(path)
    if isinstance(document, dict) and document.get("schema") == RESULTS_SCHEMA_ID:
        if "outputs" not in document:
            raise InputError(
                [Problem("this results file kept no outputs to re-score", source=str(path))]
            )
        document = document["outputs"]
    if not isinstance(document, dict):
        raise InputError(
            [
                Problem(
                    "an outputs file is a JSON object {sample_id: actual_output}", source=str(path)
                )
            ]
        )
    return parse_outputs(((k, v, None) for k, v in document.items()), str(path))
