"""Every measure ir_measures knows gives, under its ir_measures name, the number of the
provider ir_measures itself picks for it (the first of its default pipeline that supports
it; docs/metrics.md, "ir_measures names", lists which), or is refused with a reason that
running ir_measures bears out. The providers (pytrec_eval, cwl_eval, compat, pyndeval,
judged, msmarco, gdeval, accuracy) are test dependencies and run here.

Each name is computed by ir_measures and by slotwise from the same qrels and run written
as TREC files, per query, to 1e-9 (gdeval prints 5 decimals: half a unit of the last), on
seeded random queries: graded labels -1..4 (pytrec_eval crashes on a query whose labels
are all -2 or below), judged documents the run misses, unjudged
retrieved documents, scores of one decimal (so many ties, 0 and negative ones among them),
queries only in the qrels and queries only in the run.

Tied scores: pytrec_eval and gdeval order them as trec_eval does (doc id descending), as
slotwise's TREC reader does; the msmarco, judged, compat and pyndeval providers by doc id
ascending (``ties=doc_id_ascending``); cwl_eval and the accuracy provider keep the run
file's order (``ties=run_order``). The reader records which ranked items tie and their
order in the file, so each name's spec orders them as its provider does."""

from __future__ import annotations

import math
import random
import zlib
from pathlib import Path

import pytest

import engine
from engine.evaluation.ir_measures_names import ALIASES, MEASURES, translate
from engine.io.trec import read_qrels, read_run, read_subtopic_qrels

ir_measures = pytest.importorskip("ir_measures")

#: Every measure ir_measures registers but the diversity family, with parameters and
#: cutoffs that exercise its translation.
NAMES = [
    "nDCG",
    "nDCG@3",
    "nDCG@10",
    "nDCG(gains={0: 0, 1: 1, 2: 5, 3: 7})@10",
    "nDCG(dcg='exp-log2')@10",
    "nDCG(judged_only=True)",
    "nDCG(judged_only=True, gains={1: 2, 2: 5})@5",
    "NDCG@5",
    "P@5",
    "P(rel=2)@5",
    "P(judged_only=True)@5",
    "Precision@3",
    "R@10",
    "R(rel=2)@100",
    "R(judged_only=True)@5",
    "Recall@3",
    "AP",
    "AP@10",
    "AP(rel=2)",
    "AP(judged_only=True)",
    "AP(judged_only=True)@5",
    "MAP",
    "RR",
    "RR(rel=2)",
    "RR@5",
    "RR(judged_only=True)",
    "MRR",
    "Success@1",
    "Success(rel=2)@5",
    "Success(judged_only=True)@3",
    "Judged",
    "Judged@5",
    "Judged@20",
    "ERR@3",
    "ERR@10",
    "IPrec@0.2",
    "IPrec(rel=2)@0.5",
    "IPrec(judged_only=True)@0.0",
    "IPrec(judged_only=True)@0.3",
    "Rprec",
    "Rprec(rel=2)",
    "Rprec(judged_only=True)",
    "RPrec",
    "Bpref",
    "BPref(rel=2)",
    "infAP",
    "NumQ",
    "NumRet",
    "NumRet(rel=2)",
    "NumRel",
    "NumRelRet(rel=2)",
    "SetP",
    "SetP(judged_only=True)",
    "SetP(relative=True)",
    "SetRelP(judged_only=True)",
    "SetR(rel=2)",
    "SetF",
    "SetF(beta=0.5)",
    "SetF(judged_only=True)",
    "SetAP",
    "SetAP(judged_only=True)",
    "Compat",
    "Compat(p=0.8)",
    "Compat(p=0.5, normalize=False)",
    "Accuracy",
    "Accuracy@3",
    "Accuracy(rel=2)@5",
    "RBP(rel=1)",
    "RBP(rel=0, p=0.8)",  # unjudged documents gain nothing (judged 0 >= 0 does)
    "RBP(rel=2, p=0.99)",
    "RBP(rel=1, p=0.999)",
    "SDCG(max_rel=4)@10",
    "SDCG(min_rel=1, max_rel=3)@5",
    "NERR8(max_rel=4)@5",
    "NERR9(max_rel=3)@10",
    "NERR10(max_rel=4)",
    "NERR10(max_rel=3, p=0.7)",
    "NERR11(max_rel=4)",
    "NERR11(max_rel=3, T=2.0)",
    "INST(max_rel=4)",
    "INST(max_rel=3, T=2.0)",
    "INSQ(max_rel=4)",
    "INSQ(min_rel=1, max_rel=4, T=3.0)",
    "BPM(max_rel=4)@5",
    "BPM(max_rel=4, T=2.0)@20",
]

