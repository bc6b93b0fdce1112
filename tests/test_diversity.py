"""The diversity family (metrics_plugins/diversity.py): ndeval's measures over subtopics,
pinned by hand on a tiny ranking and against ir_measures' pyndeval provider on random
queries (tests/data/ndeval, see its README); subtopics from diversity qrels and from the
claims and support links ``slotwise annotate`` writes."""

from __future__ import annotations

import csv
import json
import math
import re
from math import log2
from pathlib import Path

import pytest

import engine
from engine.cli import main
from engine.io import trec

NDEVAL = Path(__file__).parent / "data" / "ndeval"

#: Subtopics a: {d1, d2}, b: {d2, d3}, c: {d4} (N = 3); the run ranks d2 d1 d5 d4 (d5
#: unjudged). With alpha = 0.5 the run's gains are g = 2 (d2: a, b new), 0.5 (d1: a seen
#: once), 0, 1 (d4: c new). ndeval's greedy ideal: d2 (gain 2); then d4 (c: 1, while d1
#: and d3 earn 0.5); then d1 and d3 tie at 0.5 and the larger doc id, d3, goes first; then
#: d1 (0.5): ideal gains 2, 1, 0.5, 0.5.
HAND = {
    "id": "q",
    "expected_output": {"groups": {"a": ["d1", "d2"], "b": ["d2", "d3"], "c": ["d4"]}},
}
RUN = {"q": ["d2", "d1", "d5", "d4"]}
L3, L5 = log2(3), log2(5)
EXPECTED = {
    # collection-independent normaliser: N (1 - alpha)^(i-1) at every rank i
    "diversity-alpha-dcg-at-k@4": (2 + 0.5 / L3 + 1 / L5) / (3 + 1.5 / L3 + 0.75 / 2 + 0.375 / L5),
    "diversity-alpha-dcg-at-k@1": 2.0,  # ndeval leaves rank 1 unnormalised
    "diversity-alpha-ndcg-at-k@4": (2 + 0.5 / L3 + 1 / L5) / (2 + 1 / L3 + 0.5 / 2 + 0.5 / L5),
    "diversity-alpha-ndcg-at-k@1": 1.0,
    "diversity-err-ia-at-k@4": (2 + 0.5 / 2 + 1 / 4) / (3 + 1.5 / 2 + 0.75 / 3 + 0.375 / 4),
    "diversity-err-ia-at-k@1": 2.0,
    "diversity-nerr-ia-at-k@4": (2 + 0.5 / 2 + 1 / 4) / (2 + 1 / 2 + 0.5 / 3 + 0.5 / 4),
    # (1 - (1 - alpha) beta) / N * sum g_i beta^(i-1), beta = 0.5
    "diversity-nrbp": (1 - 0.25) / 3 * (2 + 0.5 * 0.5 + 1 * 0.125),
    "diversity-nnrbp": (2 + 0.5 * 0.5 + 1 * 0.125) / (2 + 1 * 0.5 + 0.5 * 0.25 + 0.5 * 0.125),
    # a: d2@1, d1@2 -> (1 + 1) / 2; b: d2@1 of 2 -> 1 / 2; c: d4@4 -> (1/4) / 1
    "diversity-map-ia": (1 + 0.5 + 0.25) / 3,
    "diversity-precision-ia-at-k@2": 3 / (2 * 3),  # d2: a, b; d1: a
    "diversity-precision-ia-at-k@4": 4 / (4 * 3),
    "diversity-precision-ia-at-k@10": 4 / (10 * 3),  # ndeval divides by k, not by n
    "diversity-subtopic-recall-at-k@2": 2 / 3,
    "diversity-subtopic-recall-at-k@4": 1.0,
    "diversity-alpha-ndcg-at-k@4(alpha=1.0)": (2 + 1 / L5) / (2 + 1 / L3),  # ideal: d2 d4
}


def _scores(samples: list[dict], outputs: dict, specs: list[str]) -> dict[str, list[float]]:
    results = (
        engine.Engine(config={}).dataset(samples=samples).with_metrics(specs).evaluate(outputs)
    )
    return {label: results.values(label).tolist() for label in results.labels}


def test_hand_derived_values() -> None:
    scores = _scores([HAND], RUN, list(EXPECTED))
    for spec, value in EXPECTED.items():
        assert scores[spec][0] == pytest.approx(value, abs=1e-12), spec


def test_metadata_k_is_the_cutoff() -> None:
    """A sample's ``metadata.k`` cuts the cut measures and limits the uncut ones."""
    sample = {**HAND, "metadata": {"k": 2}}
    scores = _scores([sample], RUN, ["diversity-precision-ia-at-k", "diversity-map-ia"])
    assert scores["diversity-precision-ia-at-k"] == [pytest.approx(3 / (2 * 3))]
    assert scores["diversity-map-ia"] == [pytest.approx((1 + 0.5 + 0) / 3)]  # d4 beyond 2


