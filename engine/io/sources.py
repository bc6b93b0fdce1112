"""Every source of samples and outputs, to :class:`~engine.io.columns.Columns`: files by
format (YAML/JSON/JSONL documents, TREC qrels and runs, Parquet/Arrow tables, each
optionally compressed), and Python objects (raw samples, ``{sample_id: actual_output}``,
pytrec_eval-shaped dicts, pandas/polars frames, ranx ``Qrels``/``Run``). Streamed
sources yield the same columns in blocks, with bounded memory."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, Problem
from engine.io import documents, frames, sharded, shards, sniff, tables_in, trec
from engine.io.columns import Columns, lengths, stack
from engine.io.files import arrow_input, base_name, format_suffix, read_jsonl
from engine.io.frames import TABLE_SUFFIXES, Where
from engine.io.sharded import Long
from engine.io.shards import Shard, is_sharded

__all__ = [
    "DATASET_SUFFIXES",
    "OUTPUTS_SUFFIXES",
    "dataset_columns",
    "first_file",
    "input_name",
    "is_trec_text",
    "long_input",
    "read_dataset",
    "read_folder",
    "read_long",
    "read_outputs",
    "read_qrels",
    "read_run",
    "stream_dataset",
    "stream_output_lengths",
    "stream_outputs",
    "with_split",
]

DATASET_SUFFIXES = (*documents.DOCUMENT_SUFFIXES, *TABLE_SUFFIXES)
OUTPUTS_SUFFIXES = (".json", ".jsonl", *TABLE_SUFFIXES)
_LINES_PER_BLOCK = 4096  # JSONL lines validated together when streaming
_ROWS_PER_BATCH = 1 << 17  # table rows read together when streaming


def _unknown_format(path: Path, known: tuple[str, ...], what: str) -> InputError:
    return InputError(
        [
            Problem(
                f"unknown {what} format {path.suffix!r}; use one of {', '.join(known)}",
                source=str(path),
            )
        ]
    )


def read_qrels(spec: Any) -> Columns:
    """Samples of a qrels file, or of a sharded one (a directory, a glob, a list of
    files, local or remote: their rows one after the other). Each file is TREC text or a
    table (Parquet, Arrow, CSV, TSV, JSONL), told by its content, in slotwise's or a
    peer's column names (:mod:`engine.io.tables_in`)."""
    if is_sharded(spec):
        return sharded.read(Long.of(spec, "qrels", trec=True))
    return read_long(spec, "qrels")


def read_run(spec: Any) -> Columns:
    """Outputs of a run file, or of a sharded one (see :func:`read_qrels`)."""
    if is_sharded(spec):
        return sharded.read(Long.of(spec, "run", trec=True))
    return read_long(spec, "run")


def read_long(path: str | os.PathLike[str], kind: str) -> Columns:
    """One qrels or run (``kind``) file: TREC text as trec_eval reads it, else a table by
    its content, read as the TREC text of its rows (its shard, :mod:`engine.io.sharded`);
    one that holds no query is an error naming it."""
    fmt = tables_in.format_of(path)
    if fmt == sniff.TREC:
        return trec.read_qrels(path) if kind == "qrels" else trec.read_run(path)
    found = sharded.read(Long((tables_in.shard_of(path),), kind, True))
    if not len(found):
        problem = Problem(f"no {kind} row: the file holds no query", source=os.fspath(path))
        raise InputError([problem], summary=f"empty {kind} file")
    return found


def is_trec_text(spec: Any) -> bool:
    """Whether ``spec`` is one local TREC text file (not a table, not shards)."""
    return not is_sharded(spec) and tables_in.format_of(spec) == sniff.TREC


def input_name(spec: Any) -> str:
    """The name of an input: its file's (``run`` for ``run.trec.gz``), its directory's, or
    its first file's."""
    if isinstance(spec, str | os.PathLike) and not any(c in os.fspath(spec) for c in "*?["):
        return base_name(os.fspath(spec).rstrip("/")) or "dataset"
    first = spec if isinstance(spec, str | os.PathLike) else next(iter(spec), "dataset")
    return base_name(os.fspath(first).split("*")[0].rstrip("/")) or "dataset"


