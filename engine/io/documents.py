"""JSON, YAML and JSONL documents: datasets (``{name?, samples: [...]}`` or one sample
per JSONL line) and outputs (``{sample_id: actual_output}``, ``{"id", "actual_output"}``
lines, or a results file that kept its outputs), validated against ``schemas/`` with
every problem reported together, and turned into :class:`~engine.io.columns.Columns`."""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from engine.errors import InputError, Problem
from engine.io import schemas
from engine.io.columns import (
    OUTPUT_COLUMNS,
    SAMPLE_COLUMNS,
    Columns,
    label_lists,
    list_array,
    offsets_of,
    table_of,
)
from engine.io.files import (
    base_name,
    format_suffix,
    read_document,
    read_jsonl,
    read_text,
    yaml_lines,
)
from engine.io.frames import Coded
from engine.io.hops import (
    HOP_LISTS,
    expand_turns,
    final_context,
    has_hops,
    hop_columns,
    hop_lists,
    hop_problems,
)
from engine.io.writer import atomic_write

__all__ = [
    "DOCUMENT_SUFFIXES",
    "RESULTS_SCHEMA_ID",
    "canonical_json",
    "outputs_columns",
    "parse_outputs",
    "parse_samples",
    "raw_outputs",
    "raw_samples",
    "read_outputs_mapping",
    "read_raw_outputs",
    "read_samples",
    "samples_columns",
    "with_errors",
    "write_samples",
]