def test_no_relevant_subtopic_scores_zero_and_nnrbp_na() -> None:
    """As ndeval: every measure 0 (its ideal is empty), nNRBP 0/0, NA."""
    sample = {"id": "q", "expected_output": {"groups": {"a": []}}}
    scores = _scores([sample], {"q": ["d1"]}, ["diversity-alpha-ndcg-at-k@5", "diversity-nnrbp"])
    assert scores["diversity-alpha-ndcg-at-k@5"] == [0.0]
    assert math.isnan(scores["diversity-nnrbp"][0])


def test_samples_without_subtopics_are_refused() -> None:
    with pytest.raises(engine.MetricRequirementError, match="groups"):
        _scores([{"id": "q", "expected_output": {"d1": 1}}], {"q": ["d1"]}, ["diversity-nrbp"])


def test_claims_and_support_links_are_subtopics() -> None:
    """``annotate --task claims,support`` writes each claim and the passages supporting it
    as a group: alpha-nDCG over them rewards slots that cover claims not yet covered."""
    sample = {
        "id": "q",
        "expected_output": {
            "claims": [{"id": "c1", "text": "One."}, {"id": "c2", "text": "Two."}],
            "groups": {"c1": ["p1", "p2"], "c2": ["p3"]},
        },
    }
    redundant = _scores([sample], {"q": ["p1", "p2", "p3"]}, ["diversity-alpha-ndcg-at-k@2"])
    diverse = _scores([sample], {"q": ["p1", "p3", "p2"]}, ["diversity-alpha-ndcg-at-k@2"])
    # ideal: p1 (or p2) then p3, gains 1, 1; redundant: 1, 0.5
    assert redundant["diversity-alpha-ndcg-at-k@2"][0] == pytest.approx(
        (1 + 0.5 / L3) / (1 + 1 / L3), abs=1e-12
    )
    assert diverse["diversity-alpha-ndcg-at-k@2"] == [1.0]