def first_file(spec: Any) -> str:
    """The path of the first file of a sharded input (its format is every file's)."""
    return shards.resolve(spec)[0].path


def long_input(spec: Any, kind: str, *, trec_file: bool) -> Long | None:
    """The input ``spec`` names as long rows (TREC files when ``trec_file``, else labels or
    run tables), for workers to read; None when its files are documents (JSON, YAML,
    JSONL, one format or several), which are read whole."""
    if trec_file:
        return Long.of(spec, "qrels" if kind == "labels" else "run", trec=True)
    found = shards.resolve([spec] if isinstance(spec, str | os.PathLike) else spec)
    if all(format_suffix(s.path) in documents.DOCUMENT_SUFFIXES for s in found):
        return None
    if _format_of(found) not in TABLE_SUFFIXES:
        return None
    return Long(found, kind, False)


def _format_of(found: Sequence[Shard]) -> str:
    """The format suffix every shard of an input shares."""
    suffixes = {format_suffix(shard.path) for shard in found}
    if len(suffixes) > 1:
        raise InputError(
            [
                Problem(
                    f"the files of one input have several formats: {', '.join(sorted(suffixes))}"
                )
            ],
            summary="mixed input formats",
        )
    return suffixes.pop()


@contextlib.contextmanager
def _local(shard: Shard) -> Iterator[Path]:
    """A local file of the shard's content (a copy of a remote one, decompressed), whose
    problems name the shard."""
    import pyarrow.fs as pafs  # only for a shard (S3's and the others' modules, ssl: 15 ms)

    system, _ = shards.filesystem(shard.root)
    if isinstance(system, pafs.LocalFileSystem):
        yield Path(shard.path)
        return
    suffix = format_suffix(shard.path)
    with tempfile.TemporaryDirectory(prefix="slotwise-") as folder:
        path = Path(folder) / f"shard{suffix}"
        with shards.open_stream(shard) as remote, path.open("wb") as local:
            shutil.copyfileobj(remote, local, 1 << 20)
        try:
            yield path
        except InputError as error:
            named = [
                p._replace(source=shard.name) if p.source == str(path) else p
                for p in error.problems
            ]
            raise InputError(named, summary=error.summary.replace(str(path), shard.name)) from None


def _documents(spec: Any, read: Callable[[Path], Columns], what: str) -> Columns:
    """The documents of every shard, one after the other; an id in two shards is refused."""
    found = shards.resolve(spec)
    parts, names = [], []
    for shard in found:
        shards.unchanged(shard)  # as listed, when it is opened ...
        with _local(shard) as path:
            parts.append(read(path))
        shards.unchanged(shard)  # ... and once it was read
        names += [shard.name] * len(parts[-1])
    columns = stack(parts)
    ids = columns.ids
    counts = pc.value_counts(ids)
    again = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(again):
        rows = np.flatnonzero(pc.is_in(ids, value_set=again).to_numpy(zero_copy_only=False))
        seen: dict[str, str] = {}
        problems = []
        for row in rows.tolist():
            sample_id = ids[row].as_py()
            if sample_id in seen:
                message = f"{what} id appears more than once (first in {seen[sample_id]})"
                problems.append(Problem(message, sample_id=sample_id, source=names[row]))
            seen.setdefault(sample_id, names[row])
        raise InputError(problems, summary=f"repeated {what} ids")
    return columns


