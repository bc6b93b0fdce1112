"""ranx's metric names (``ndcg@10``, ``map``, ``precision@5-l2``, ``rbp.95``) give ranx's
numbers: each name is computed by ranx itself and by slotwise from the same qrels and run,
per query, to 1e-12, on seeded random collections shaped like a user's (sparse graded
labels 0-4, many documents judged 0, queries with no relevant document, qrels queries the
run lacks (an empty ranking, ranx's ``make_comparable``), run queries without judgements,
unjudged retrieved documents, rankings of 0 to 60 documents).

Tied scores: ranx orders them as numba's quicksort leaves them (neither the run's order nor
by doc id; tests/test_ir_measures_providers.py shows one), slotwise as trec_eval
does. So on distinct scores the values are equal; on tied scores each equals the value of
the other tool on the run written in that tool's order, and the two differ where the
orders do (docs/metrics.md, "Dialects")."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

import engine
from engine.evaluation.metric import parse_spec
from engine.evaluation.ranx_names import NAMES, translate
from engine.io.trec import read_qrels, read_run

ranx = pytest.importorskip("ranx")

#: Every ranx metric, uncut, cut (k = 0 is ranx's whole ranking), at relevance levels;
#: bpref, whose differences are documented, in TestBpref.
RANX = [
    *(n for n in NAMES if n not in ("rbp", "bpref")),
    *(f"{n}@{k}" for n in NAMES if NAMES[n].cut for k in (1, 3, 10)),
    *(f"{n}@0" for n in ("ndcg", "map", "hits")),
    *(f"{n}-l2" for n in NAMES if n not in ("rbp", "bpref")),
    *(f"{n}@5-l{level}" for n in NAMES if NAMES[n].cut for level in (0, 3)),
    "rbp.95",
    "rbp.5",
    "rbp.8-l2",
    "rbp@9",
]

ID_STYLES = ("MARCO_{}", "doc-{:05d}", "clueweb12-0000tw-{:02d}", "{}")


def collection(seed: int, *, ties: bool, queries: int = 80) -> tuple[dict, dict]:
    """Qrels and a run as dicts (file order); ``ties``: scores of one decimal in a narrow
    range (many ties), else distinct scores."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        qid = f"q{q:03d}"
        style = rng.choice(ID_STYLES)
        pool = [style.format(j) for j in rng.sample(range(200), rng.randint(1, 60))]
        judged = rng.sample(pool, rng.randint(1, min(len(pool), 12)))
        labels = [0, 0, 0, 0, 1, 1, 2, 3, 4]
        qrels[qid] = {d: rng.choice(labels if q % 6 else [0]) for d in judged}  # q % 6 == 0: none
        if q % 9 == 4:
            continue  # a query of the qrels with no ranking
        ranked = rng.sample(pool, rng.randint(0, len(pool)))
        ranked += [f"unjudged-{j}" for j in range(rng.randint(0, 5))]
        scores = rng.sample(range(10**6), len(ranked))
        run[qid] = {
            d: (round(rng.uniform(0, 1.5), 1) if ties else s / 1000)
            for d, s in zip(ranked, scores, strict=True)
        }
    run["not-judged"] = {"d1": 1.0, "d2": 0.5}  # ignored by both (ranx: make_comparable)
    return qrels, run


def write(qrels: dict, run: dict, directory: Path) -> tuple[Path, Path]:
    q, r = directory / "qrels", directory / "run"
    q.write_text("".join(f"{i} 0 {d} {v}\n" for i, ls in qrels.items() for d, v in ls.items()))
    r.write_text("".join(f"{i} Q0 {d} 0 {s!r} t\n" for i, ss in run.items() for d, s in ss.items()))
    return q, r


def slotwise(names: list[str], qrels: dict, run: dict, directory: Path) -> dict:
    """Per-query values (and the means) of each name, from the qrels and run as TREC files."""
    directory.mkdir(exist_ok=True)
    q, r = write(qrels, run, directory)
    samples = read_qrels(q)
    specs = {name: translate(name) or name for name in names}  # ndcg, ndcg@0: one metric
    unique = list(dict.fromkeys(specs.values()))
    evaluated = engine.Engine(config={}).dataset(samples=samples).with_metrics(unique)
    results = evaluated.evaluate(read_run(r))
    ids = samples.ids.to_pylist()
    label = dict(zip(unique, results.labels, strict=True))
    return {
        name: dict(zip(ids, results.values(label[specs[name]]).tolist(), strict=True))
        for name in names
    }


def ranx_run(qrels: dict, run: dict) -> tuple[object, object]:
    """ranx's Qrels and Run, the run made comparable (ranx sorts it again then)."""
    ranx_qrels = ranx.Qrels(qrels)
    ranked = {q: ds for q, ds in run.items() if ds}
    return ranx_qrels, (ranx.Run(ranked) if ranked else ranx.Run()).make_comparable(ranx_qrels)