DOCUMENT_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
RESULTS_SCHEMA_ID = "slotwise.results/v1"


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: equal values give equal text (a number a document
    wrote otherwise, :class:`~engine.io.grammar.WrittenFloat`, as its value)."""
    return orjson.dumps(value, default=float, option=orjson.OPT_SORT_KEYS).decode()


# -- samples -------------------------------------------------------------------------------


def parse_samples(
    raws: Iterable[tuple[Any, int | None]], source: str | None = None, *, prefix: str = ""
) -> Columns:
    """Validate raw samples (each with its line number, if any) into columns.

    Pointers locate each problem in the document: ``{prefix}/{index}/...`` for samples
    without a line number, relative to the line for JSONL. Raises :class:`InputError`
    listing every problem: schema violations, duplicate ids, an empty dataset.
    """
    problems: list[Problem] = []
    valid: list[Mapping[str, Any]] = []
    seen: dict[str, int] = {}
    for index, (raw, line) in enumerate(raws):
        if schemas.certainly_valid_sample(raw) and raw["id"] not in seen:  # the fast path
            seen[raw["id"]] = index
            valid.append(raw)
            continue
        sample_id = schemas.sample_id_of(raw)
        path = [] if line is not None else [*filter(None, prefix.split("/")), index]
        found = list(
            schemas.problems(
                raw, "sample", sample_id=sample_id, source=source, line=line, prefix=path
            )
        )
        if not found:
            found.extend(_duplicate_claims(raw, sample_id, source, line, path))
        if not found and "turns" in raw:  # a conversation: a sample per turn
            turns, found = expand_turns(raw, source, line, path)
            found.extend([] if found else _turn_ids(turns, seen, index, source, line, path))
            problems.extend(found)
            valid.extend([] if found else turns)
            continue
        if sample_id is not None and sample_id in seen:
            found.append(
                Problem(
                    f"duplicate sample id (first at item {seen[sample_id]})",
                    sample_id=sample_id,
                    pointer=schemas.pointer([*path, "id"]),
                    source=source,
                    line=line,
                )
            )
        elif sample_id is not None:
            seen[sample_id] = index
        problems.extend(found)
        if not found:
            valid.append(raw)
    if not problems and not seen:
        problems.append(Problem("the dataset has no samples", source=source))
    if problems:
        raise InputError(problems, summary=f"invalid dataset{f' {source}' if source else ''}")
    return samples_columns(valid)


def _turn_ids(
    turns: Sequence[Mapping[str, Any]],
    seen: dict[str, int],
    index: int,
    source: str | None,
    line: int | None,
    path: list[Any],
) -> list[Problem]:
    """A duplicate-id problem for each turn whose id (``<id>#<turn>``) an earlier sample
    has; the others are marked seen."""
    found = []
    for turn in turns:
        if turn["id"] in seen:
            message = f"duplicate sample id {turn['id']!r} (first at item {seen[turn['id']]})"
            found.append(Problem(message, turn["id"], schemas.pointer([*path, "id"]), source, line))
        else:
            seen[turn["id"]] = index
    return found


def _duplicate_claims(
    raw: Mapping[str, Any],
    sample_id: str | None,
    source: str | None,
    line: int | None,
    path: list[Any],
) -> Iterable[Problem]:
    """A problem for each claim whose id an earlier claim of the sample already has."""
    expected = raw.get("expected_output")
    claims = (expected.get("claims") or []) if isinstance(expected, Mapping) else []
    first: dict[str, int] = {}
    for index, claim in enumerate(claims):
        if claim["id"] in first:
            yield Problem(
                f"duplicate claim id {claim['id']!r} (first at claims/{first[claim['id']]})",
                sample_id=sample_id,
                pointer=schemas.pointer([*path, "expected_output", "claims", index, "id"]),
                source=source,
                line=line,
            )
        first.setdefault(claim["id"], index)


class _Labels:
    """Flat (doc, label) pairs of one label kind, with per-sample sizes."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.present: list[bool] = []
        self.docs: list[str] = []
        self.values: list[float] = []

    def add(self, labels: Mapping[str, float] | None) -> None:
        self.present.append(labels is not None)
        labels = labels or {}
        self.sizes.append(len(labels))
        self.docs += labels
        self.values += labels.values()


def _relevance(value: Any) -> dict[str, float]:
    """A list of ids means label 1 for each; a map id -> number is graded."""
    if isinstance(value, Mapping):
        return {str(doc): float(label) for doc, label in value.items()}
    return dict.fromkeys(map(str, value), 1.0)


def _utility(value: Mapping[str, Any]) -> dict[str, float]:
    """u directly, or u = (+1 if relevant else -1) * (1 - p_no_response)."""
    out = {}
    for doc, label in value.items():
        if isinstance(label, Mapping):
            sign = 1.0 if label["relevant"] else -1.0
            out[str(doc)] = sign * (1.0 - float(label["p_no_response"]))
        else:
            out[str(doc)] = float(label)
    return out


def samples_columns(raws: Sequence[Mapping[str, Any]]) -> Columns:
    """Columns of raw samples that already passed ``sample.schema.json``."""
    ids, ks, inputs, metadata = [], [], [], []
    labels = {"relevance": _Labels(), "utility": _Labels(), "grades": _Labels()}
    answers: list[list[str] | None] = []
    groups: list[dict[str, list[str]] | None] = []
    claims: list[list[str] | None] = []
    for raw in raws:
        expected = raw.get("expected_output")
        if expected is None:
            given: Mapping[str, Any] = {}
        elif isinstance(expected, Mapping) and schemas.LONG_FORM & expected.keys():
            given = expected
        else:
            given = {"relevance": expected}
        labels["relevance"].add(_relevance(given["relevance"]) if "relevance" in given else None)
        labels["utility"].add(_utility(given["utility"]) if "utility" in given else None)
        grades = given.get("grades")
        labels["grades"].add(
            None if grades is None else {str(d): float(g) for d, g in grades.items()}
        )
        answer = given.get("answers")
        answers.append(
            None if answer is None else [answer] if isinstance(answer, str) else list(answer)
        )
        group = given.get("groups")
        groups.append(
            None if group is None else {str(g): list(map(str, d)) for g, d in group.items()}
        )
        claim = given.get("claims")
        claims.append(None if claim is None else [c["id"] for c in claim])
        meta = raw.get("metadata") or {}
        ids.append(str(raw["id"]))
        ks.append(meta.get("k"))
        inputs.append(None if raw.get("input") is None else canonical_json(raw["input"]))
        metadata.append(canonical_json(meta) if meta else None)
    group_docs = [doc for group in groups if group for docs in group.values() for doc in docs]
    kinds = list(labels.values())
    vocabulary, codes = _encode([*(found.docs for found in kinds), group_docs])
    rows = len(ids)
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids, pa.string()),
        "answers": pa.array(answers, SAMPLE_COLUMNS["answers"]),
        "groups": _groups(groups, codes[-1]),
        "k": pa.array(ks, pa.int64()),
        "input": pa.array(inputs, pa.string()),
        "metadata": pa.array(metadata, pa.string()),
        "claims": pa.array(claims, SAMPLE_COLUMNS["claims"]),
    }
    for (kind, found), kind_codes in zip(labels.items(), codes[:-1], strict=True):
        mask = ~np.asarray(found.present, dtype=np.bool_)
        columns[kind] = label_lists(offsets_of(found.sizes), kind_codes, found.values, mask)
    return Columns(table_of(columns, SAMPLE_COLUMNS, rows), vocabulary)


