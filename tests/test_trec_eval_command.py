"""``slotwise trec-eval``: trec_eval's own test collection, every line of
``trec_eval -q -m all_trec qrels.test results.test`` (out.test.aq) exactly as printed,
and trec_eval's options, measure syntax and errors."""

from __future__ import annotations

from math import log2
from pathlib import Path

import pytest

from engine.cli import main


@pytest.fixture
def collection(reference_data: Path) -> tuple[str, str, list[str]]:
    base = reference_data / "trec_eval"
    expected = (base / "out.test.aq").read_text().splitlines()
    return str(base / "qrels.test"), str(base / "results.test"), expected


def _run(capsys, *args: str) -> list[str]:
    code = main(["trec-eval", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.splitlines()


def test_all_trec_matches_out_test_aq_line_for_line(collection, capsys):
    qrels, run, expected = collection
    assert _run(capsys, "-q", "-m", "all_trec", qrels, run) == expected


def test_default_is_the_official_summary(collection, capsys):
    """Without -m: trec_eval's official measures, the 'all' lines only."""
    qrels, run, expected = collection
    official = set(
        [
            "runid",
            "num_q",
            "num_ret",
            "num_rel",
            "num_rel_ret",
            "map",
            "gm_map",
            "Rprec",
            "bpref",
            "recip_rank",
            "iprec_at_recall",
            "P",
        ]
    )

    def measure(line: str) -> str:
        name = line.split()[0]
        return name if name in official else name.rsplit("_", 1)[0]

    wanted = [line for line in expected if "\tall\t" in line and measure(line) in official]
    assert len(wanted) == 30  # 10 single measures, 11 recall levels, 9 cutoffs
    assert _run(capsys, qrels, run) == wanted


def test_parameters_in_trec_eval_syntax(collection, capsys):
    """P.5,10 prints P_5 then P_10; iprec_at_recall..10,.50 prints the levels as %.2f;
    the values are out.test.aq's where it has them."""
    qrels, run, expected = collection
    summary = {line.split("\t")[0].strip(): line for line in expected if "\tall\t" in line}
    lines = _run(
        capsys, "-m", "P.5,10", "-m", "iprec_at_recall..10,.50", "-m", "ndcg_cut.30", qrels, run
    )
    assert lines == [
        summary["iprec_at_recall_0.10"],
        summary["iprec_at_recall_0.50"],
        summary["P_5"],
        summary["P_10"],
        summary["ndcg_cut_30"],
    ]


def test_no_summary_and_per_query(collection, capsys):
    qrels, run, expected = collection
    lines = _run(capsys, "-q", "-n", "-m", "map", qrels, run)
    assert lines == [line for line in expected if line.startswith("map ")][:3]


def test_max_docs_cuts_each_ranking(collection, capsys):
    """-M 10: every query retrieves 10 documents, and P_10 is unchanged while P_20
    becomes the top 10's relevant count over 20 = P_10 / 2."""
    qrels, run, expected = collection
    lines = _run(capsys, "-M", "10", "-m", "num_ret", "-m", "P.10,20", qrels, run)
    p10 = float(
        next(line for line in expected if line.startswith("P_10 ") and "\tall\t" in line).split()[
            -1
        ]
    )
    assert lines[0].split("\t") == ["num_ret".ljust(22), "all", "30"]
    assert float(lines[2].split("\t")[-1]) == pytest.approx(p10 / 2, abs=5e-5)


def test_query_set_and_complete(tmp_path, capsys):
    """Without -c trec_eval 10 stops (status 4) at a qrels query the run lacks (q3), having
    printed the queries before it with -q; q9 (no judgements) is ignored. With -c every
    judged query, q3 scoring as an empty ranking: map (1 + 1/2 + 0) / 3."""
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 a 1\nq2 0 b 1\nq3 0 c 1\n")
    run = tmp_path / "run"
    run.write_text("q1 Q0 a 1 2 r\nq2 Q0 x 1 2 r\nq2 Q0 b 2 1 r\nq9 Q0 a 1 1 r\n")
    assert main(["trec-eval", "-q", "-m", "map", str(qrels), str(run)]) == 4
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "map                   \tq1\t1.0000",
        "map                   \tq2\t0.5000",
    ]
    assert "result qid 'q3' not found" in captured.err
    assert _run(capsys, "-c", "-m", "num_q", "-m", "map", str(qrels), str(run)) == [
        "num_q                 \tall\t3",
        "map                   \tall\t0.5000",
    ]


def test_relevance_level_and_judged_only(tmp_path, capsys):
    """-l 2: only label 2 is relevant (P_2 = 1/2); -J drops the unjudged 'u', moving the
    relevant 'b' up to rank 1 (recip_rank 1 instead of 1/2)."""
    qrels = tmp_path / "qrels"
    qrels.write_text("q 0 a 1\nq 0 b 2\n")
    run = tmp_path / "run"
    run.write_text("q Q0 a 1 3 r\nq Q0 b 2 2 r\n")
    assert _run(capsys, "-l", "2", "-m", "P.2", str(qrels), str(run)) == [
        "P_2                   \tall\t0.5000"
    ]
    run.write_text("q Q0 u 1 3 r\nq Q0 b 2 2 r\n")
    assert _run(capsys, "-l", "2", "-m", "recip_rank", str(qrels), str(run))[0].endswith("0.5000")
    assert _run(capsys, "-J", "-l", "2", "-m", "recip_rank", str(qrels), str(run))[0].endswith(
        "1.0000"
    )


def test_ndcg_gain_map(tmp_path, capsys):
    """ndcg.1=3,2=9,4=4.5 (trec_eval 10's example): levels 1, 2, 4 gain 3, 9, 4.5 and 3
    keeps gain 3; a level that is not an integer is ignored. Ranking d1 (1), d3 (0), d2
    (2), d5 (unjudged): DCG = 3 + 9 / log2 4; the ideal ranks the judged gains 9, 4.5, 3,
    0: IDCG = 9 + 4.5 / log2 3 + 3 / log2 4. Without the map the gains are the labels."""
    qrels = tmp_path / "qrels"
    qrels.write_text("q 0 d1 1\nq 0 d2 2\nq 0 d3 0\nq 0 d4 4\n")
    run = tmp_path / "run"
    run.write_text("q Q0 d1 1 4 r\nq Q0 d3 2 3 r\nq Q0 d2 3 2 r\nq Q0 d5 4 1 r\n")
    mapped = (3 + 9 / log2(4)) / (9 + 4.5 / log2(3) + 3 / log2(4))
    plain = (1 + 2 / log2(4)) / (4 + 2 / log2(3) + 1 / log2(4))
    for measure, expected in [("ndcg.1=3,2=9,4=4.5,x=7", mapped), ("ndcg", plain)]:
        [line] = _run(capsys, "-m", measure, str(qrels), str(run))
        name = "ndcg" if measure == "ndcg" else measure.replace(".", "_", 1)
        assert line == f"{name:<22}\tall\t{expected:6.4f}"


def test_gain_levels_in_trec_evals_order_by_hand(tmp_path, capsys):
    """trec_eval 10 sorts its gain levels with glibc's merge sort and a comparator that
    truncates the difference of two gains to an integer. ndcg.1=0.5 with levels 0..4
    lists (1, 0.5), then 0, 2, 3, 4 with their own gains: the halves (1, 0.5), (0, 0) and
    (2, 2), (3, 3), (4, 4) merge with (int)(0.5 - 0) = 0, so level 1 stays before level 0,
    and the ideal walks 4, 3, 2, 0: level 0 has a document and gain 0, so it stops there,
    without level 1's document. qrels d4: 4, d3: 3, d2: 2, d1: 1, d0: 0; ranking d1, d4:
    DCG = 0.5 + 4 / log2 3, IDCG = 4 + 3 / log2 3 + 2 / log2 4 (not + 0.5 / log2 5)."""
    qrels = tmp_path / "qrels"
    qrels.write_text("".join(f"q 0 d{level} {level}\n" for level in range(5)))
    run = tmp_path / "run"
    run.write_text("q Q0 d1 1 2 t\nq Q0 d4 2 1 t\n")
    expected = (0.5 + 4 / log2(3)) / (4 + 3 / log2(3) + 2 / log2(4))
    [line] = _run(capsys, "-m", "ndcg.1=0.5", str(qrels), str(run))
    assert line == f"{'ndcg_1=0.5':<22}\tall\t{expected:6.4f}"
    [line] = _run(capsys, "-m", "ideal_dcg.1=0.5", str(qrels), str(run))
    assert line.endswith(f"\t{4 + 3 / log2(3) + 2 / log2(4):6.4f}")


def test_gains_2_to_the_31_apart_by_hand(tmp_path, capsys):
    """ndcg.1=3e9 with levels 0..2 lists (1, 3e9), (0, 0), (2, 2). Merging (1, 3e9) with
    (0, 0), (2, 2), the comparison's (int)(3e9 - 0) overflows, to INT_MIN on x86-64, so
    level 1 sorts first and the ideal walks 2, 0: it stops at level 0's document, and
    IDCG = 2. Ranking d1: DCG = 3e9, nDCG = 1.5e9 (trec_eval 10 prints the same)."""
    qrels = tmp_path / "qrels"
    qrels.write_text("q 0 d0 0\nq 0 d1 1\nq 0 d2 2\n")
    run = tmp_path / "run"
    run.write_text("q Q0 d1 1 1 t\n")
    [line] = _run(capsys, "-m", "ndcg.1=3e9", str(qrels), str(run))
    assert line == f"{'ndcg_1=3e9':<22}\tall\t1500000000.0000"


def test_gains_of_levels_below_0_by_hand(tmp_path, capsys):
    """trec_eval 10's level -1 is a retrieved document the qrels lack, -2 one judged
    below 0. qrels d1: 1, n: -1; ranking u, n, d1 (levels -1, -2, 1). ndcg.-1=2,-2=3:
    DCG = 2 + 3 / log2 3 + 1 / log2 4; levels -1 and -2 have no judged document, so the
    ideal ranking is d1's gain alone: IDCG = 1, and nDCG passes 1. dcg.-1=2: 2 + 1 / 2."""
    qrels = tmp_path / "qrels"
    qrels.write_text("q 0 d1 1\nq 0 n -1\n")
    run = tmp_path / "run"
    run.write_text("q Q0 u 1 3 t\nq Q0 n 2 2 t\nq Q0 d1 3 1 t\n")
    [line] = _run(capsys, "-m", "ndcg.-1=2,-2=3", str(qrels), str(run))
    assert line == f"{'ndcg_-1=2,-2=3':<22}\tall\t{2 + 3 / log2(3) + 1 / log2(4):6.4f}"
    [line] = _run(capsys, "-m", "dcg.-1=2", str(qrels), str(run))
    assert line == f"{'dcg_-1=2':<22}\tall\t{2 + 1 / log2(4):6.4f}"


def test_the_metrics_ideal_as_trec_eval(tmp_path):
    """The same ranking through the metric: ``levels=trec_eval10`` walks trec_eval's
    levels (above), the default ranks every positive gain, 0.5 included:
    IDCG = 4 + 3 / log2 3 + 2 / log2 4 + 0.5 / log2 5. Another gain than linear is refused."""
    import engine

    eng = engine.Engine(config={})
    qrels = {"q": {f"d{level}": level for level in range(5)}}
    dcg = 0.5 + 4 / log2(3)
    base = 4 + 3 / log2(3) + 2 / log2(4)
    for levels, idcg in [("trec_eval10", base), ("labels", base + 0.5 / log2(5))]:
        spec = f"retrieval-ndcg-at-k(gains={{1: 0.5}}, levels={levels})"
        results = eng.evaluate_trec(qrels, {"q": {"d1": 2.0, "d4": 1.0}}, [spec])
        assert results.scores[next(iter(results.scores))].tolist() == pytest.approx([dcg / idcg])
    with pytest.raises(ValueError, match="gain=linear"):
        eng.metric("retrieval-ndcg-at-k(gain=exponential, levels=trec_eval10)")


@pytest.mark.parametrize(
    ("measure", "message"),
    [
        ("map.5", "takes no parameters"),
        ("map.1=3", "takes no parameters"),
        ("P.x", "not a number"),
        ("ndcg.1=x", "not a number"),
        ("ndcg.2", "not a level=gain pair"),
    ],
)
def test_bad_measures_exit_2(collection, capsys, measure, message):
    qrels, run, _ = collection
    assert main(["trec-eval", "-m", measure, qrels, run]) == 2
    assert message in capsys.readouterr().err


def test_unknown_measure_exits_1(collection, capsys):
    """As trec_eval: an illegal measure is status 1, with the closest names."""
    qrels, run, _ = collection
    assert main(["trec-eval", "-m", "ndgc_cut.10", qrels, run]) == 1
    assert "did you mean ndcg_cut" in capsys.readouterr().err


def test_compressed_run_reads_the_same(collection, capsys, tmp_path):
    """A gzipped run: the same lines, its runid read from the last line as it streams."""
    import gzip

    qrels, run, expected = collection
    packed = tmp_path / "results.test.gz"
    packed.write_bytes(gzip.compress(Path(run).read_bytes()))
    assert _run(capsys, "-q", "-m", "all_trec", qrels, str(packed)) == expected


def test_all_line_adds_as_trec_eval(tmp_path, capsys):
    """Reciprocal ranks 1/3, 1/4, 1/6, 1/8: the exact mean 0.21875 rounds to 0.2188, but
    trec_eval adds the doubles one by one (1/3 + 1/4 + 1/6 + 1/8 = 0.8749999999999999)
    and prints 0.2187; slotwise trec-eval too, while the API keeps the exact mean."""
    assert 1 / 3 + 1 / 4 + 1 / 6 + 1 / 8 < 0.875
    qrels = tmp_path / "qrels"
    qrels.write_text("".join(f"q{i} 0 r 1\n" for i in range(4)))
    run = tmp_path / "run"
    lines = []
    for i, rank in enumerate((3, 4, 6, 8)):
        lines += [f"q{i} Q0 {'r' if j == rank else f'n{j}'} {j} {10 - j} t\n" for j in range(1, 9)]
    run.write_text("".join(lines))
    assert _run(capsys, "-m", "recip_rank", str(qrels), str(run)) == [
        "recip_rank            \tall\t0.2187"
    ]


def test_gain_maps_of_g_and_ndcg_rel_by_hand(tmp_path, capsys):
    """qrels d1: 1, d2: 0, d3: 2; ranking d1, d2. With G.1=3 the gains are d1 3, d3 2:
    G = 3 / log2(2 + 3 - 3) / (3 + 2) = 0.6; without, the labels: 1 / log2(2 + 2 - 1) / 3.
    ndcg_rel.1=3: (DCG@1 / IDCG@1 for d1, DCG / IDCG for the missed d3) / 2 =
    (1 + 3 / (3 + 2 / log2 3)) / 2; without: (1/2 + 1 / (2 + 1 / log2 3)) / 2."""
    qrels = tmp_path / "qrels"
    qrels.write_text("q 0 d1 1\nq 0 d2 0\nq 0 d3 2\n")
    run = tmp_path / "run"
    run.write_text("q Q0 d1 1 2 t\nq Q0 d2 2 1 t\n")
    expected = {
        "G.1=3": 0.6,
        "G": 1 / log2(3) / 3,
        "ndcg_rel.1=3": (1 + 3 / (3 + 2 / log2(3))) / 2,
        "ndcg_rel": (1 / 2 + 1 / (2 + 1 / log2(3))) / 2,
    }
    for measure, value in expected.items():
        name = measure.replace(".", "_", 1)
        [line] = _run(capsys, "-m", measure, str(qrels), str(run))
        assert line == f"{name:<22}\tall\t{value:6.4f}"


def test_g_past_its_ideal_cost_is_c_s_nan(tmp_path, capsys):
    """qrels d1: 1, d2: -1 (judged below 0, level -2); ranking d2, d1 with G.-2=4: d2's
    discount is log2(2 + 1 - 4) = log2(-1), which C's log2 makes a NaN with its sign bit
    set; trec_eval prints it -nan. numpy's log2 gives +nan or -nan by the CPU's vector
    code, so the sign is written by G itself."""
    qrels = tmp_path / "qrels"
    qrels.write_text("q 0 d1 1\nq 0 d2 -1\n")
    run = tmp_path / "run"
    run.write_text("q Q0 d2 1 2 t\nq Q0 d1 2 1 t\n")
    assert _run(capsys, "-q", "-m", "G.-2=4", str(qrels), str(run)) == [
        "G_-2=4                \tq\t  -nan",
        "G_-2=4                \tall\t  -nan",
    ]
