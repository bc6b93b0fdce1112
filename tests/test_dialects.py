"""trec_eval's measure names (``ndcg_cut_10``, ``P_5``, ``recip_rank``) wherever a spec is
accepted give trec_eval's numbers: per query against the trec_eval 10 binary's ``-q -c``
lines on random collections (tests/test_trec_eval_binary.py's: graded and negative labels,
queries with nothing relevant, tied scores, unjudged documents), and the same metrics as
``slotwise trec-eval -m``. Also: the dialect prefixes and the rule for names two dialects
share, ``slotwise metrics --dialect``, and every ``slotwise metrics`` table at 80 and 120
columns."""

from __future__ import annotations

import io
import json
import math
import re
import sys
from pathlib import Path

import pytest
from test_trec_eval_binary import run_binary, write_collection

import engine
from engine.analysis.trec_eval import measure_lines, parse_measures
from engine.analysis.trec_eval_measures import MEASURE_SETS, MEASURES
from engine.cli import main
from engine.evaluation import metric_names, trec_names
from engine.evaluation.metric import parse_spec
from engine.io.trec import read_qrels, read_run


def _metric(spec: str) -> object:
    return engine.Engine(config={}).metric(spec)


class TestTrecNames:
    @pytest.mark.parametrize(
        ("name", "spec"),
        [
            ("ndcg_cut_10", "retrieval-ndcg-at-k@10"),
            ("ndcg_cut.10", "retrieval-ndcg-at-k@10"),
            ("P_5", "retrieval-precision-at-k@5"),
            ("map_cut_100", "retrieval-map@100"),
            ("recall_1000", "retrieval-recall-at-k@1000"),
            ("recip_rank", "retrieval-mrr"),
            ("Rprec", "retrieval-r-precision"),
            ("success_1", "retrieval-hit-at-k@1"),
            ("iprec_at_recall_0.10", "retrieval-iprec-at-recall(recall=0.1, rounding=trec_eval10)"),
            ("ndcg", "retrieval-ndcg-at-k@1000000000"),
        ],
    )
    def test_spec(self, name: str, spec: str) -> None:
        assert trec_names.translate(name) == spec
        assert parse_spec(name) == parse_spec(spec)

    def test_every_measure_is_the_trec_eval_commands(self) -> None:
        """Each printed name of -m all_trec (and dcg, yaap) that is a per-query mean is
        the metric ``slotwise trec-eval`` scores for it; every other is refused."""
        requests = parse_measures(["all_trec", "dcg", "yaap", "P.3,7", "ndcg_cut.4"])
        seen = set()
        for line in measure_lines(requests, 1.0):
            seen.add(line.key)
            if line.key in trec_names.REFUSED or line.spec is None:
                with pytest.raises(engine.MetricParameterError):
                    trec_names.translate(line.name)
                continue
            assert _metric(trec_names.translate(line.name) or "") == _metric(line.spec), line.name
        assert seen == set(MEASURE_SETS["all_trec"]) | {"dcg", "yaap"}

    @pytest.mark.parametrize("name", ["prefs_simp", "P_avgjg_5", "num_ret", "gm_map"])
    def test_refused(self, name: str) -> None:
        with pytest.raises(engine.MetricParameterError, match=r"trec-eval|sums"):
            trec_names.translate(name)

    @pytest.mark.slow  # builds trec_eval and runs it on random collections
    @pytest.mark.parametrize("seed", [11, 12])
    def test_per_query_against_the_binary(
        self, seed: int, trec_eval_binary: Path, tmp_path: Path
    ) -> None:
        """Every per-query line of ``trec_eval -q -c -m all_trec`` under a name slotwise
        translates is the slotwise value to the binary's four decimals, and its ``all``
        line the mean over the qrels' queries."""
        files = write_collection(tmp_path, seed, 40, complete=False)
        code, out = run_binary(
            trec_eval_binary, ["-q", "-c", "-m", "all_trec", "qrels", "run"], tmp_path
        )
        assert code == 0
        lines = [line.split("\t") for line in out.decode().splitlines()]
        printed: dict[str, dict[str, str]] = {}
        for name, query, value in ((n.strip(), q, v) for n, q, v in lines):
            printed.setdefault(name, {})[query] = value
        names = [n for n in printed if _translates(n)]
        assert len(names) >= 40
        samples = read_qrels(files.qrels)
        specs = {n: trec_names.translate(n) for n in names}
        unique = list(dict.fromkeys(specs.values()))
        results = (
            engine.Engine(config={})
            .dataset(samples=samples)
            .with_metrics(unique)
            .evaluate(read_run(files.run))
        )
        ids = samples.ids.to_pylist()
        label = dict(zip(unique, results.labels, strict=True))
        wrong = []
        for name in names:
            values = dict(zip(ids, results.values(label[specs[name]]).tolist(), strict=True))
            for query, text in printed[name].items():
                got = sum(values.values()) / len(values) if query == "all" else values[query]
                if f"{got:.4f}" != text and not _half_unit(got, text):
                    wrong.append((name, query, got, text))
        assert wrong == []


