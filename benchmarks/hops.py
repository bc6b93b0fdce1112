"""Hops in the columnar path (issue 63): a metric at every hop of 100,000 samples x 4
hops x 100 ids, held as list columns, against the same metric over the same 400,000
rankings as single-ranking samples.

    python benchmarks/hops.py [--samples 100000] [--hops 4] [--ids 100] [--repeat 3]

Data: each sample has a candidate set of 300 distinct ids (codes into a vocabulary of
1,000,000); each hop ranks 100 of them (a random choice per hop: later hops repeat part
of what earlier ones had, as an agent's rewritten queries do); the final context is the
last hop's ranking. Labels: 10 per sample, 5 of them among its candidates (labels 1..3),
5 not. The single-ranking run has one row per (sample, hop): the hop's ranking and the
sample's labels, row ``hops * s + h``.

Timed, from columns built before the clock starts (best of ``--repeat``, the two runs
alternating):

- ``single``: ``Batch.compile`` of the 400,000 rows, ``retrieval-ndcg-at-k@10``;
- ``hops``: ``Batch.compile`` of the 100,000 samples, ``retrieval-ndcg-at-k@10(hop=h)``
  for h = 1..4 (each hop's batch built from the list columns);
- ``agentic``: the five agentic metrics on the 100,000 samples' batch (compiled anew).

The per-hop values must equal the single run's, row for row (checked). Target: ``hops``
at most 1.5x ``single``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

import engine
from engine.evaluation.batch import Batch
from engine.io.columns import (
    OUTPUT_COLUMNS,
    SAMPLE_COLUMNS,
    Columns,
    label_lists,
    list_array,
    offsets_of,
    table_of,
)

VOCABULARY = 1_000_000
CANDIDATES = 300
LABELS = 10
AGENTIC = [
    "agentic-evidence-recall",
    "agentic-first-hop",
    "agentic-redundant-hops",
    "agentic-unprompted-evidence",
    "agentic-diagnosis",
]


def data(
    samples: int, hops: int, ids: int, seed: int = 7, vocabulary: int = VOCABULARY
) -> tuple[Columns, Columns]:
    """(the samples with hops, the same rankings one per row), as joined columns."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, vocabulary - CANDIDATES - LABELS, samples)
    candidates = starts[:, None] + np.arange(CANDIDATES)[None, :]  # distinct per sample
    chosen = np.argsort(rng.random((samples, hops, CANDIDATES)), axis=2)[:, :, :ids]
    rankings = np.take_along_axis(candidates[:, None, :], chosen, axis=2)  # (S, H, ids)
    labelled = np.concatenate(
        [
            candidates[:, rng.permutation(CANDIDATES)[:5]],
            starts[:, None] + CANDIDATES + np.arange(LABELS - 5)[None, :],
        ],
        axis=1,
    )
    grades = rng.integers(1, 4, (samples, LABELS)).astype(np.float64)
    docs = pa.array([f"doc-{i:07d}" for i in range(vocabulary)], pa.string())

    def labels(rows: int, repeat: int) -> pa.Array:
        codes = np.repeat(labelled, repeat, axis=0).ravel()
        values = np.repeat(grades, repeat, axis=0).ravel()
        return label_lists(offsets_of(np.full(rows, LABELS)), codes, values)

    flat = rankings.reshape(-1).astype(np.int32)
    hop_struct = pa.StructArray.from_arrays(
        [
            pa.nulls(samples * hops, pa.string()),
            pa.array(np.full(samples * hops, ids, np.int32)),
            pa.nulls(samples * hops, pa.int32()),
            pa.nulls(samples * hops, pa.int32()),
        ],
        names=["query", "retrieved", "pool", "selected"],
    )
    with_hops = {
        "id": pa.array([f"q{i}" for i in range(samples)]),
        "relevance": labels(samples, 1),
        "retrieved": list_array(
            offsets_of(np.full(samples, ids)), pa.array(rankings[:, -1, :].ravel().astype(np.int32))
        ),
        "hops": list_array(offsets_of(np.full(samples, hops)), hop_struct),
        "hop_retrieved": list_array(offsets_of(np.full(samples, hops * ids)), pa.array(flat)),
    }
    single = {
        "id": pa.array([f"q{i}" for i in range(samples * hops)]),
        "relevance": labels(samples * hops, hops),
        "retrieved": list_array(offsets_of(np.full(samples * hops, ids)), pa.array(flat)),
    }
    kinds = {**SAMPLE_COLUMNS, **OUTPUT_COLUMNS}
    return (
        Columns(table_of(with_hops, kinds, samples), docs),
        Columns(table_of(single, kinds, samples * hops), docs),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--hops", type=int, default=4)
    parser.add_argument("--ids", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with_hops, single = data(args.samples, args.hops, args.ids)
    slotwise = engine.Engine()
    ndcg = slotwise.metric("retrieval-ndcg-at-k@10")
    at = [slotwise.metric(f"retrieval-ndcg-at-k@10(hop={h})") for h in range(1, args.hops + 1)]
    agentic = [slotwise.metric(m) for m in AGENTIC]
    times: dict[str, list[float]] = {"single": [], "hops": [], "agentic": []}
    for _ in range(args.repeat):
        start = time.perf_counter()
        expected = ndcg.score(Batch.compile(single))
        times["single"].append(time.perf_counter() - start)
        start = time.perf_counter()
        batch = Batch.compile(with_hops)
        found = [metric.score(batch) for metric in at]
        times["hops"].append(time.perf_counter() - start)
        start = time.perf_counter()
        batch = Batch.compile(with_hops)
        for metric in agentic:
            metric.score(batch)
        times["agentic"].append(time.perf_counter() - start)
        per_row = np.stack(found, axis=1).ravel()  # row hops * s + h
        if not np.array_equal(per_row, expected):
            raise SystemExit("the per-hop values differ from the single-ranking run's")
    best = {name: min(found) for name, found in times.items()}
    rows = args.samples * args.hops
    print(f"| run | best of {args.repeat} (s) | ratio to single |")
    print("|---|---:|---:|")
    print(f"| single: {rows:,} rankings, nDCG@10 | {best['single']:.2f} | 1.00 |")
    hops_label = f"hops: {args.samples:,} x {args.hops} hops, nDCG@10 at each hop"
    print(f"| {hops_label} | {best['hops']:.2f} | {best['hops'] / best['single']:.2f} |")
    agentic_label = f"agentic: the five agentic metrics, {args.samples:,} x {args.hops} hops"
    print(f"| {agentic_label} | {best['agentic']:.2f} | {best['agentic'] / best['single']:.2f} |")


if __name__ == "__main__":
    main()