def _expected() -> dict[tuple[str, str], dict[str, float]]:
    table: dict[tuple[str, str], dict[str, float]] = {}
    with open(NDEVAL / "expected.tsv", encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            table.setdefault((row["measure"], row["threshold"]), {})[row["query"]] = float(
                row["value"]
            )
    return table


EXPECTED_NDEVAL = _expected()


@pytest.mark.parametrize(("name", "threshold"), sorted(EXPECTED_NDEVAL))
def test_ir_measures_names_give_pyndeval_values(name: str, threshold: str) -> None:
    """Each name, on 40 random queries (ties, unjudged and unicode doc ids, queries
    without a relevant subtopic, judged but not retrieved), equals ir_measures' pyndeval
    provider to 1e-9. ``rel=N`` is read as the qrels' threshold N (slotwise's subtopic
    judgements are binary), the measure named without it."""
    spec = re.sub(r"rel=\d+,?", "", name).replace("()", "")
    qrels = trec.read_subtopic_qrels(NDEVAL / "diversity.qrels", threshold=float(threshold))
    dataset = engine.Engine(config={}).dataset(qrels)
    results = dataset.with_metrics([spec]).evaluate(trec.read_run(NDEVAL / "diversity.run"))
    got = dict(
        zip(results.ids.to_pylist(), results.values(results.labels[0]).tolist(), strict=True)
    )
    for query, value in EXPECTED_NDEVAL[name, threshold].items():
        if math.isnan(value):
            assert math.isnan(got[query]), query
        else:
            assert got[query] == pytest.approx(value, abs=1e-9), query


#: ndeval's output columns and the slotwise aliases they are.
NDEVAL_COLUMNS = {
    "ERR-IA": "diversity-err-ia-at-k",
    "nERR-IA": "diversity-nerr-ia-at-k",
    "alpha-DCG": "diversity-alpha-dcg-at-k",
    "alpha-nDCG": "diversity-alpha-ndcg-at-k",
    "NRBP": "diversity-nrbp",
    "nNRBP": "diversity-nnrbp",
    "MAP-IA": "diversity-map-ia",
    "P-IA": "diversity-precision-ia-at-k",
    "strec": "diversity-subtopic-recall-at-k",
}


def test_default_ties_give_ndeval_traditional() -> None:
    """With their defaults (tied scores by doc id descending) the metrics give the ndeval
    binary's ``-traditional`` output, every column of every topic, to 1e-9."""
    with open(NDEVAL / "traditional.csv", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["topic"] != "amean"]
    columns = [c for c in rows[0] if c not in ("runid", "topic")]
    specs = {c: NDEVAL_COLUMNS[c.split("@")[0]] + c[len(c.split("@")[0]) :] for c in columns}
    dataset = engine.Engine(config={}).dataset(
        trec.read_subtopic_qrels(NDEVAL / "traditional.qrels")
    )
    results = dataset.with_metrics(list(specs.values())).evaluate(
        trec.read_run(NDEVAL / "traditional.run")
    )
    row_of = {query: i for i, query in enumerate(results.ids.to_pylist())}
    assert len(rows) == 37
    for row in rows:
        for column, spec in specs.items():
            got = results.values(spec)[row_of[row["topic"]]]
            want = float(row[column].replace("-nan", "nan"))
            if math.isnan(want):
                assert math.isnan(got), (row["topic"], column)
            else:
                assert got == pytest.approx(want, abs=1e-9), (row["topic"], column)


#: ndeval's columns that alpha enters.
ALPHA_COLUMNS = ("ERR-IA", "nERR-IA", "alpha-DCG", "alpha-nDCG", "NRBP", "nNRBP")


def _binary_mismatches(order: str) -> int:
    """Values of ``ordered.csv`` (the ndeval binary at alpha = 0.3) that the metrics with
    ``subtopic_order=order`` miss by more than 1e-9."""
    with open(NDEVAL / "ordered.csv", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["topic"] != "amean"]
    columns = [c for c in rows[0] if c.split("@")[0] in ALPHA_COLUMNS]
    specs = {
        c: f"{NDEVAL_COLUMNS[c.split('@')[0]]}{c[len(c.split('@')[0]) :]}"
        f"(alpha=0.3, subtopic_order={order})"
        for c in columns
    }
    dataset = engine.Engine(config={}).dataset(trec.read_subtopic_qrels(NDEVAL / "ordered.qrels"))
    results = dataset.with_metrics(list(specs.values())).evaluate(
        trec.read_run(NDEVAL / "ordered.run")
    )
    row_of = {query: i for i, query in enumerate(results.ids.to_pylist())}
    assert len(rows) == 24
    return sum(
        abs(results.values(label)[row_of[row["topic"]]] - float(row[column])) > 1e-9
        for row in rows
        for column, label in zip(specs, results.labels, strict=True)
    )


def test_subtopic_numbers_give_the_ndeval_binary_at_any_alpha() -> None:
    """At alpha = 0.3 the ideal ranking's ties depend on the order in which a document's
    subtopic gains are added: by subtopic number (the default, ``ndeval``) the metrics give
    the ndeval binary's every value; in the order the qrels list the subtopics (pyndeval's,
    the ir_measures names') some differ."""
    assert _binary_mismatches("ndeval") == 0
    assert _binary_mismatches("listed") > 0


def test_subtopic_qrels_reader(tmp_path: Path) -> None:
    path = tmp_path / "div.qrels"
    path.write_text("q1 1 d1 2\nq1 2 d1 0\nq1 2 d2 1\nq1 3 d3 0\nq2 1 d9 0\n", encoding="utf-8")
    samples = trec.read_subtopic_qrels(path).table.to_pylist()
    assert [s["id"] for s in samples] == ["q1", "q2"]
    assert [(g["group"], len(g["docs"])) for g in samples[0]["groups"]] == [("1", 1), ("2", 1)]
    assert samples[1]["groups"] == []  # no relevant subtopic: none, but judged
    path.write_text("q1 2 d1 0\nq2 3 d1 1\nq2 1 d2 1\nq2 2 d3 1\n", encoding="utf-8")
    second = trec.read_subtopic_qrels(path).table.to_pylist()[1]
    # by each subtopic's first line in the file, as pyndeval numbers them: 2 (q1), 3, 1
    assert [g["group"] for g in second["groups"]] == ["2", "3", "1"]
    labels = {entry["label"] for entry in samples[0]["relevance"]}
    assert labels == {2.0, 1.0, 0.0}  # d1: the larger of 2 and 0


def test_subtopic_qrels_reader_reports_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "div.qrels"
    path.write_text("q1 1 d1 1\nq1 1 d1 0\nq1 d2 1\nq1 2 d3 x\n", encoding="utf-8")
    with pytest.raises(engine.InputError) as caught:
        trec.read_subtopic_qrels(path)
    text = str(caught.value)
    assert "div.qrels:2" in text and "labels document 'd1' again (line 1)" in text
    assert "div.qrels:3" in text and "div.qrels:4" in text


def test_run_reads_diversity_qrels(tmp_path: Path) -> None:
    """``slotwise run --qrels FILE --subtopics``: the per-query values are pyndeval's."""
    out = tmp_path / "rows.jsonl"
    argv = ["run", "--qrels", str(NDEVAL / "diversity.qrels"), "--subtopics"]
    argv += ["--run", str(NDEVAL / "diversity.run"), "--metrics", "alpha_nDCG@20"]
    assert main([*argv, "--format", "jsonl", "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    got = {row["id"]: next(iter(row["scores"].values())) for row in rows}
    expected = EXPECTED_NDEVAL["alpha_nDCG@20", "1"]
    assert got.keys() == expected.keys()
    for query, value in expected.items():
        assert got[query] == pytest.approx(value, abs=1e-9), query


def test_subtopics_needs_qrels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--subtopics", "--run", str(NDEVAL / "diversity.run")]) != 0
    assert "--subtopics goes with --qrels" in capsys.readouterr().err


def test_chunks_give_the_same_bits() -> None:
    """A sample scores the same alone, in a chunk or in the whole dataset, bit for bit
    (the chunks' subtopic and ideal widths differ)."""
    specs = [f"{alias}@5" for alias in NDEVAL_COLUMNS.values() if "rbp" not in alias]
    specs += ["diversity-nrbp", "diversity-nnrbp(alpha=0.3, beta=0.9)"]
    specs = [s.replace("diversity-map-ia@5", "diversity-map-ia") for s in specs]
    qrels = trec.read_subtopic_qrels(NDEVAL / "diversity.qrels")
    evaluation = engine.Engine(config={}).dataset(qrels).with_metrics(specs)
    run = trec.read_run(NDEVAL / "diversity.run")
    whole, chunked = evaluation.evaluate(run), evaluation.evaluate(run, chunk_size=3)
    for label in whole.labels:
        assert whole.values(label).tobytes() == chunked.values(label).tobytes(), label


#: ir_measures names of every diversity measure (pyndeval computes each).
PYNDEVAL_NAMES = [
    "alpha_nDCG@20",
    "alpha_DCG@5",
    "ERR_IA@5",
    "nERR_IA@5",
    "NRBP",
    "nNRBP",
    "AP_IA",
    "P_IA@5",
    "StRecall@5",
]


def test_no_query_with_a_relevant_subtopic_gives_pyndevals_values(tmp_path: Path) -> None:
    """A qrels file in which no query has a relevant subtopic (every label 0 or below):
    pyndeval, run by ir_measures, gives 0 for every measure and NaN for nNRBP; so do the
    command line and Python. Before: every measure FAILED on a reshape of an empty array."""
    ir_measures = pytest.importorskip("ir_measures")
    pytest.importorskip("pyndeval")
    qrels = [("q1", "s1", "d1", 0), ("q1", "s2", "d2", 0), ("q2", "s1", "d3", -1)]
    run = [("q1", "d1", 2.0), ("q1", "d2", 1.0), ("q2", "d3", 1.0), ("q2", "d9", 1.0)]
    (tmp_path / "div.qrels").write_text("".join(f"{q} {s} {d} {r}\n" for q, s, d, r in qrels))
    (tmp_path / "div.run").write_text(
        "".join(f"{q} Q0 {d} {i} {s} r\n" for i, (q, d, s) in enumerate(run, 1))
    )
    expected = {}
    for name in PYNDEVAL_NAMES:
        found = ir_measures.pyndeval.iter_calc(
            [ir_measures.parse_measure(name)],
            [ir_measures.Qrel(q, d, r, s) for q, s, d, r in qrels],
            [ir_measures.ScoredDoc(q, d, s) for q, d, s in run],
        )
        expected[name] = {m.query_id: m.value for m in found}
    assert expected["alpha_nDCG@20"] == {"q1": 0.0, "q2": 0.0}  # what pyndeval says
    assert all(math.isnan(v) for v in expected["nNRBP"].values())
    dataset = engine.Engine(config={}).dataset(trec.read_subtopic_qrels(tmp_path / "div.qrels"))
    results = dataset.with_metrics(PYNDEVAL_NAMES).evaluate(trec.read_run(tmp_path / "div.run"))
    assert not results.failed
    out = tmp_path / "rows.jsonl"
    argv = ["run", "--qrels", str(tmp_path / "div.qrels"), "--subtopics"]
    argv += ["--run", str(tmp_path / "div.run"), "--metrics", ",".join(PYNDEVAL_NAMES)]
    assert main([*argv, "--format", "jsonl", "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for name, label in zip(PYNDEVAL_NAMES, results.labels, strict=True):
        python = dict(zip(results.ids.to_pylist(), results.values(label).tolist(), strict=True))
        cli = {row["id"]: row["scores"][label] for row in rows}
        for query, value in expected[name].items():
            if math.isnan(value):
                assert math.isnan(python[query]) and cli[query] is None, (name, query)
            else:
                assert python[query] == value == cli[query], (name, query)