#: The diversity family (pyndeval's), on diversity qrels.
DIVERSITY_NAMES = [
    "alpha_nDCG@1",
    "alpha_nDCG@5",
    "alpha_nDCG@20",
    "alpha_nDCG(alpha=0.3)@10",
    "alpha_nDCG(alpha=0.7)@20",
    "\N{GREEK SMALL LETTER ALPHA}_nDCG@10",
    "alpha_DCG@1",
    "alpha_DCG(alpha=0.3)@10",
    "\N{GREEK SMALL LETTER ALPHA}_DCG@5",
    "ERR_IA@5",
    "ERR_IA@20",
    "nERR_IA@1",
    "nERR_IA@10",
    "NRBP",
    "NRBP(alpha=0.3, beta=0.8)",
    "nNRBP",
    "nNRBP(alpha=0.3, beta=0.8)",
    "nNRBP(alpha=0.7, beta=0.2)",
    "AP_IA",
    "MAP_IA",
    "P_IA@5",
    "P_IA@20",
    "StRecall@5",
    "StRecall@20",
]

#: Diversity names with judged_only=True: ir_measures 0.4.3's pyndeval provider raises a
#: TypeError on them, so they are pinned against pyndeval on the run without the
#: documents its qrels lack, which is what that provider's filter does before it fails.
JUDGED_ONLY_DIVERSITY = [
    "alpha_nDCG(judged_only=True)@10",
    "alpha_DCG(judged_only=True, alpha=0.3)@10",
    "ERR_IA(judged_only=True)@5",
    "nERR_IA(judged_only=True)@20",
    "AP_IA(judged_only=True)",
    "P_IA(judged_only=True)@10",
]

#: Names slotwise refuses, with the reason; ir_measures fails on each of them too.
REFUSED = {
    "P": "needs a cutoff",
    "Success": "needs a cutoff",
    "ERR": "needs a cutoff",
    "IPrec": "needs a recall",
    "nDCG(rel=2)@10": "has no parameter 'rel'",
    "nDCG(dcg='exp-log2', gains={1: 2})@5": "with gains or judged_only",
    "nDCG(dcg='exp-log2', judged_only=True)@5": "with gains or judged_only",
    "RR(judged_only=True)@5": "RR with both a cutoff and judged_only",
    "NumRel(rel=2)": "NumRel with rel other than 1",
    "RBP": "only with rel",
    "RBP(rel=1)@10": "takes no cutoff",
    "SDCG@10": "needs max_rel",
    "INST(max_rel=3)@10": "takes no cutoff",
    "SetP@5": "takes no cutoff",
    "SetR@5": "takes no cutoff",
    "P_IA": "needs a cutoff",
    "alpha_nDCG@21": "up to 20",
    "NRBP@5": "takes no cutoff",
    "StRecall(judged_only=True)@5": "has no parameter 'judged_only'",
}

#: gdeval prints 5 decimals: half a unit of the last, and float noise.
GDEVAL_PRINTED = 5e-6 + 1e-12


def provider(name: str) -> str:
    """The provider ir_measures' default pipeline uses for ``name``."""
    measure = ir_measures.parse_measure(name)
    for candidate in ir_measures.DefaultPipeline.providers:
        if candidate.supports(measure):
            return str(candidate.NAME)
    raise AssertionError(f"no ir_measures provider for {name}")


