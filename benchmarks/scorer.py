"""Scoring outputs one at a time: the cost of ``evaluation.scorer().add(sample_id, output)``.

    python benchmarks/scorer.py [--samples 1000]

Data: seeded synthetic samples, each with ~10 judged documents (grades 0-3) and an output
of 100 retrieved ids drawn from a corpus of 5 million distinct doc ids (so the outputs
share almost no ids with each other), scored with the five measures of
``benchmarks/run.py``. Reports the median milliseconds per ``add`` over adding every
sample once, in dataset order, to a fresh scorer: outputs as bare lists of ids, and as a
RAG harness returns them, ``{"retrieved": [{"id", "text"}, ...]}`` with a passage text
of about 400 characters each; the two largest parts of an ``add`` on their own
(:func:`parts_ms`: building the one-row batch, and the five metric plugins scoring it);
and the floor beside them: the least numpy program that scores the same outputs one at a
time (:func:`least_program`).
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METRICS = [
    "retrieval-ndcg-at-k@10",
    "retrieval-map",
    "retrieval-mrr",
    "retrieval-recall-at-k@100",
    "retrieval-precision-at-k@10",
]
CORPUS = 5_000_000
RETRIEVED = 100
JUDGED = 10


def make_samples(samples: int, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Samples with ~10 judged documents each, and 100 retrieved ids per sample of which
    about half of the judged ones are among them."""
    rng = random.Random(seed)
    dataset, outputs = [], {}
    for q in range(samples):
        ranking = [f"doc{i}" for i in rng.sample(range(CORPUS), RETRIEVED)]
        judged = rng.sample(ranking, JUDGED // 2) + [
            f"doc{i}" for i in rng.sample(range(CORPUS), JUDGED - JUDGED // 2)
        ]
        sample_id = f"q{q}"
        dataset.append(
            {
                "id": sample_id,
                "input": sample_id,
                "expected_output": {"relevance": {d: rng.randint(0, 3) for d in judged}},
            }
        )
        outputs[sample_id] = ranking
    return dataset, outputs


def with_texts(ranking: list[str]) -> dict[str, Any]:
    """An output of ``ranking`` as items with a passage text each (about 400 characters)."""
    return {
        "retrieved": [{"id": doc, "text": f"Passage {doc}. " + "text " * 78} for doc in ranking]
    }


def scorer_add_ms(samples: int = 1000, *, texts: bool = False) -> float:
    """Median milliseconds per ``scorer.add`` over adding ``samples`` realistic samples
    (``texts``: each output as items with their passage texts, :func:`with_texts`)."""
    import engine

    dataset, rankings = make_samples(samples)
    outputs: dict[str, Any] = {k: with_texts(v) if texts else v for k, v in rankings.items()}
    evaluation = engine.Engine(config={}).dataset(samples=dataset).with_metrics(METRICS)
    scorer = evaluation.scorer()
    times = []
    for sample_id, output in outputs.items():
        start = time.perf_counter()
        scorer.add(sample_id, output)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def parts_ms(samples: int = 1000) -> tuple[float, float]:
    """Median milliseconds of the two largest parts of an ``add`` of a bare list of ids,
    each timed alone over the samples of :func:`scorer_add_ms`: building the sample's
    one-row batch (the output coded, the labels sliced, :meth:`Batch.one`; the scorer's
    own ``_batch``), and the five metric plugins' ``score`` on a fresh copy of that batch
    (what they share is computed inside the timing, as in an ``add``). No ``add`` can be
    faster than the two added, whatever else it leaves out, while the plugins and the
    batch stay as they are."""
    import attrs

    import engine

    dataset, outputs = make_samples(samples)
    evaluation = engine.Engine(config={}).dataset(samples=dataset).with_metrics(METRICS)
    scorer, metrics = evaluation.scorer(), evaluation.plan.metrics
    rows = {sample["id"]: row for row, sample in enumerate(dataset)}
    building, scoring = [], []
    for sample_id, ranking in outputs.items():
        start = time.perf_counter()
        batch = scorer._batch(rows[sample_id], ranking, bare=True)
        building.append(time.perf_counter() - start)
        fresh = attrs.evolve(batch)  # none of its shared arrays computed yet
        start = time.perf_counter()
        for metric in metrics:
            metric.score(fresh)
        scoring.append(time.perf_counter() - start)
    return statistics.median(building) * 1000, statistics.median(scoring) * 1000


def least_program(relevance: dict[str, int], ranking: list[str]) -> list[float]:
    """nDCG@10, AP, RR, R@100 and P@10 of one ranking of distinct ids in ``ranking``'s
    order, in the fewest numpy calls: the floor of one ``add`` (no validation, no repeated
    ids, no per-sample k, no metric plugins; sums left to right, as slotwise's)."""
    labels = np.fromiter(relevance.values(), np.float64, len(relevance))
    codes = dict(zip(relevance, itertools.count()))
    found = np.fromiter(map(codes.get, ranking, itertools.repeat(labels.size)), np.int64)
    ranked = np.append(labels, np.nan)[found]  # NaN: not judged
    relevant = ranked >= 1.0
    hits = np.cumsum(relevant)
    num_rel = int((labels >= 1.0).sum())
    discount = 1.0 / np.log2(np.arange(2, ranked.size + 2, dtype=np.float64))
    dcg = np.cumsum(np.fmax(ranked, 0.0) * discount)[9]
    ideal = -np.sort(-np.fmax(labels, 0.0))[:10]
    idcg = np.cumsum(ideal * discount[: ideal.size])[-1]
    precisions = np.cumsum(np.where(relevant, hits / np.arange(1, hits.size + 1), 0.0))
    first = np.flatnonzero(relevant)
    return [
        dcg / idcg if idcg else 0.0,
        precisions[-1] / num_rel if num_rel else 0.0,
        1.0 / (first[0] + 1) if first.size else 0.0,
        hits[99] / num_rel if num_rel else 0.0,
        hits[9] / 10,
    ]


def least_program_ms(samples: int = 1000) -> float:
    """Median milliseconds per :func:`least_program` call on the samples of
    :func:`scorer_add_ms`, after checking that it gives the scorer's values."""
    import engine

    dataset, outputs = make_samples(samples)
    labels = {s["id"]: s["expected_output"]["relevance"] for s in dataset}
    evaluation = engine.Engine(config={}).dataset(samples=dataset[:20]).with_metrics(METRICS)
    scorer = evaluation.scorer()
    for sample in dataset[:20]:
        expected = list(scorer.add(sample["id"], outputs[sample["id"]]).values())
        found = least_program(labels[sample["id"]], outputs[sample["id"]])
        if not np.allclose(found, expected, rtol=1e-12, atol=0.0):
            raise AssertionError(f"{sample['id']}: {found} against the scorer's {expected}")
    times = []
    for sample_id, output in outputs.items():
        start = time.perf_counter()
        least_program(labels[sample_id], output)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    print(f"scorer.add: {scorer_add_ms(args.samples):.3f} ms per call ({args.samples} samples)")
    with_text = scorer_add_ms(args.samples, texts=True)
    print(f"scorer.add, items with passage texts: {with_text:.3f} ms per call")
    building, scoring = parts_ms(args.samples)
    print(f"  of which building the one-row batch alone: {building:.3f} ms")
    print(f"  of which the five metric plugins' score alone: {scoring:.3f} ms")
    print(f"the least numpy program: {least_program_ms(args.samples):.3f} ms per call")


if __name__ == "__main__":
    main()