def _translates(name: str) -> bool:
    try:
        return trec_names.translate(name) is not None
    except engine.MetricParameterError:
        return False


def _half_unit(got: float, text: str) -> bool:
    """A value on a rounding edge (…5 in the fifth decimal) prints either way."""
    return math.isclose(got, float(text), abs_tol=0.00005 + 1e-12)


class TestDialects:
    def test_prefixes_pick_the_dialect(self) -> None:
        assert metric_names.translate("ranx:ndcg@10") == "retrieval-ndcg-at-k@10"
        assert metric_names.translate("trec:ndcg_cut_10") == "retrieval-ndcg-at-k@10"
        assert metric_names.translate("trec_eval:P_5") == "retrieval-precision-at-k@5"
        assert metric_names.translate("ir_measures:nDCG@10") == "retrieval-ndcg-at-k@10"

    @pytest.mark.parametrize(
        ("name", "message"),
        [
            ("ranx:nDCG@10", "no ranx name 'nDCG@10'"),
            ("trec:ndcg@10", "no trec_eval name 'ndcg@10'"),
            ("ir_measures:ndcg@10", "no ir_measures name 'ndcg@10'"),
            ("ranx:rbp", "persistence"),
        ],
    )
    def test_a_name_outside_its_prefix_is_an_error(self, name: str, message: str) -> None:
        with pytest.raises(engine.MetricParameterError, match=re.escape(message)):
            metric_names.translate(name)

    def test_shared_names_give_one_spec(self) -> None:
        """map, ndcg, dcg, bpref (and Rprec): the same spec in every dialect that has them,
        so the reading order changes no number."""
        for name in ("map", "ndcg", "dcg", "bpref"):
            assert metric_names.translate(f"ranx:{name}") == metric_names.translate(
                f"trec:{name}"
            ), name
            assert metric_names.translate(name) == metric_names.translate(f"ranx:{name}")
        assert metric_names.translate("Rprec") == metric_names.translate("trec:Rprec")
        assert metric_names.translate("Rprec") == metric_names.translate("ranx:r-precision")
        assert metric_names.translate("map@10") == metric_names.translate("trec:map_cut_10")
        assert metric_names.translate("map@10") == metric_names.translate("AP@10")
        assert metric_names.translate("P@5") == metric_names.translate("P_5")

    def test_the_documented_rule_for_names_that_differ(self) -> None:
        """recall alone is ranx's set recall (trec_eval's -m recall is nine cutoffs);
        rbp alone is trec_eval's (p = 0.9, graded gain)."""
        assert metric_names.translate("recall") == "retrieval-set-recall"
        assert metric_names.translate("rbp") == "retrieval-rbp"
        assert metric_names.translate("ranx:rbp.9") == "retrieval-rbp-label-gain(p=0.9)"
        assert "recall alone is ranx's" in metric_names.RULE

    def test_slotwise_specs_pass_through(self) -> None:
        for spec in ("retrieval-map", "udcg(gamma=0)", "retrieval-ndcg-at-k@10"):
            assert metric_names.translate(spec) is None


