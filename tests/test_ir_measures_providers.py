"""Every ir_measures name slotwise maps (engine/evaluation/ir_measures_names.py) gives
ir_measures' own number: on seeded random queries, each name is computed by ir_measures
with the provider ir_measures itself picks for it (the first of its default pipeline that
supports it; docs/metrics.md, "ir_measures names", lists which) and by slotwise from the
same qrels and run written as TREC files, per query, to 1e-9.

The runs tie scores (one decimal): pytrec_eval and gdeval order ties as trec_eval does
(doc id descending), as slotwise's TREC reader does. ir_measures' msmarco provider (``RR@k``)
and judged provider (``Judged@k``) sort ties by doc id *ascending* instead: the reader
records which ranked items tie (the ``tied`` output column), and those two names map to
specs with ``ties=doc_id_ascending``, which order each run of ties that way."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

import engine
from engine.io.trec import read_qrels, read_run

ir_measures = pytest.importorskip("ir_measures")

#: Every mapped name, with parameters and cutoffs that exercise its translation.
NAMES = [
    "nDCG",
    "nDCG@3",
    "nDCG@10",
    "nDCG(gains={0: 0, 1: 1, 2: 5, 3: 7})@10",
    "nDCG(dcg='exp-log2')@10",
    "P@5",
    "P(rel=2)@5",
    "R@10",
    "R(rel=2)@100",
    "AP",
    "AP@10",
    "AP(rel=2)",
    "RR",
    "RR(rel=2)",
    "RR@5",
    "Success@1",
    "Success(rel=2)@5",
    "Judged@5",
    "Judged@20",
    "ERR@10",
    "IPrec@0.2",
    "IPrec(rel=2)@0.5",
    "Rprec",
    "Rprec(rel=2)",
    "Bpref",
    "infAP",
    "NumRet",
    "NumRel",
    "NumRelRet(rel=2)",
    "SetP",
    "SetRelP",
    "SetR(rel=2)",
    "SetF",
    "SetF(beta=0.5)",
    "SetAP",
]

#: gdeval prints 5 decimals: half a unit of the last, and float noise.
GDEVAL_PRINTED = 5e-6 + 1e-12

#: Providers that sort tied scores by doc id ascending (trec_eval: descending).
ASCENDING_TIES = {"msmarco", "judged"}


def provider(name: str) -> str:
    """The provider ir_measures' default pipeline uses for ``name``."""
    measure = ir_measures.parse_measure(name)
    for candidate in ir_measures.DefaultPipeline.providers:
        if candidate.supports(measure):
            return str(candidate.NAME)
    raise AssertionError(f"no ir_measures provider for {name}")


def collection(seed: int, queries: int, ties: bool) -> tuple[dict, dict]:
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        qid = str(q + 1)  # gdeval reads numeric topics only
        docs = [f"d{j}" for j in rng.sample(range(40), rng.randint(2, 25))]
        judged = rng.sample(docs, rng.randint(1, len(docs)))
        qrels[qid] = {d: rng.choice([0, 0, 1, 1, 2, 3]) for d in judged}
        qrels[qid].update({f"x{j}": rng.choice([0, 1, 2]) for j in range(rng.randint(0, 3))})
        retrieved = rng.sample(docs, rng.randint(1, len(docs)))
        retrieved += [f"u{j}" for j in range(rng.randint(0, 4))]  # unjudged
        if ties:
            run[qid] = {d: round(rng.uniform(0, 2), 1) for d in retrieved}
        else:
            scores = rng.sample(range(1000), len(retrieved))
            run[qid] = {d: float(s) for d, s in zip(retrieved, scores, strict=True)}
    return qrels, run


def slotwise(name: str, qrels: dict, run: dict, directory: Path) -> dict[str, float]:
    (directory / "qrels").write_text(
        "".join(
            f"{q} 0 {d} {label}\n" for q, labels in qrels.items() for d, label in labels.items()
        )
    )
    (directory / "run").write_text(
        "".join(
            f"{q} Q0 {d} 0 {score!r} t\n"
            for q, scores in run.items()
            for d, score in scores.items()
        )
    )
    eng = engine.Engine(config={})
    samples = read_qrels(directory / "qrels")
    results = (
        eng.dataset(samples=samples).with_metrics([name]).evaluate(read_run(directory / "run"))
    )
    [label] = results.labels
    ids = samples.ids.to_pylist()
    return dict(zip(ids, results.values(label).tolist(), strict=True))


def theirs(name: str, qrels: dict, run: dict) -> dict[str, float]:
    measure = ir_measures.parse_measure(name)
    return {m.query_id: float(m.value) for m in ir_measures.iter_calc([measure], qrels, run)}


@pytest.mark.parametrize("name", NAMES)
def test_name_gives_ir_measures_number(name: str, tmp_path: Path) -> None:
    qrels, run = collection(zlib.crc32(name.encode()) % 1000, 60, ties=True)
    expected = theirs(name, qrels, run)
    got = slotwise(name, qrels, run, tmp_path)
    assert expected, name
    tolerance = GDEVAL_PRINTED if provider(name) == "gdeval" else 1e-9
    wrong = {q: (got[q], v) for q, v in expected.items() if abs(got[q] - v) > tolerance}
    assert wrong == {}, f"{name} ({provider(name)}): slotwise, ir_measures {wrong}"


@pytest.mark.parametrize(
    ("name", "trec_eval_order"),
    [("RR@5", "retrieval-mrr@5"), ("Judged@5", "retrieval-judged-at-k@5(denominator=retrieved)")],
)
def test_ascending_ties(name: str, trec_eval_order: str, tmp_path: Path) -> None:
    """msmarco/judged order tied scores by doc id ascending: the ir_measures name gives
    their number on a tied run (its spec sets ties=doc_id_ascending), the same as on the
    run with its ties broken that way beforehand; trec_eval's order gives another one."""
    assert provider(name) in ASCENDING_TIES
    qrels, run = collection(7, 60, ties=True)
    expected = theirs(name, qrels, run)
    broken = {
        q: {d: -float(i) for i, (d, _) in enumerate(sorted(s.items(), key=lambda x: (-x[1], x[0])))}
        for q, s in run.items()
    }
    assert slotwise(trec_eval_order, qrels, broken, tmp_path) == slotwise(
        name, qrels, run, tmp_path
    )
    got = slotwise(name, qrels, run, tmp_path)
    assert all(abs(got[q] - v) <= 1e-9 for q, v in expected.items())
    as_trec_eval = slotwise(trec_eval_order, qrels, run, tmp_path)  # ties by doc id descending
    assert any(abs(as_trec_eval[q] - v) > 1e-9 for q, v in expected.items())
