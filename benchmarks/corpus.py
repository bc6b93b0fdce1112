"""Benchmark data shaped like real retrieval runs: document ids from a corpus of realistic
size, queries whose runs almost never repeat an id across queries, and qrels of the two
shapes real collections have.

- ``corpus``: the number of passages document ids are drawn from (MS MARCO passage v1:
  8,841,823; ids are their numeric strings, ``"0"`` .. ``"8841822"``, as in its qrels).
  With 100 documents per query, a run of 100,000 queries holds ~6 M distinct ids.
- ``shape="sparse"``: about one relevant passage per query, label 1 (MS MARCO dev);
  ``shape="deep"``: about 200 judged passages per query, grades 0-3, about a third of
  them relevant (TREC Deep Learning's pools).
- Runs: ``docs`` passages per query, distinct within the query, scores descending with
  four decimals (so a few neighbours tie, as BM25 and dense scores printed by real
  systems do); a judged passage is retrieved with some probability, at a rank that
  favours the top (so metrics are not all zero).

Query ids are numeric strings too (``"1048585"``-like). Everything is drawn with numpy
from one seed; files are written block by block, so a million queries fit in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MSMARCO_PASSAGES = 8_841_823
SHAPES = ("sparse", "deep")
_BLOCK = 10_000  # queries generated at a time


def _block(
    rng: np.random.Generator, first: int, count: int, docs: int, corpus: int, shape: str
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """One block of queries: long-form qrels (qid, doc, label) and run (qid, doc, score)."""
    qids = 1_000_000 + first + np.arange(count)  # distinct numeric query ids
    judged = 1 + rng.poisson(0.1, count) if shape == "sparse" else rng.integers(150, 250, count)
    width = int(judged.max())
    # judged passages: distinct within a query (a clash is rare; drop the repeats)
    pool = rng.integers(0, corpus, (count, width))
    alive = np.arange(width)[None, :] < judged[:, None]
    if shape == "sparse":
        labels = np.ones((count, width), dtype=np.int64)
    else:
        labels = rng.choice(4, size=(count, width), p=[0.6, 0.2, 0.12, 0.08])
    # the run: some judged passages (relevant ones more often), the rest from the corpus
    found = alive & (rng.random((count, width)) < np.where(labels > 0, 0.6, 0.3))
    ranked = rng.integers(0, corpus, (count, docs))
    ranks = np.minimum((rng.exponential(docs / 6, (count, width))).astype(np.int64), docs - 1)
    rows = np.nonzero(found)
    ranked[rows[0], ranks[rows]] = pool[rows]
    ranked = _distinct_rows(ranked, corpus, rng)
    pool_rows = _distinct_mask(pool, alive)
    step = np.round(rng.exponential(0.05, (count, docs)), 4)
    scores = np.round(30.0 - np.cumsum(step, axis=1), 4)  # descending, a few ties
    q = np.repeat(qids, docs)
    qrels = {"qid": np.nonzero(pool_rows)[0] + qids[0], "doc": pool[pool_rows]}
    qrels["label"] = labels[pool_rows]
    return qrels, {"qid": q, "doc": ranked.ravel(), "score": scores.ravel()}


def _distinct_rows(ranked: np.ndarray, corpus: int, rng: np.random.Generator) -> np.ndarray:
    """Each row's repeated ids replaced by fresh ones until none repeats."""
    while True:
        ordered = np.sort(ranked, axis=1)
        clash = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if not clash.any():
            return ranked
        for row in np.flatnonzero(clash):  # rare: a handful of rows per block
            _, first = np.unique(ranked[row], return_index=True)
            again = np.setdiff1d(np.arange(ranked.shape[1]), first)
            ranked[row, again] = rng.integers(0, corpus, again.size)


def _distinct_mask(pool: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """``alive`` without the later repeats of an id within a row."""
    keep = alive.copy()
    for row in np.flatnonzero(alive.any(axis=1)):
        ids = pool[row, alive[row]]
        if np.unique(ids).size != ids.size:
            _, first = np.unique(ids, return_index=True)
            cols = np.flatnonzero(alive[row])
            keep[row, cols] = False
            keep[row, cols[first]] = True
    return keep


def blocks(
    queries: int, docs: int, corpus: int = MSMARCO_PASSAGES, shape: str = "sparse", seed: int = 0
) -> Iterator[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """The data in blocks of queries: (qrels, run) columns of each."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
    rng = np.random.default_rng(seed)
    for first in range(0, queries, _BLOCK):
        yield _block(rng, first, min(_BLOCK, queries - first), docs, corpus, shape)


def _lines(fields: list[pa.Array]) -> bytes:
    """The rows of string columns as space-separated lines."""
    line = pc.binary_join_element_wise(*fields, " ")
    text = pc.binary_join_element_wise(line, pa.repeat("", len(line)), "\n")
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)
    return text.buffers()[2].to_pybytes()[offsets[0] : offsets[-1]]


def _text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def write_files(
    folder: Path,
    queries: int,
    docs: int,
    corpus: int = MSMARCO_PASSAGES,
    shape: str = "sparse",
    seed: int = 0,
) -> tuple[Path, Path]:
    """A TREC qrels file and run file of the data (``qid 0 doc label``, ``qid Q0 doc rank
    score tag``)."""
    qrels_path = folder / f"{shape}-{corpus}-{queries}.qrels"
    run_path = folder / f"{shape}-{corpus}-{queries}.run"
    with qrels_path.open("wb") as labels, run_path.open("wb") as ranked:
        for qrels, run in blocks(queries, docs, corpus, shape, seed):
            n = qrels["qid"].size
            labels.write(
                _lines(
                    [
                        _text(qrels["qid"]),
                        pa.repeat("0", n),
                        _text(qrels["doc"]),
                        _text(qrels["label"]),
                    ]
                )
            )
            m = run["qid"].size
            rank = np.tile(np.arange(1, docs + 1), m // docs)
            ranked.write(
                _lines(
                    [
                        _text(run["qid"]),
                        pa.repeat("Q0", m),
                        _text(run["doc"]),
                        _text(rank),
                        pc.cast(pa.array(run["score"]), pa.string()),
                        pa.repeat("bench", m),
                    ]
                )
            )
    return qrels_path, run_path


def make_dicts(
    queries: int, docs: int, corpus: int = MSMARCO_PASSAGES, shape: str = "sparse", seed: int = 0
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """The same data as pytrec_eval's dicts ``{qid: {doc: label}}``, ``{qid: {doc: score}}``."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for labels, ranked in blocks(queries, docs, corpus, shape, seed):
        _nest(qrels, labels["qid"], labels["doc"], labels["label"].tolist())
        _nest(run, ranked["qid"], ranked["doc"], ranked["score"].tolist())
    return qrels, run


def _nest(into: dict, qids: np.ndarray, docs: np.ndarray, values: list) -> None:
    q, d = qids.astype(str).tolist(), docs.astype(str).tolist()
    for qid, doc, value in zip(q, d, values, strict=True):
        into.setdefault(qid, {})[doc] = value