def collection(seed: int, queries: int = 60) -> tuple[dict, dict]:
    """Qrels and a run (dicts in file order); the queries ``i % 11 == 3`` are only in the
    run, the queries ``i % 7 == 2`` only in the qrels."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        qid = str(q + 1)  # gdeval reads numeric topics only
        docs = [f"d{j}" for j in rng.sample(range(40), rng.randint(2, 25))]
        if q % 11 != 3:
            judged = rng.sample(docs, rng.randint(1, len(docs)))
            qrels[qid] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3, 4]) for d in judged}
            qrels[qid].update({f"x{j}": rng.choice([0, 1, 2]) for j in range(rng.randint(0, 3))})
        if q % 7 == 2:
            continue
        retrieved = rng.sample(docs, rng.randint(1, len(docs)))
        retrieved += [f"u{j}" for j in range(rng.randint(0, 4))]  # unjudged
        run[qid] = {d: round(rng.uniform(-0.5, 2), 1) for d in retrieved}
    return qrels, run


def _write_run(run: dict, path: Path) -> None:
    path.write_text(
        "".join(f"{q} Q0 {d} 0 {s!r} t\n" for q, scores in run.items() for d, s in scores.items())
    )


def slotwise(name: str, qrels: dict, run: dict, directory: Path) -> dict[str, float]:
    """Per-query values of ``name`` (NaN: NA) from the qrels and run as TREC files."""
    (directory / "qrels").write_text(
        "".join(
            f"{q} 0 {d} {label}\n" for q, labels in qrels.items() for d, label in labels.items()
        )
    )
    _write_run(run, directory / "run")
    return _scores(name, read_qrels(directory / "qrels"), directory / "run")


def _scores(name: str, samples: engine.Columns, run: Path) -> dict[str, float]:
    results = engine.Engine(config={}).dataset(samples=samples).with_metrics([name])
    evaluated = results.evaluate(read_run(run))
    [label] = evaluated.labels
    return dict(zip(samples.ids.to_pylist(), evaluated.values(label).tolist(), strict=True))


def theirs(name: str, qrels: object, run: dict) -> dict[str, float]:
    """Per-query values of ir_measures (a query it leaves out is missing). The accuracy
    provider divides by zero on a query whose cut ranking has no non-relevant document:
    such a query is computed alone, and NaN."""
    measure = ir_measures.parse_measure(name)
    try:
        return {m.query_id: float(m.value) for m in ir_measures.iter_calc([measure], qrels, run)}
    except ZeroDivisionError:
        assert provider(name) == "accuracy"
    values: dict[str, float] = {}
    assert isinstance(qrels, dict)
    for query, labels in qrels.items():
        alone = {query: run[query]} if query in run else {}
        try:
            values.update(
                (m.query_id, float(m.value))
                for m in ir_measures.iter_calc([measure], {query: labels}, alone)
            )
        except ZeroDivisionError:
            values[query] = math.nan
    return values


def differences(expected: dict[str, float], got: dict[str, float], tolerance: float) -> dict:
    """Queries whose values differ: a query ir_measures leaves out is NA in slotwise."""
    wrong = {}
    for query, value in got.items():
        want = expected.get(query, math.nan)
        same = math.isnan(value) if math.isnan(want) else abs(value - want) <= tolerance
        if not same:
            wrong[query] = (value, want)
    return wrong


def test_providers_are_installed() -> None:
    """cwl_eval and pyndeval are test dependencies (the `test` extra): without them
    ir_measures has no provider for their measures."""
    missing = [p.NAME for p in ir_measures.DefaultPipeline.providers if not p.is_available()]
    assert missing == [], f"install the test extra: {missing} unavailable"


class TestNames:
    @pytest.mark.parametrize("name", NAMES)
    def test_name_gives_ir_measures_number(self, name: str, tmp_path: Path) -> None:
        """Per query, equal to the provider ir_measures picks."""
        qrels, run = collection(zlib.crc32(name.encode()) % 1000)
        expected = theirs(name, qrels, run)
        got = slotwise(name, qrels, run, tmp_path)
        assert set(got) == set(qrels)
        assert any(not math.isnan(v) for v in got.values()), name
        tolerance = GDEVAL_PRINTED if provider(name) == "gdeval" else 1e-9
        wrong = differences(expected, got, tolerance)
        assert wrong == {}, f"{name} ({provider(name)}): slotwise, ir_measures {wrong}"

    def test_every_measure_is_covered(self) -> None:
        """Every name ir_measures registers is a name slotwise maps, and is exercised
        here (computed, or refused)."""
        registered = set(ir_measures.measures.registry)
        assert registered == set(MEASURES) | set(ALIASES)
        tried = {ir_measures.parse_measure(n).NAME for n in [*NAMES, *DIVERSITY_NAMES]}
        tried |= {ir_measures.parse_measure(n).NAME for n in REFUSED}
        assert {ir_measures.measures.registry[n].NAME for n in registered} <= tried

    @pytest.mark.parametrize(("name", "reason"), REFUSED.items())
    def test_refused_names_fail_in_ir_measures_too(self, name: str, reason: str) -> None:
        """The refusal names its reason, and ir_measures cannot compute the name either."""
        with pytest.raises(engine.MetricParameterError, match=reason):
            translate(name)
        qrels = [ir_measures.Qrel("1", "d1", 1, "1"), ir_measures.Qrel("1", "d2", 0, "2")]
        with pytest.raises((ValueError, AssertionError, KeyError, TypeError)):
            list(
                ir_measures.iter_calc([ir_measures.parse_measure(name)], qrels, {"1": {"d1": 1.0}})
            )

    @pytest.mark.slow  # ranx compiles its sort with numba first: about 15 s
    def test_uncut_exponential_ndcg_is_ranx_whose_ties_follow_no_rule(self) -> None:
        """nDCG(dcg='exp-log2') without a cutoff is ranx's, which ranks 40 documents of
        three tied scores neither in the run's order nor by doc id."""
        ranx = pytest.importorskip("ranx")
        assert provider("nDCG(dcg='exp-log2')") == "ranx"
        docs = [f"d{i:02d}" for i in range(40)]
        scores = {d: float(i % 3) for i, d in enumerate(docs)}
        ranked = list(ranx.Run({"q": scores}).run["q"])
        as_given = sorted(docs, key=lambda d: -scores[d])  # stable: the run's order
        by_doc_id = sorted(docs, key=lambda d: (-scores[d], d))
        assert ranked not in (as_given, by_doc_id)
        with pytest.raises(engine.MetricParameterError, match="uncut with ranx"):
            translate("nDCG(dcg='exp-log2')")


