"""Time the classic ranking family: slotwise vs pytrec_eval on the same data, same run.

    python benchmarks/classic_family.py [--queries 100000] [--docs 100] [--repeat 3]

Data: seeded synthetic queries, each with a ranked list of ``--docs`` documents drawn from
300 candidates and ~10 judged documents with grades 0-3. Both tools start from the same
in-memory Python dicts. Reported: median seconds of each step and the ratio to
pytrec_eval (below 1 means slotwise is faster). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from collections.abc import Callable

import numpy as np
import pytrec_eval

import engine
from engine.batch import Batch
from engine.dataset import parse_samples
from engine.outputs import load_outputs

SLOTWISE = [
    "retrieval-hit-at-k@10",
    "retrieval-precision-at-k@10",
    "retrieval-recall-at-k@100",
    "retrieval-r-precision",
    "retrieval-mrr",
    "retrieval-map",
    "retrieval-dcg-at-k@10",
    "retrieval-ndcg-at-k@10",
    "retrieval-err-at-k@10",
    "retrieval-auc-pr",
    "retrieval-judged-at-k@10",
]
PYTREC = {
    "success.10",
    "P.10",
    "recall.100",
    "Rprec",
    "recip_rank",
    "map",
    "ndcg_cut.10",
    "iprec_at_recall",
}


def make_data(
    queries: int, docs: int, seed: int = 0
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(queries):
        qid = f"q{q}"
        qrels[qid] = {f"d{rng.randrange(300)}": rng.randrange(4) for _ in range(10)}
        ranked = rng.sample(range(300), docs)
        run[qid] = {f"d{d}": float(docs - i) for i, d in enumerate(ranked)}
    return qrels, run


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    qrels, run = make_data(args.queries, args.docs)
    samples = [{"id": qid, "expected_output": labels} for qid, labels in qrels.items()]
    outputs = {
        qid: sorted(scores, key=scores.__getitem__, reverse=True) for qid, scores in run.items()
    }
    eng = engine.Engine(config={})
    metrics = [eng.metric(spec) for spec in SLOTWISE]

    def slotwise_end_to_end() -> object:
        return eng.dataset(samples=samples).with_metrics(metrics).evaluate(outputs)

    parsed = parse_samples((s, None) for s in samples)
    loaded = load_outputs(outputs)
    batch = Batch.compile(parsed, [loaded[s.id] for s in parsed])

    def slotwise_metrics_only() -> object:
        return [m.score(batch) for m in metrics]

    def pytrec_end_to_end() -> object:
        return pytrec_eval.RelevanceEvaluator(qrels, PYTREC).evaluate(run)

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, PYTREC)

    steps = {
        "slotwise end to end": slotwise_end_to_end,
        "pytrec_eval end to end": pytrec_end_to_end,
        "slotwise metric step": slotwise_metrics_only,
        "pytrec_eval evaluate() only": lambda: evaluator.evaluate(run),
    }
    timings: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.repeat):  # alternate the tools so machine noise hits both alike
        for name, step in steps.items():
            timings[name].append(timed(step))
    medians = {name: statistics.median(values) for name, values in timings.items()}
    reference = {
        "slotwise end to end": medians["pytrec_eval end to end"],
        "slotwise metric step": medians["pytrec_eval evaluate() only"],
    }
    print(
        f"{args.queries:,} queries x {args.docs} documents, {len(SLOTWISE)} slotwise metrics vs pytrec_eval "
        f"{sorted(PYTREC)}; median of {args.repeat}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()}\n"
    )
    print("| step | seconds | ratio to pytrec_eval |\n|---|---:|---:|")
    for name, seconds in medians.items():
        ratio = f"{seconds / reference[name]:.2f}" if name in reference else ""
        print(f"| {name} | {seconds:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