def _groups(groups: Sequence[Mapping[str, list[str]] | None], codes: np.ndarray) -> pa.Array:
    names = [name for group in groups if group for name in group]
    sizes = [len(docs) for group in groups if group for docs in group.values()]
    members = list_array(offsets_of(sizes), pa.array(codes, pa.int32()))
    entries = pa.StructArray.from_arrays(
        [pa.array(names, pa.string()), members], names=["group", "docs"]
    )
    mask = np.array([group is None for group in groups], dtype=np.bool_)
    return list_array(offsets_of([len(group or ()) for group in groups]), entries, mask)


def _encode(lists: Sequence[Sequence[str]]) -> tuple[pa.Array, list[np.ndarray]]:
    """One vocabulary for several lists of document ids, and each list's codes."""
    coded = Coded.of_strings(itertools.chain.from_iterable(lists), sum(map(len, lists)))
    bounds = offsets_of([len(part) for part in lists])
    return coded.ids, [coded.codes[start:end] for start, end in itertools.pairwise(bounds)]


def read_samples(path: Path) -> tuple[str, Columns]:
    """(name, samples) of a ``.yaml``/``.yml``/``.json`` dataset document or a ``.jsonl``
    file of samples."""
    source = str(path)
    if format_suffix(path) == ".jsonl":
        return base_name(path), parse_samples(
            ((raw, line) for line, raw in read_jsonl(path)), source
        )
    document = read_document(path)
    envelope = (
        {k: v for k, v in document.items() if k != "samples"}
        if isinstance(document, dict)
        else document
    )
    if isinstance(document, dict):
        envelope["samples"] = []
    try:
        problems = list(schemas.problems(envelope, "dataset", source=source))
        if problems:
            raise InputError(problems, summary=f"invalid dataset {source}")
        name = document.get("name") or base_name(path)
        return name, parse_samples(
            ((raw, None) for raw in document["samples"]), source, prefix="/samples"
        )
    except InputError as error:
        if format_suffix(path) not in (".yaml", ".yml"):
            raise
        raise _with_lines(error, read_text(path)) from None


def _with_lines(error: InputError, text: str) -> InputError:
    """The error with each problem's line in the YAML text (found by its JSON pointer)."""
    lines = yaml_lines(text, [p.pointer for p in error.problems if p.line is None])
    problems = [
        p if p.line is not None else p._replace(line=lines.get(p.pointer)) for p in error.problems
    ]
    return InputError(problems, summary=error.summary)


