"""Qrels and runs in the peers' formats (issue 64): the time to read each format into
slotwise's columns, as a ratio to the time to read the same rows as TREC text, and
pyarrow's own read of the file (no validation, no ranking) beside it as its floor.

The data are corpus.py's (MS MARCO-like ids, sparse or deep qrels); the tables are written
by pyarrow and pandas from the TREC text's rows, in ranx's column names (Parquet, JSONL),
ir_measures' (CSV) and BEIR's (TSV). Each reader runs ``--repeat`` times, the formats
interleaved, and a row gives the least time and its ratio to TREC text's.

    python benchmarks/data_in.py [--queries 20000] [--docs 100] [--shape deep] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import corpus
import pyarrow as pa
import pyarrow.csv as csv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from engine.io import sources


def _tables(folder: Path, qrels: Path, run: Path) -> dict[str, tuple[Path, Path]]:
    """The TREC text's rows written as each format, in a peer's column names."""
    read = csv.ParseOptions(delimiter=" ")
    convert = csv.ConvertOptions(column_types={"f0": pa.string(), "f2": pa.string()})
    q = csv.read_csv(qrels, csv.ReadOptions(autogenerate_column_names=True), read, convert)
    r = csv.read_csv(run, csv.ReadOptions(autogenerate_column_names=True), read, convert)
    ranx_q = pa.table({"q_id": q["f0"], "doc_id": q["f2"], "score": q["f3"]})
    ranx_r = pa.table({"q_id": r["f0"], "doc_id": r["f2"], "score": r["f4"]})
    found = {"trec": (qrels, run)}
    pq.write_table(ranx_q, folder / "qrels.parquet")
    pq.write_table(ranx_r, folder / "run.parquet")
    found["parquet"] = (folder / "qrels.parquet", folder / "run.parquet")
    names = {"q_id": "query_id", "score": "relevance"}
    csv.write_csv(
        ranx_q.rename_columns([names.get(n, n) for n in ranx_q.column_names]), folder / "qrels.csv"
    )
    csv.write_csv(ranx_r.rename_columns(["query_id", "doc_id", "score"]), folder / "run.csv")
    found["csv"] = (folder / "qrels.csv", folder / "run.csv")
    tsv = csv.WriteOptions(delimiter="\t", quoting_style="none")
    beir = ranx_q.rename_columns(["query-id", "corpus-id", "score"])
    csv.write_csv(beir, folder / "qrels.tsv", tsv)
    csv.write_csv(ranx_r.rename_columns(["qid", "docno", "sim"]), folder / "run.tsv", tsv)
    found["tsv"] = (folder / "qrels.tsv", folder / "run.tsv")
    for name, table in (("qrels", ranx_q), ("run", ranx_r)):
        table.to_pandas().to_json(folder / f"{name}.jsonl", orient="records", lines=True)
    found["jsonl"] = (folder / "qrels.jsonl", folder / "run.jsonl")
    return found


def _floor(path: Path) -> None:
    """pyarrow's read of a table file alone."""
    if path.suffix == ".parquet":
        pq.read_table(path)
    elif path.suffix == ".jsonl":
        pajson.read_json(path)
    else:
        delimiter = "\t" if path.suffix == ".tsv" else ","
        csv.read_csv(path, parse_options=csv.ParseOptions(delimiter=delimiter))


def _least(work: Callable[[], object], times: list[float]) -> None:
    gc.collect()
    start = time.perf_counter()
    work()
    times.append(time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--shape", choices=("sparse", "deep"), default="sparse")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        qrels, run = corpus.write_files(folder, args.queries, args.docs, shape=args.shape)
        files = _tables(folder, qrels, run)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeat):
            for fmt, (q, r) in files.items():
                for kind, path, read in (
                    ("qrels", q, sources.read_qrels),
                    ("run", r, sources.read_run),
                ):
                    _least(lambda p=path, f=read: f(p), times.setdefault((fmt, kind), []))
                    if fmt != "trec":
                        _least(
                            lambda p=path: _floor(p), times.setdefault((fmt, f"{kind} floor"), [])
                        )
        lines = {
            kind: sum(1 for _ in path.open("rb")) for kind, path in (("qrels", qrels), ("run", run))
        }
    print(
        f"{args.queries} queries x {args.docs} documents, {args.shape} qrels: "
        f"{lines['qrels']:,} qrels lines, {lines['run']:,} run lines; least of {args.repeat}\n"
    )
    print(
        "| format | qrels s | / TREC text | pyarrow's read | run s | / TREC text | pyarrow's read |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for fmt in files:
        cells = [fmt]
        for kind in ("qrels", "run"):
            least = min(times[fmt, kind])
            floor = f"{min(times[fmt, f'{kind} floor']):.2f}" if fmt != "trec" else ""
            cells += [f"{least:.2f}", f"{least / min(times['trec', kind]):.2f}", floor]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