class TestRun:
    def test_run_takes_every_dialect(self, tmp_path: Path, capsys) -> None:
        """`slotwise run --metrics` with a trec_eval, a ranx, an ir_measures and a prefixed
        name of nDCG@10: each gives the hand-derived value."""
        (tmp_path / "qrels").write_text("q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 1\n")
        (tmp_path / "run").write_text("q1 Q0 d2 1 2.0 t\nq1 Q0 d1 2 1.0 t\nq2 Q0 d9 1 1.0 t\n")
        args = ["run", "--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "run")]
        # q1: d1 (label 2) at rank 2, 2 / log2(3), over the ideal 2; q2: 0
        expected = (2 / math.log2(3) / 2) / 2
        for name in ("ndcg_cut_10", "ndcg@10", "nDCG@10", "ranx:ndcg@10", "trec:ndcg_cut.10"):
            assert main([*args, "--metrics", name, "--format", "json"]) == 0
            document = json.loads(capsys.readouterr().out)
            assert [m["label"] for m in document["metrics"]] == ["retrieval-ndcg-at-k@10"]
            mean = document["summary"]["retrieval-ndcg-at-k@10"]["mean"]
            assert math.isclose(mean, expected, abs_tol=1e-12), name

    def test_a_datasets_metric_list_takes_every_dialect(
        self, tmp_path: Path, monkeypatch, capsys
    ) -> None:
        """A dataset declared in slotwise.yaml lists peers' names; each gives its
        hand-derived mean (q1: d2 (0) then d1 (2); q2: nothing relevant retrieved)."""
        (tmp_path / "data.yaml").write_text(
            "samples:\n  - {id: q1, expected_output: {d1: 2, d2: 0}}\n"
            "  - {id: q2, expected_output: {d3: 1}}\n"
        )
        (tmp_path / "outputs.json").write_text('{"q1": ["d2", "d1"], "q2": ["d9"]}')
        (tmp_path / "slotwise.yaml").write_text(
            "datasets:\n  tiny:\n    path: data.yaml\n    outputs: outputs.json\n"
            "    metrics: [ndcg@10, P_5, rbp.95, 'ranx:map@10', 'trec:recip_rank']\n"
        )
        monkeypatch.chdir(tmp_path)
        assert main(["run", "tiny", "--format", "json"]) == 0
        summary = json.loads(capsys.readouterr().out)["summary"]
        expected = {
            "retrieval-ndcg-at-k@10": (2 / math.log2(3) / 2) / 2,  # DCG 2/log2(3), IDCG 2
            "retrieval-precision-at-k@5": (1 / 5) / 2,
            "retrieval-rbp-label-gain(p=0.95)": (0.05 * 2 * 0.95) / 2,  # gain 2 at rank 2
            "retrieval-map@10": (1 / 2) / 2,
            "retrieval-mrr": (1 / 2) / 2,
        }
        assert {k: v["mean"] for k, v in summary.items()} == pytest.approx(expected, abs=1e-12)


def _table(args: list[str], columns: int, monkeypatch) -> list[str]:
    """The lines `slotwise metrics ARGS` prints to a terminal ``columns`` wide."""
    monkeypatch.setenv("COLUMNS", str(columns))
    buffer = io.StringIO()
    buffer.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stdout", buffer)
    assert main(["metrics", *args]) == 0
    monkeypatch.undo()
    return [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in buffer.getvalue().splitlines()]


class TestListing:
    @pytest.mark.parametrize("columns", [80, 120])
    @pytest.mark.parametrize(
        "dialect",
        [[], ["--dialect", "ranx"], ["--dialect", "trec_eval"], ["--dialect", "ir_measures"]],
    )
    def test_fits_the_terminal(self, dialect: list[str], columns: int, monkeypatch) -> None:
        lines = _table(dialect, columns, monkeypatch)
        assert max(len(line) for line in lines) <= columns

    def test_installed_metrics_at_80_columns_keep_a_readable_description(self, monkeypatch) -> None:
        """The distribution, one for every metric, moves to the title, so the description
        column keeps room: retrieval-mrr's first words are on its first line."""
        lines = _table([], 80, monkeypatch)
        assert "all from slotwise" in lines[0]
        [row] = [line for line in lines if "│ retrieval-mrr " in line]
        assert "1 / rank of the first" in row

    @pytest.mark.parametrize("dialect", ["ranx", "trec_eval", "ir_measures"])
    def test_every_listed_name_gives_its_spec(self, dialect: str, capsys) -> None:
        """In a pipe, one name and its spec per line; each name, its placeholders filled,
        translates (in its dialect) to the listed spec so filled."""
        assert main(["metrics", "--dialect", dialect]) == 0
        rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
        assert rows and all(len(row) == 2 for row in rows)
        checked = 0
        for name, spec in rows:
            if spec.startswith("refused") or "needs" in spec or name == "NAME-lN":
                continue
            filled = name.replace("@K", "@7").replace("_K", "_7").replace("_V", "_0.5")
            filled = filled.replace("@V", "@0.5").replace("rbp.P", "rbp.8")
            want = spec.replace("@K", "@7").replace("=V", "=0.5").replace("0.P", "0.8")
            got = metric_names.translate(f"{dialect}:{filled}")
            assert parse_spec(got or "") == parse_spec(want), (name, got, want)
            checked += 1
        assert checked >= 15

    def test_json(self, capsys) -> None:
        assert main(["metrics", "--dialect", "ranx", "--format", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert {"name": "ndcg@K", "spec": "retrieval-ndcg-at-k@K"} in rows

    def test_every_trec_eval_measure_is_listed(self, capsys) -> None:
        assert main(["metrics", "--dialect", "trec_eval"]) == 0
        listed = {line.split("\t")[0] for line in capsys.readouterr().out.splitlines()}
        bases = {re.sub(r"_[KV]$", "", name) for name in listed}
        others = {n for n in MEASURES if n.startswith("prefs_") or n.endswith("_avgjg")}
        assert set(MEASURES) - others <= bases