def theirs(names: list[str], qrels: dict, run: dict) -> dict:
    """ranx's per-query values of each name (queries as ranx's make_comparable makes them)."""
    ranx_qrels, ranked = ranx_run(qrels, run)
    ranx.evaluate(ranx_qrels, ranked, names)
    return {name: dict(ranked.scores[name]) for name in names}


def ranx_order(qrels: dict, run: dict) -> dict:
    """The run with ranx's ranking of each query as distinct descending scores."""
    ranked = ranx_run(qrels, run)[1].run
    return {q: {d: float(-i) for i, d in enumerate(ranked[q])} for q in ranked}


def trec_eval_order(run: dict) -> dict:
    """The run ranked as trec_eval ranks it (score descending, doc id descending), as
    distinct descending scores."""
    out = {}
    for q, scores in run.items():
        order = sorted(scores, key=lambda d: (scores[d], d.encode()), reverse=True)
        out[q] = {d: float(-i) for i, d in enumerate(order)}
    return out


def wrong(expected: dict, got: dict, tolerance: float = 1e-12) -> dict:
    return {
        (name, q): (got[name][q], expected[name][q])
        for name in got
        for q in got[name]
        if not math.isclose(got[name][q], expected[name][q], rel_tol=0, abs_tol=tolerance)
    }


class TestTranslate:
    @pytest.mark.parametrize(
        ("name", "spec"),
        [
            ("ndcg@10", "retrieval-ndcg-at-k@10"),
            ("ndcg", "retrieval-ndcg-at-k@1000000000"),
            ("ndcg@0", "retrieval-ndcg-at-k@1000000000"),
            ("ndcg_burges@5", "retrieval-ndcg-at-k@5(gain=exponential)"),
            ("ndcg@5-l3", "retrieval-ndcg-at-k@5(gains={1: 0, 2: 0})"),
            ("map@100", "retrieval-map@100"),
            ("mrr", "retrieval-mrr"),
            ("precision@5-l2", "retrieval-precision-at-k@5(relevance_threshold=2)"),
            ("precision", "retrieval-set-precision"),
            ("recall", "retrieval-set-recall"),
            ("f1", "retrieval-set-f"),
            ("f1@5", "retrieval-f1-at-k@5"),
            ("hits", "retrieval-num-rel-ret"),
            ("hits@3", "retrieval-hits-at-k@3"),
            ("hit_rate@5", "retrieval-hit-at-k@5"),
            ("r-precision", "retrieval-r-precision"),
            ("bpref-l2", "retrieval-bpref(relevance_threshold=2)"),
            ("rbp.95", "retrieval-rbp-label-gain(p=0.95)"),
            ("rbp@8-l2", "retrieval-rbp-label-gain(p=0.8, relevance_threshold=2)"),
        ],
    )
    def test_spec(self, name: str, spec: str) -> None:
        assert translate(name) == spec
        assert parse_spec(name) == parse_spec(spec)

    @pytest.mark.parametrize(
        ("name", "reason"),
        [
            ("r-precision@5", "ranx ignores the cutoff of r-precision"),
            ("bpref@10", "ranx ignores the cutoff of bpref"),
            ("ndcg.10", "ranx writes a cutoff as ndcg@K"),
            ("map@x", "ranx writes a cutoff as map@K"),
            ("ndcg@-1", "ranx writes a cutoff as ndcg@K"),
            ("dcg-l-1", "negative gains"),
        ],
    )
    def test_refused(self, name: str, reason: str) -> None:
        with pytest.raises(engine.MetricParameterError, match=reason):
            translate(name)

    def test_ranx_refuses_what_slotwise_refuses(self) -> None:
        """ranx cannot read the refused spellings either (or, for a cutoff, ignores it:
        r-precision@5 is r-precision)."""
        qrels = ranx.Qrels({"q": {"d1": 1, "d2": 0}})
        run = ranx.Run({"q": {"d2": 2.0, "d1": 1.0, "d3": 0.5}})
        for name in ("ndcg.10", "map@x", "rbp"):
            with pytest.raises((ValueError, AssertionError)):
                ranx.evaluate(qrels, run, name)
        assert ranx.evaluate(qrels, run, "r-precision@1") == ranx.evaluate(
            qrels, run, "r-precision"
        )

    def test_other_names_are_not_ranx(self) -> None:
        assert translate("NDCG@10") is None  # ranx is case-sensitive: ir_measures' name
        assert translate("retrieval-map") is None