def write_samples(
    path: str | Path, samples: Sequence[Mapping[str, Any]], name: str | None = None
) -> None:
    """Write raw samples as JSONL (one per line) or, for ``.yaml``/``.yml``/``.json``, as a
    dataset document; atomically."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples)
    else:
        document = {"name": name or path.stem, "schema_version": 1, "samples": list(samples)}
        if suffix in (".yaml", ".yml"):
            import yaml

            text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        elif suffix == ".json":
            text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        else:
            raise InputError(
                [
                    Problem(
                        f"unknown dataset format {path.suffix!r}; use one of {', '.join(DOCUMENT_SUFFIXES)}",
                        source=str(path),
                    )
                ]
            )
    atomic_write(path, text)


# -- outputs ---------------------------------------------------------------------------------


#: What a system may return as one sample's output, in words (for error messages).
ACCEPTED_OUTPUTS = (
    "a list, tuple or 1-D numpy array of document ids (str or int, numpy ints included; "
    'or {"id": ..., "text": ...} items), rank 1 first, or a mapping {"retrieved": [...], '
    '"pool": [...], "cited": [...]}'
)


OUTPUT_LISTS = ("retrieved", "pool", "cited")


def plain_output(actual: Any) -> Any:
    """A system's output with the sequence types of Python and numpy made plain lists
    (a tuple, a numpy array of ids, numpy integer or string ids), so that what a vector
    store returns validates as ranked ids; anything else is returned as is."""
    if isinstance(actual, Mapping) and "retrieved" in actual:
        plain = {k: plain_output(v) if k in OUTPUT_LISTS else v for k, v in actual.items()}
        return actual if all(plain[k] is actual[k] for k in plain) else plain
    if isinstance(actual, np.ndarray) and actual.ndim == 1:
        return actual.tolist()  # numpy scalars become int / str
    if type(actual) is list and set(map(type, actual)) <= {str, int, dict}:
        return actual  # the common case, checked at C speed
    if isinstance(actual, tuple | list) and any(isinstance(i, np.generic) for i in actual):
        return [i.item() if isinstance(i, np.generic) else i for i in actual]
    if isinstance(actual, tuple):
        return list(actual)
    return actual


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
        if not found:
            found.extend(hop_problems(actual, sample_id, source, line))
        problems.extend(found)
        raw_outputs[sample_id] = actual
    if problems:
        raise InputError(problems, summary=f"invalid outputs{f' {source}' if source else ''}")
    return raw_outputs


def outputs_columns(outputs: Mapping[str, Any], errors: Mapping[str, str] | None = None) -> Columns:
    """Columns of validated outputs (sample id -> raw ``actual_output``), and an error row
    for each sample of ``errors`` (sample id -> why the system failed on it)."""
    return with_errors(_outputs_columns(outputs), errors or {})


def with_errors(columns: Columns, errors: Mapping[str, str]) -> Columns:
    """``columns`` of outputs and, after them, an error row per sample of ``errors``
    (sample id -> why the system failed on it): an id with no output, and the reason."""
    if not errors:
        return columns
    ids = pa.array(list(errors), pa.string())
    rows = table_of({"id": ids, "error": pa.array(list(errors.values()))}, OUTPUT_COLUMNS, len(ids))
    table = pa.concat_tables([columns.table, rows], promote_options="default")
    return Columns(table, columns.docs)


def _outputs_columns(outputs: Mapping[str, Any]) -> Columns:
    if _bare_lists(outputs):
        return _ranked_columns(outputs)
    retrieved, texts, pools, cited = [], [], [], []
    for actual in outputs.values():
        items, pool, cites = (
            (final_context(actual), actual.get("pool"), actual.get("cited"))
            if isinstance(actual, Mapping)
            else (actual, None, None)
        )
        ids, text = _ids_and_texts(items)
        retrieved.append(ids)
        texts.append(text)
        pools.append(None if pool is None else list(map(str, pool)))
        cited.append(None if cites is None else list(map(str, cites)))
    lists = [retrieved, *([x for x in column if x is not None] for column in (pools, cited))]
    flat = [list(itertools.chain.from_iterable(part)) for part in lists]
    hops, hop_rows = (
        hop_lists(list(outputs.values())) if any(map(has_hops, outputs.values())) else ([], [])
    )
    vocabulary, codes = _encode([*flat, *hops])
    columns = {
        "id": pa.array(list(map(str, outputs)), pa.string()),
        "retrieved": list_array(
            offsets_of([len(r) for r in retrieved]), pa.array(codes[0], pa.int32())
        ),
        "texts": pa.array(texts, OUTPUT_COLUMNS["texts"]),
    }
    for name, column, part in (("pool", pools, codes[1]), ("cited", cited, codes[2])):
        mask = np.array([x is None for x in column], dtype=np.bool_)
        columns[name] = list_array(
            offsets_of([len(x or ()) for x in column]), pa.array(part, pa.int32()), mask
        )
    if hops:
        columns.update(hop_columns(hop_rows, codes[3:]))
    return Columns(table_of(columns, OUTPUT_COLUMNS, len(retrieved)), vocabulary)


@attrs.frozen
class OutputCodes:
    """One validated output coded against a sample's labelled ids (see
    :func:`output_codes`): the codes of each list it has (``retrieved``, ``pool``,
    ``cited``), its texts (None when it has none), and every id of those lists in place
    order."""

    lists: dict[str, npt.NDArray[np.int32]]
    texts: list[str | None] | None
    placed: list[str]
    hops: list[Any] | None = None

    def columns(self) -> dict[str, pa.Array]:
        """As one-row output columns (no ``id``; only those it has)."""
        columns = {name: list_array([0, c.size], pa.array(c)) for name, c in self.lists.items()}
        if self.texts is not None:
            columns["texts"] = pa.array([self.texts], OUTPUT_COLUMNS["texts"])
        if self.hops is not None:
            columns["hops"] = pa.array([self.hops], OUTPUT_COLUMNS["hops"])
        return columns


def output_codes(actual: Any, codes: dict[str, int]) -> OutputCodes:
    """One validated output coded for joining it with one sample without recoding the
    sample. An id in ``codes`` (id -> code: the sample's labelled ids) keeps its code; any
    other takes ``len(codes) + i``, ``i`` its first place among the ids of the output's
    lists (retrieved, pool, cited, one after the other), so that the sample's ids
    followed by ``placed`` give each code its id (in C: no Python step per id)."""
    items, pool, cites = (
        (final_context(actual), actual.get("pool"), actual.get("cited"))
        if isinstance(actual, Mapping)
        else (actual, None, None)
    )
    items, texts = _ids_and_texts(items)
    lists = {"retrieved": items}
    for name, ids in (("pool", pool), ("cited", cites)):
        if ids is not None:
            lists[name] = ids if _strings(ids) else list(map(str, ids))
    if not has_hops(actual):
        return _coded(lists, texts, codes)
    flat, (hops,) = hop_lists([actual])
    lists.update({f"hop_{name}": ids for name, ids in zip(HOP_LISTS, flat, strict=True)})
    return attrs.evolve(_coded(lists, texts, codes), hops=hops)


def _ids_and_texts(items: list[Any]) -> tuple[list[str], list[str | None] | None]:
    """A validated ranked list (ids, ``{id, text?, score?}`` items, or both) as its ids,
    strings, and their texts (None when no item has one). The common shapes, all ids or
    all items, are read in C-level passes."""
    if _strings(items):
        return items, None
    if all(map(isinstance, items, itertools.repeat(dict))):
        ids = list(map(operator.itemgetter("id"), items))
        texts = list(map(dict.get, items, itertools.repeat("text")))
    else:  # ids and items mixed, or numeric ids
        ids = [i["id"] if isinstance(i, dict) else i for i in items]
        texts = [i.get("text") if isinstance(i, dict) else None for i in items]
    ids = ids if _strings(ids) else list(map(str, ids))
    return ids, texts if texts.count(None) < len(texts) else None


def ranked_codes(ids: list[str], codes: dict[str, int]) -> OutputCodes:
    """:func:`output_codes` of a bare ranked list of string ids (:func:`bare_ids`), which
    it does not check again."""
    return _coded({"retrieved": ids}, None, codes)


def _coded(
    lists: dict[str, list[str]], texts: list[str | None] | None, codes: dict[str, int]
) -> OutputCodes:
    """:func:`output_codes` of lists of string ids (``codes`` grows by their new ids)."""
    labelled = len(codes)
    placed: list[str] = []
    coded = {}
    for name, ids in lists.items():
        numbers = itertools.count(labelled + len(placed))  # a new id's code: its place
        coded[name] = np.fromiter(map(codes.setdefault, ids, numbers), np.int32, len(ids))
        placed += ids
    return OutputCodes(coded, texts, placed)


def _strings(values: Iterable[Any]) -> bool:
    """Every item a ``str`` (checked at C speed)."""
    return set(map(type, values)) <= {str}


def _ranked_columns(outputs: Mapping[str, Sequence[str]]) -> Columns:
    """Columns of bare ranked lists, coded in one C-level pass."""
    sizes = np.fromiter(map(len, outputs.values()), dtype=np.int64, count=len(outputs))
    coded = Coded.of_strings(itertools.chain.from_iterable(outputs.values()), int(sizes.sum()))
    columns = {
        "id": pa.array(list(outputs), pa.string()),
        "retrieved": list_array(
            offsets_of(sizes), pa.array(coded.codes.astype(np.int32), pa.int32())
        ),
    }
    return Columns(table_of(columns, OUTPUT_COLUMNS, len(outputs)), coded.ids)


def _bare_lists(source: Mapping[Any, Any]) -> bool:
    """True if every key is a string and every output a valid bare list of string ids."""
    return _strings(source) and all(map(bare_ids, source.values()))


def bare_ids(value: Any) -> bool:
    """True if ``value`` is a list of non-empty string ids: a valid output as it is."""
    return type(value) is list and _strings(value) and "" not in value


def read_outputs_mapping(source: Mapping[str, Any]) -> Columns:
    """Validated columns of ``{sample_id: actual_output}`` given in Python."""
    if _bare_lists(source):  # fully checked by _bare_lists, at C speed
        return _ranked_columns(source)
    return outputs_columns(parse_outputs((k, v, None) for k, v in source.items()))


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


def read_raw_outputs(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Validated raw outputs of a ``.json``/``.jsonl`` outputs file or a results file
    that kept its outputs, and the samples the system failed on (a results file's error
    rows, sample id -> why; none for an outputs file)."""
    if format_suffix(path) == ".jsonl":
        return _from_jsonl(path), {}
    document = read_document(path)
    errors: dict[str, str] = {}
    if isinstance(document, dict) and document.get("schema") == RESULTS_SCHEMA_ID:
        if "outputs" not in document:
            raise InputError(
                [Problem("this results file kept no outputs to re-score", source=str(path))]
            )
        errors = _error_rows(document, str(path))
        document = document["outputs"]
        both = [i for i in errors if isinstance(document, dict) and i in document]
        if both:
            message = "an error row for a sample that has an output (under /outputs)"
            problems = [Problem(message, i, "/diagnostics/errors", str(path)) for i in both]
            raise InputError(problems, summary=f"invalid results {path}")
    if not isinstance(document, dict):
        raise InputError(
            [
                Problem(
                    "an outputs file is a JSON object {sample_id: actual_output}", source=str(path)
                )
            ]
        )
    return parse_outputs(((k, v, None) for k, v in document.items()), str(path)), errors


def _error_rows(document: Mapping[str, Any], source: str) -> dict[str, str]:
    """A results document's error rows: ``diagnostics.errors``, each ``{id, error}``."""
    rows = document.get("diagnostics", {}).get("errors", [])
    valid = isinstance(rows, list) and all(
        isinstance(row, dict)
        and isinstance(row.get("id"), str)
        and isinstance(row.get("error"), str)
        for row in rows
    )
    if not valid:
        message = "diagnostics.errors must be a list of {id, error} objects (the failed samples)"
        raise InputError([Problem(message, pointer="/diagnostics/errors", source=source)])
    return {row["id"]: row["error"] for row in rows}


def raw_samples(columns: Columns) -> list[dict[str, Any]]:
    """Samples as raw dicts in the dataset format (the short form for relevance alone,
    unless a document is named like a long-form key), e.g. to write a dataset file."""
    from engine.io.records import samples_of

    raws = []
    for sample in samples_of(columns):
        raw: dict[str, Any] = {"id": sample.id}
        if sample.input is not None:
            raw["input"] = sample.input
        expected: dict[str, Any] = {}
        if sample.relevance is not None:
            expected["relevance"] = {d: _plain_number(v) for d, v in sample.relevance.items()}
        if sample.utility is not None:
            expected["utility"] = {d: _plain_number(v) for d, v in sample.utility.items()}
        if sample.grades is not None:
            expected["grades"] = {d: int(v) for d, v in sample.grades.items()}
        if sample.answers is not None:
            expected["answers"] = list(sample.answers)
        if sample.groups is not None:
            expected["groups"] = {g: list(ids) for g, ids in sample.groups.items()}
        short = (
            set(expected) == {"relevance"} and not schemas.LONG_FORM & expected["relevance"].keys()
        )
        if expected:
            raw["expected_output"] = expected["relevance"] if short else expected
        if sample.metadata:
            raw["metadata"] = dict(sample.metadata)
        raws.append(raw)
    return raws


def raw_outputs(columns: Columns) -> dict[str, Any]:
    """Outputs as raw ``{sample_id: actual_output}`` (a bare list of ids when an output
    has no texts, pool or cited ids)."""
    from engine.io.records import outputs_of

    found: dict[str, Any] = {}
    for sample_id, output in outputs_of(columns).items():
        if output.texts is None and output.pool is None and output.cited is None:
            found[sample_id] = list(output.retrieved)
            continue
        texts = output.texts or [None] * len(output.retrieved)
        actual: dict[str, Any] = {
            "retrieved": [
                {"id": d} if t is None else {"id": d, "text": t}
                for d, t in zip(output.retrieved, texts, strict=True)
            ]
        }
        if output.pool is not None:
            actual["pool"] = list(output.pool)
        if output.cited is not None:
            actual["cited"] = list(output.cited)
        found[sample_id] = actual
    return found


def _plain_number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)
