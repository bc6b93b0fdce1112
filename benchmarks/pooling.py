"""Time the pooling of hole filling (``slotwise annotate --runs ... --depth 10``).

    python benchmarks/pooling.py [--queries 100000] [--runs 3] [--retrieved 20] [--depth 10]

Runs shaped like real ones: every retrieved id drawn from MS MARCO's 8,841,823 passages
(numeric ids), each run with a vocabulary of its own, half the queries labelled; the
median of 3 calls to ``engine.annotate.pool``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.annotate.holes import pool  # noqa: E402
from engine.io.columns import OUTPUT_COLUMNS, Columns, list_array, offsets_of, table_of  # noqa: E402
from engine.io.sources import dataset_columns  # noqa: E402

CORPUS = 8_841_823


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--retrieved", type=int, default=20)
    parser.add_argument("--depth", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    labels = [
        {"id": f"q{i}", "expected_output": {str(d): 1 for d in rng.integers(0, CORPUS, 5)}}
        for i in range(0, args.queries, 2)
    ]
    columns = dataset_columns(labels + [{"id": f"q{i}"} for i in range(1, args.queries, 2)])
    offsets = offsets_of(np.full(args.queries, args.retrieved))
    ids = pa.array([f"q{i}" for i in range(args.queries)])
    texts = list_array(offsets, pa.array(np.full(args.queries * args.retrieved, "t")))
    kinds = {k: OUTPUT_COLUMNS[k] for k in ("id", "retrieved", "texts")}
    runs = []
    for _ in range(args.runs):
        vocabulary = pa.array(rng.integers(0, CORPUS, int(offsets[-1])).astype(str))
        codes = pa.array(np.arange(len(vocabulary), dtype=np.int32))
        table = table_of(
            {"id": ids, "retrieved": list_array(offsets, codes), "texts": texts},
            kinds,
            args.queries,
        )
        runs.append(Columns(table, vocabulary))
    times = []
    for _ in range(3):
        started = time.perf_counter()
        pooled = pool(columns, runs, depth=args.depth)
        times.append(time.perf_counter() - started)
    print(
        f"pooled {len(pooled):,} pairs of {args.queries:,} queries x {args.runs} runs, depth "
        f"{args.depth}: median {statistics.median(times):.2f} s"
    )


if __name__ == "__main__":
    main()
