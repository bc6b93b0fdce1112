"""Regenerate the ndeval fixture: random diversity qrels and a run, scored by ir_measures'
pyndeval provider, and their copies for the ndeval binary (see README.md here). Needs
ir_measures and pyndeval importable; the tests only read the files this writes."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import ir_measures
from ir_measures import (
    AP_IA,
    NRBP,
    ERR_IA,
    P_IA,
    StRecall,
    alpha_DCG,
    alpha_nDCG,
    nERR_IA,
    nNRBP,
)

HERE = Path(__file__).parent
CUTOFFS = (1, 2, 5, 10, 20)
MEASURES = [
    *(m @ k for m in (ERR_IA, nERR_IA, alpha_DCG, alpha_nDCG, P_IA, StRecall) for k in CUTOFFS),
    NRBP,
    nNRBP,
    AP_IA,
    alpha_nDCG(alpha=0.3) @ 10,
    alpha_DCG(alpha=0.8) @ 5,
    NRBP(alpha=0.3, beta=0.8),
    nNRBP(alpha=0.7, beta=0.2),
]
#: Measured on the qrels with rel=2 (the tests read the qrels with threshold 2).
MEASURES_REL2 = [ERR_IA(rel=2) @ 10, alpha_nDCG(rel=2) @ 5, AP_IA(rel=2), StRecall(rel=2) @ 20]
DOCS = [f"d{i}" for i in range(40)] + ["été", "Zeta", "a-1", "ß7", "d05"]


def main(seed: int = 24) -> None:
    rng = random.Random(seed)
    qrels, run = [], []
    for q in range(40):
        qid = f"q{q}"
        pool = rng.sample(DOCS, rng.randint(1, 25))
        subtopics = [f"s{s}" for s in rng.sample(range(12), rng.randint(1, 6))]
        for doc in pool:
            for subtopic in rng.sample(subtopics, rng.randint(1, len(subtopics))):
                label = rng.choice([-1, 0, 0, 1, 1, 1, 2, 3]) if q % 9 else 0
                qrels.append(ir_measures.Qrel(qid, doc, label, subtopic))
        if q % 13 == 5:
            continue  # judged, not retrieved
        retrieved = rng.sample(DOCS, rng.randint(1, 30))
        scores = [float(rng.choice(range(6))) if q % 3 else rng.random() for _ in retrieved]
        run += [ir_measures.ScoredDoc(qid, d, s) for d, s in zip(retrieved, scores, strict=True)]
    run += [ir_measures.ScoredDoc("q-unjudged", "d1", 1.0)]
    with open(HERE / "diversity.qrels", "w", encoding="utf-8") as out:
        out.writelines(f"{r.query_id} {r.iteration} {r.doc_id} {r.relevance}\n" for r in qrels)
    with open(HERE / "diversity.run", "w", encoding="utf-8") as out:
        ranked: dict[str, int] = {}
        for r in run:
            ranked[r.query_id] = ranked.get(r.query_id, 0) + 1
            out.write(f"{r.query_id} Q0 {r.doc_id} {ranked[r.query_id]} {r.score!r} random\n")
    rows = []
    for measures, label in ((MEASURES, "1"), (MEASURES_REL2, "2")):
        for measure in measures:  # one at a time: pyndeval's later invocations can differ
            for m in ir_measures.pyndeval.iter_calc([measure], qrels, run):
                rows.append(f"{m.measure}\t{label}\t{m.query_id}\t{m.value!r}\n")
    with open(HERE / "expected.tsv", "w", encoding="utf-8") as out:
        out.write("measure\tthreshold\tquery\tvalue\n")
        out.writelines(sorted(rows))
    # ndeval's files: numeric topics and subtopics (q7 -> 7, s3 -> 3), labels >= 0
    with open(HERE / "traditional.qrels", "w", encoding="utf-8") as out:
        for r in qrels:
            out.write(f"{r.query_id[1:]} {r.iteration[1:]} {r.doc_id} {max(r.relevance, 0)}\n")
    with open(HERE / "traditional.run", "w", encoding="utf-8") as out:
        for line in (HERE / "diversity.run").read_text(encoding="utf-8").splitlines():
            if not line.startswith("q-"):
                out.write(line[1:] + "\n")


#: The queries of ``ordered.*``: 1 to 20, and the four where the order in which a
#: document's subtopic gains are added decides a tie of the greedy ideal ranking at
#: alpha = 0.3 (found by scoring all 200 both ways).
ORDERED_QUERIES = {*range(1, 21), 37, 101, 116, 174}


def ordered(seed: int = 4) -> None:
    """``ordered.qrels`` and ``ordered.run`` for the ndeval binary (``ordered.csv``):
    numeric subtopics listed in a shuffled order within each query, most documents
    relevant to several of them."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(12)]
    qrels, run = [], []
    for q in range(1, 201):
        lines = []
        pool = rng.sample(docs, rng.randint(4, 12))
        subtopics = rng.sample(range(1, 8), 6)
        for doc in pool:
            lines += [f"{q} {s} {doc} 1\n" for s in rng.sample(subtopics, rng.randint(2, 6))]
        rng.shuffle(lines)
        ranked = [
            f"{q} Q0 {d} 0 {float(rng.choice(range(4)))!r} ordered\n"
            for d in rng.sample(docs, rng.randint(1, 12))
        ]
        if q in ORDERED_QUERIES:
            qrels += lines
            run += ranked
    (HERE / "ordered.qrels").write_text("".join(qrels), encoding="utf-8")
    (HERE / "ordered.run").write_text("".join(run), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:2] == ["ordered"]:
        ordered()
    else:
        main(*map(int, sys.argv[1:]))