def read_dataset(path: Any, *, qrels: bool = False) -> tuple[str, Columns]:
    """(name, samples) of a dataset file, or of a TREC qrels file when ``qrels``; a
    sharded input (a directory, a glob, a list of files) is its files' samples, one after
    the other. A folder in BEIR's layout, or saved by Hugging Face ``datasets`` (or of
    Parquet files as the Hub holds them), is that dataset's ``test`` split
    (:mod:`engine.io.beir`, :mod:`engine.io.hf_datasets`)."""
    folder = None if qrels else read_folder(path)
    if folder is not None:
        return input_name(path), folder
    if is_sharded(path):
        long = long_input(path, "labels", trec_file=qrels)
        if long is not None:
            found = sharded.read(long)
        else:
            found = _documents(path, lambda p: read_dataset(p)[1], "sample")
        if not len(found):
            raise InputError(
                [Problem("the dataset has no samples", source=str(path))], summary="invalid dataset"
            )
        return input_name(path), found
    path = Path(path)
    if qrels:
        found = read_qrels(path)
    elif format_suffix(path) in TABLE_SUFFIXES:
        found = frames.labels_from_table(frames.read_table(path), Where(str(path)))
    elif format_suffix(path) in documents.DOCUMENT_SUFFIXES:
        return documents.read_samples(path)
    else:
        raise _unknown_format(path, DATASET_SUFFIXES, "dataset")
    if not len(found):
        raise InputError(
            [Problem("the dataset has no samples", source=str(path))], summary="invalid dataset"
        )
    return base_name(path), found


def read_folder(path: Any, split: str | None = None) -> Columns | None:
    """The samples of a local folder in BEIR's layout or a Hugging Face datasets folder,
    or of its reference (``beir:PATH#SPLIT``, ``hf:PATH``) (``split``: ``test`` unless
    asked); None for any other input."""
    from engine.io import beir, hf_datasets

    if isinstance(path, str) and path.startswith(_FOLDERS):
        scheme, rest = path.split(":", 1)
        folder, split = beir.reference(rest)
        return beir.read(folder, split) if scheme == "beir" else hf_datasets.read(folder, split)
    if not isinstance(path, str | os.PathLike) or not os.path.isdir(path):
        return None
    if beir.is_beir(path):
        return beir.read(path, split)
    if hf_datasets.is_hf(path):
        return hf_datasets.read(path, split)
    return None


_FOLDERS = ("beir:", "hf:")


def with_split(name: str, split: str) -> str:
    """The reference of a BEIR or Hugging Face folder (its path, or its ``beir:`` or
    ``hf:`` reference) with ``split``: ``beir:PATH#SPLIT``; any other name is an error."""
    from engine.io import beir, hf_datasets

    if name.startswith(_FOLDERS):
        scheme, rest = name.split(":", 1)
        return f"{scheme}:{beir.reference(rest)[0]}#{split}"
    if beir.is_beir(name):
        return f"beir:{name}#{split}"
    if hf_datasets.is_hf(name):
        return f"hf:{name}#{split}"
    message = "a split is one of a BEIR or Hugging Face folder's (beir:PATH, hf:PATH)"
    raise InputError([Problem(message, source=name)], summary="not a folder with splits")


def dataset_columns(source: Any) -> Columns:
    """Samples from Python: raw sample mappings (validated against the schema), qrels
    ``{qid: {docid: label}}``, a labels frame (pandas, polars, Arrow), a ranx ``Qrels``, or
    samples already in columns. None at all is an error: it would score nothing."""
    found = _dataset_columns(source)
    if not len(found):
        problem = Problem(f"the dataset has no samples (from an empty {type(source).__name__})")
        raise InputError([problem], summary="invalid dataset")
    return found


def _dataset_columns(source: Any) -> Columns:
    if isinstance(source, Columns):
        return source
    source = _tuples_table(source, "relevance")
    table = frames.as_table(source)
    if table is not None:
        return frames.labels_from_table(table)
    if _from_ranx(source, "Qrels"):
        source = source.to_dict()
    if isinstance(source, Mapping):
        found = frames.labels_from_dicts(source)
        if found is not None:
            return found
        raws = [{"id": qid, "expected_output": labels} for qid, labels in source.items()]
        return documents.parse_samples((raw, None) for raw in raws)
    return documents.parse_samples((raw, None) for raw in source)