@pytest.mark.slow  # ranx compiles its metrics with numba on first use
class TestAgainstRanx:
    @pytest.mark.parametrize("seed", [1, 2])
    def test_every_name_gives_ranx_number(self, seed: int, tmp_path: Path) -> None:
        """Distinct scores: per query and in the mean, slotwise's value is ranx's."""
        qrels, run = collection(seed, ties=False)
        expected = theirs(RANX, qrels, run)
        got = slotwise(RANX, qrels, run, tmp_path)
        assert {q for values in got.values() for q in values} == set(qrels)
        assert wrong(expected, got) == {}
        for name in RANX:
            mean = sum(expected[name].values()) / len(expected[name])
            assert math.isclose(sum(got[name].values()) / len(qrels), mean, abs_tol=1e-12)
        nonzero = [n for n in RANX if any(v != 0 for v in got[n].values())]
        assert nonzero == RANX  # no name passes on zeros alone

    def test_queries_without_relevant_documents_score_zero_in_both(self, tmp_path: Path) -> None:
        """ranx scores a query without a relevant document (or without a ranking) 0 under
        every name; so does slotwise, where it counts them in the mean."""
        qrels, run = collection(3, ties=False)
        got = slotwise(RANX, qrels, run, tmp_path)
        expected = theirs(RANX, qrels, run)
        empty = [q for q, labels in qrels.items() if max(labels.values()) < 1]
        names = [n for n in RANX if not n.endswith("-l0")]  # -l0: a label of 0 is relevant
        assert empty and all(got[n][q] == expected[n][q] == 0 for n in names for q in empty)

    def test_tied_scores_differ_only_in_order(self, tmp_path: Path) -> None:
        """Tied scores: ranx's value is slotwise's on the run ranked in ranx's order;
        slotwise's is ranx's on the run ranked in trec_eval's order; and the two differ
        where the orders do."""
        qrels, run = collection(4, ties=True)
        ranx_values = theirs(RANX, qrels, run)
        slotwise_values = slotwise(RANX, qrels, run, tmp_path / "tied")
        assert (
            wrong(ranx_values, slotwise(RANX, qrels, ranx_order(qrels, run), tmp_path / "ranx"))
            == {}
        )
        assert wrong(theirs(RANX, qrels, trec_eval_order(run)), slotwise_values) == {}
        differ = {q for (_, q) in wrong(ranx_values, slotwise_values)}
        ranked_otherwise = {
            q
            for q, scores in ranx_order(qrels, run).items()
            if list(scores) != list(trec_eval_order(run).get(q, {}))
        }
        assert differ and differ <= ranked_otherwise


@pytest.mark.slow  # ranx compiles its metrics with numba on first use
class TestBpref:
    """ranx 0.3's bpref differs in two documented ways: a query without a judged
    non-relevant document is NaN in ranx (its 0 / 0), trec_eval's num_rel_ret / R in
    slotwise; and in one call over many queries, a query without a relevant document
    (a division by zero in ranx's loop) leaves 0 for queries ranx computes after it."""

    NAMES = ("bpref", "bpref-l2")

    @pytest.mark.parametrize("seed", [1, 2])
    def test_one_query_at_a_time(self, seed: int, tmp_path: Path) -> None:
        qrels, run = collection(seed, ties=False)
        names = [*self.NAMES, "hits-l2", "hits", "bpref@0"]
        got = slotwise(
            [*names, "retrieval-num-rel", "retrieval-num-rel(relevance_threshold=2)"],
            qrels,
            run,
            tmp_path,
        )
        nan = 0
        for name, level in zip(self.NAMES, (1, 2), strict=True):
            for q, labels in qrels.items():
                alone = theirs([name], {q: labels}, {q: run.get(q, {})})[name][q]
                if not math.isnan(alone):
                    assert math.isclose(alone, got[name][q], abs_tol=1e-12), (name, q)
                    continue
                nan += 1
                assert not any(0 <= label < level for label in labels.values())
                rel_ret = got["hits" if level == 1 else "hits-l2"][q]
                num_rel = got[
                    "retrieval-num-rel"
                    if level == 1
                    else "retrieval-num-rel(relevance_threshold=2)"
                ][q]
                assert got[name][q] == rel_ret / num_rel  # trec_eval's, with no non-relevant
        assert nan > 0

    def test_many_queries_in_one_call(self, tmp_path: Path) -> None:
        qrels, run = collection(1, ties=False)
        expected = theirs(list(self.NAMES), qrels, run)
        got = slotwise(list(self.NAMES), qrels, run, tmp_path)
        differ = wrong(expected, got)
        assert differ
        assert all(theirs_ == 0 or math.isnan(theirs_) for (_, theirs_) in differ.values())
        assert any(max(labels.values()) < 1 for labels in qrels.values())
