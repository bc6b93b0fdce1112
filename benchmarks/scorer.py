"""Scoring outputs one at a time: the cost of ``evaluation.scorer().add(sample_id, output)``.

    python benchmarks/scorer.py [--samples 1000]

Data: seeded synthetic samples, each with ~10 judged documents (grades 0-3) and an output
of 100 retrieved ids drawn from a corpus of 5 million distinct doc ids (so the outputs
share almost no ids with each other), scored with the five measures of
``benchmarks/run.py``. Reports the median milliseconds per ``add`` over adding every
sample once, in dataset order, to a fresh scorer.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

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


def scorer_add_ms(samples: int = 1000) -> float:
    """Median milliseconds per ``scorer.add`` over adding ``samples`` realistic samples."""
    import engine

    dataset, outputs = make_samples(samples)
    evaluation = engine.Engine(config={}).dataset(samples=dataset).with_metrics(METRICS)
    scorer = evaluation.scorer()
    times = []
    for sample_id, output in outputs.items():
        start = time.perf_counter()
        scorer.add(sample_id, output)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    print(f"scorer.add: {scorer_add_ms(args.samples):.3f} ms per call ({args.samples} samples)")


if __name__ == "__main__":
    main()