def read_outputs(source: Any, *, run: bool = False) -> Columns:
    """Outputs from a file (an outputs document, a Parquet/Arrow run, a results file that
    kept its outputs, its failed samples as error rows, or a TREC run when ``run``), ``{sample_id: actual_output}``,
    pytrec_eval's ``{qid: {docid: score}}``, a run frame, a ranx ``Run``, or outputs already
    in columns."""
    if isinstance(source, Columns):
        return source
    source = _tuples_table(source, "score")
    table = frames.as_table(source)
    if table is not None:
        return frames.run_from_table(table)
    if _from_ranx(source, "Run"):
        source = source.to_dict()
    if isinstance(source, Mapping):
        return frames.run_from_dicts(source) or documents.read_outputs_mapping(source)
    if is_sharded(source):
        long = long_input(source, "run", trec_file=run)
        if long is not None:
            return sharded.read(long)
        return _documents(source, read_outputs, "output")
    path = Path(source)
    if run:
        return read_run(path)
    if format_suffix(path) in TABLE_SUFFIXES:
        return frames.run_from_table(frames.read_table(path), Where(str(path)))
    if format_suffix(path) in (".json", ".jsonl"):
        return documents.outputs_columns(*documents.read_raw_outputs(path))
    raise _unknown_format(path, OUTPUTS_SUFFIXES, "outputs")


def _tuples_table(source: Any, value: str) -> Any:
    """ir_measures' ``Qrel`` (``value`` relevance) or ``ScoredDoc`` (score) namedtuples,
    in a list or any iterator, as an Arrow table of ``query_id``, ``doc_id`` and
    ``value``, transposed column by column; any other source as it is (an iterator
    read into a list)."""
    if isinstance(source, Iterator):
        source = list(source)
    if not isinstance(source, list | tuple) or not source:
        return source
    fields = getattr(source[0], "_fields", ())
    wanted = ("query_id", "doc_id", value)
    if not set(wanted) <= set(fields):
        return source
    try:
        columns = dict(zip(fields, zip(*source, strict=True), strict=False))
    except ValueError:  # rows of different lengths: not one kind of tuple
        return source
    return pa.table({name: list(columns[name]) for name in wanted})


def _from_ranx(source: Any, name: str) -> bool:
    kind = type(source)
    return kind.__name__ == name and kind.__module__.split(".")[0] == "ranx"


# -- streams ---------------------------------------------------------------------------------


def stream_dataset(path: Any, *, qrels: bool = False) -> Iterator[Columns]:
    """The samples of a dataset file in blocks: JSONL, Parquet/Arrow and TREC qrels are
    read as streams, YAML/JSON documents whole; a sharded input shard after shard; a
    BEIR or Hugging Face folder whole."""
    folder = None if qrels else read_folder(path)
    if folder is not None:
        return iter([folder])
    if is_sharded(path):
        long = long_input(path, "labels", trec_file=qrels)
        if long is not None:
            return sharded.stream(long)
        return _streamed(path, stream_dataset)
    path = Path(path)
    suffix = format_suffix(path)
    if qrels:
        return trec.stream_qrels(path) if is_trec_text(path) else iter([read_qrels(path)])
    if suffix == ".jsonl":
        return _jsonl_samples(path)
    if suffix in TABLE_SUFFIXES:
        return (frames.labels_from_table(t, w) for t, w in _query_batches(path))
    return iter([read_dataset(path)[1]])