class TestTieOrders:
    @pytest.mark.parametrize(
        ("name", "trec_eval_order"),
        [
            ("RR@5", "retrieval-mrr@5"),
            ("Judged@5", "retrieval-judged-at-k@5(denominator=retrieved)"),
        ],
    )
    def test_ascending_ties(self, name: str, trec_eval_order: str, tmp_path: Path) -> None:
        """msmarco/judged order tied scores by doc id ascending: the ir_measures name gives
        their number on a tied run (its spec sets ties=doc_id_ascending), the same as on the
        run with its ties broken that way beforehand; trec_eval's order gives another one."""
        assert provider(name) in {"msmarco", "judged"}
        qrels, run = collection(7)
        expected = theirs(name, qrels, run)
        broken = {
            q: {
                d: -float(i)
                for i, (d, _) in enumerate(sorted(s.items(), key=lambda x: (-x[1], x[0])))
            }
            for q, s in run.items()
        }
        assert slotwise(trec_eval_order, qrels, broken, tmp_path) == slotwise(
            name, qrels, run, tmp_path
        )
        assert differences(expected, slotwise(name, qrels, run, tmp_path), 1e-9) == {}
        as_trec_eval = slotwise(trec_eval_order, qrels, run, tmp_path)
        assert differences(expected, as_trec_eval, 1e-9) != {}

    @pytest.mark.parametrize(
        ("name", "trec_eval_order"),
        [
            ("RBP(rel=1, p=0.8)", "cwl-rbp(p=0.8)"),
            ("INST(max_rel=4)", "cwl-inst(max_rel=4)"),
            ("Accuracy", "retrieval-accuracy"),
        ],
    )
    def test_run_order_ties(self, name: str, trec_eval_order: str, tmp_path: Path) -> None:
        """cwl_eval and the accuracy provider keep tied scores in the run file's order: the
        name (ties=run_order) equals its spec in trec_eval's order on the run with its ties
        broken that way beforehand, and ir_measures; trec_eval's order differs."""
        assert provider(name) in {"cwl_eval", "accuracy"}
        qrels, run = collection(11)
        broken = {
            q: {d: -float(i) for i, (d, _) in enumerate(sorted(s.items(), key=lambda x: -x[1]))}
            for q, s in run.items()
        }
        got = slotwise(name, qrels, run, tmp_path)
        assert differences(got, slotwise(trec_eval_order, qrels, broken, tmp_path), 0.0) == {}
        assert differences(theirs(name, qrels, run), got, 1e-9) == {}
        assert differences(got, slotwise(trec_eval_order, qrels, run, tmp_path), 1e-9) != {}