def stream_outputs(path: Any, *, run: bool = False) -> Iterator[Columns]:
    """The outputs of a file in blocks: JSONL, Parquet/Arrow runs and TREC runs are read
    as streams, JSON documents whole; a sharded input shard after shard."""
    if is_sharded(path):
        long = long_input(path, "run", trec_file=run)
        if long is not None:
            return sharded.stream(long)
        return _streamed(path, stream_outputs)
    path = Path(path)
    suffix = format_suffix(path)
    if run:
        return trec.stream_run(path) if is_trec_text(path) else iter([read_run(path)])
    if suffix == ".jsonl":
        return _jsonl_outputs(path)
    if suffix in TABLE_SUFFIXES:
        return (frames.run_from_table(t, w) for t, w in _query_batches(path))
    return iter([read_outputs(path)])


def stream_output_lengths(
    path: Any, *, run: bool = False
) -> Iterator[tuple[pa.Array, dict[str, Any]]]:
    """Per block of outputs, their sample ids and the length of each list column
    (``retrieved``, ``pool``): all a streamed evaluation's first pass needs of them.
    A TREC run is read for its query column alone."""
    if run and is_trec_text(path):
        for ids, counts in trec.stream_run_lengths(path):
            yield ids, {"retrieved": counts}
        return
    for block in stream_outputs(path, run=run):
        yield block.ids, {name: lengths(block.column(name)) for name in ("retrieved", "pool")}


def _streamed(spec: Any, stream: Callable[[Path], Iterator[Columns]]) -> Iterator[Columns]:
    """The blocks of each shard of documents in turn."""
    for shard in shards.resolve(spec):
        with _local(shard) as path:
            yield from stream(path)


def _blocks(path: Path) -> Iterator[list[tuple[int, Any]]]:
    lines = read_jsonl(path)
    while block := list(itertools.islice(lines, _LINES_PER_BLOCK)):
        yield block


def _jsonl_samples(path: Path) -> Iterator[Columns]:
    for block in _blocks(path):
        yield documents.parse_samples(((raw, line) for line, raw in block), str(path))


def _jsonl_outputs(path: Path) -> Iterator[Columns]:
    for block in _blocks(path):
        triples, problems = [], []
        for line, record in block:
            sample_id = record.get("id") if isinstance(record, dict) else None
            if not isinstance(sample_id, str) or "actual_output" not in record:
                message = 'an outputs line is an object {"id": ..., "actual_output": ...}'
                problems.append(Problem(message, source=str(path), line=line))
            else:
                triples.append((sample_id, record["actual_output"], line))
        if problems:
            raise InputError(problems, summary=f"invalid outputs {path}")
        yield documents.outputs_columns(documents.parse_outputs(triples, str(path)))


def _query_batches(path: Path) -> Iterator[tuple[pa.Table, Where]]:
    """A Parquet/Arrow/CSV file in batches of rows that never split a query's rows (they must
    be together), each with where its rows start."""
    import pyarrow.csv
    import pyarrow.ipc
    import pyarrow.parquet

    try:
        if format_suffix(path) == ".parquet":
            batches: Iterator[Any] = pyarrow.parquet.ParquetFile(path).iter_batches(_ROWS_PER_BATCH)
        elif format_suffix(path) == ".csv":
            batches = iter(
                pyarrow.csv.open_csv(arrow_input(path), convert_options=frames.csv_options())
            )
        else:
            reader = pyarrow.ipc.open_file(path)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
    except (OSError, pa.ArrowInvalid) as error:
        raise InputError(
            [Problem(f"cannot read columnar file: {error}", source=str(path))]
        ) from None
    held: pa.Table | None = None
    first = 0
    for batch in batches:
        table = pa.Table.from_batches([batch])
        if held is not None:
            table = pa.concat_tables([held, table])
        if "query_id" not in table.column_names or table.num_rows == 0:
            held = table
            continue
        queries = table.column("query_id")
        last = queries[-1]
        cut = table.num_rows
        while cut > 0 and queries[cut - 1] == last:
            cut -= 1
        if cut == 0:
            held = table
            continue
        yield table.slice(0, cut), Where(str(path), first_row=first)
        first += cut
        held = table.slice(cut)
    if held is not None and held.num_rows:
        yield held, Where(str(path), first_row=first)