def subtopic_collection(seed: int, queries: int = 120) -> tuple[list, dict]:
    """Diversity qrels ``(qid, subtopic, doc, label)`` in file order, the queries' lines
    interleaved, and a run: 6 of the subtopics 1..8 per query, listed in another order in
    each, most documents relevant to several (so the order in which a document's gains
    add up decides ties of the greedy ideal ranking when alpha is not a power of 1/2);
    labels -1..2; no relevant subtopic in the queries ``i % 9 == 0``; the queries
    ``i % 13 == 5`` not in the run, and a few only in the run; unjudged retrieved
    documents; scores with ties."""
    rng = random.Random(seed)
    lines, run = [], {}
    docs = [f"d{i}" for i in range(14)]
    for q in range(queries):
        qid = f"q{q}"
        subtopics = rng.sample(range(1, 9), 6)
        for doc in rng.sample(docs[:12], rng.randint(4, 12)):
            for subtopic in rng.sample(subtopics, rng.randint(2, 6)):
                label = rng.choice([-1, 0, 1, 1, 1, 1, 2]) if q % 9 else 0
                lines.append((qid, str(subtopic), doc, label))
        if q % 13 != 5:
            run[qid] = {d: float(rng.randrange(4)) for d in rng.sample(docs, rng.randint(1, 14))}
        if q % 17 == 3:  # a query only in the run
            run[f"r{q}"] = {d: 1.0 for d in rng.sample(docs, 3)}
    rng.shuffle(lines)
    return lines, run


def slotwise_diversity(name: str, lines: list, run: dict, directory: Path) -> dict[str, float]:
    (directory / "qrels").write_text("".join(f"{q} {s} {d} {label}\n" for q, s, d, label in lines))
    _write_run(run, directory / "run")
    return _scores(name, read_subtopic_qrels(directory / "qrels"), directory / "run")


def _qrels(lines: list) -> list:
    return [ir_measures.Qrel(q, d, label, s) for q, s, d, label in lines]


class TestDiversity:
    @pytest.mark.parametrize("name", DIVERSITY_NAMES)
    def test_name_gives_pyndeval_number(self, name: str, tmp_path: Path) -> None:
        """Per query, equal to pyndeval through ir_measures (a call per measure)."""
        assert provider(name) == "pyndeval"
        lines, run = subtopic_collection(zlib.crc32(name.encode()) % 1000)
        got = slotwise_diversity(name, lines, run, tmp_path)
        assert differences(theirs(name, _qrels(lines), run), got, 1e-9) == {}

    @pytest.mark.parametrize("name", JUDGED_ONLY_DIVERSITY)
    def test_judged_only(self, name: str, tmp_path: Path) -> None:
        """judged_only=True: ir_measures' pyndeval provider raises; the name gives
        pyndeval's number on the run without the documents the qrels lack."""
        lines, run = subtopic_collection(zlib.crc32(name.encode()) % 1000)
        qrels = _qrels(lines)
        with pytest.raises(TypeError):
            theirs(name, qrels, run)
        judged = {(q, d) for q, _, d, _ in lines}
        kept = {q: {d: s for d, s in docs.items() if (q, d) in judged} for q, docs in run.items()}
        expected = theirs(name.replace("judged_only=True", "judged_only=False"), qrels, kept)
        got = slotwise_diversity(name, lines, run, tmp_path)
        assert differences(expected, got, 1e-9) == {}
        everything = theirs(name.replace("judged_only=True", "judged_only=False"), qrels, run)
        assert differences(everything, got, 1e-9) != {}

    def test_subtopic_order_decides_ties(self, tmp_path: Path) -> None:
        """At alpha = 0.3 the ideal ranking's ties depend on the order a document's gains
        are added: the name (pyndeval's order, subtopics by first appearance in the file)
        gives pyndeval's number where the native order (by subtopic number, the ndeval
        binary's) does not."""
        name, native = "nNRBP(alpha=0.3, beta=0.8)", "diversity-nnrbp(alpha=0.3, beta=0.8)"
        lines, run = subtopic_collection(5)
        expected = theirs(name, _qrels(lines), run)
        native_values = slotwise_diversity(
            f"{native[:-1]}, ties=doc_id_ascending, zero_without_output=True)", lines, run, tmp_path
        )
        assert differences(expected, slotwise_diversity(name, lines, run, tmp_path), 1e-9) == {}
        assert differences(expected, native_values, 1e-9) != {}
