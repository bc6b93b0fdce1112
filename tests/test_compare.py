"""Curves, strata, summaries with CIs, paired comparison, the regression gate, and the
`slotwise compare` / `run --k 1,3 --by` command lines."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import attrs
import numpy as np
import pytest

import engine
from engine.analysis import stats
from engine.analysis.compare import compare
from engine.analysis.curves import curves
from engine.analysis.verdict import gate
from engine.cli import main
from engine.evaluation.results import read_results, results_from_dict
from engine.evaluation.strata import NO_STRATUM
from engine.io import schemas

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
METRICS = ["retrieval-ndcg-at-k@10", "retrieval-recall-at-k", "retrieval-mrr", "retrieval-map"]


def _samples(n: int = 12) -> list[dict]:
    return [
        {
            "id": f"q-{i:02d}",
            "expected_output": [f"d{i}", f"e{i}"],
            **({"metadata": {"stratum": "odd" if i % 2 else "even"}} if i < n - 2 else {}),
        }
        for i in range(n)
    ]


def _outputs(n: int = 12, shift: int = 0) -> dict[str, list[str]]:
    """Rankings where the relevant docs sit lower as ``shift`` grows."""
    return {
        f"q-{i:02d}": [f"x{j}" for j in range(shift + i % 3)] + [f"d{i}", f"e{i}"] for i in range(n)
    }


@pytest.fixture(scope="module")
def quickstart_results() -> tuple[engine.Results, engine.Results]:
    eng = engine.Engine(config=QUICKSTART / "slotwise.yaml")
    dataset = eng.dataset("quickstart")
    evaluation = dataset.with_metrics(METRICS)
    return (
        evaluation.evaluate(QUICKSTART / "outputs" / "bm25.json"),
        evaluation.evaluate(QUICKSTART / "outputs" / "hybrid-rerank.json"),
    )


class TestSummaryCI:
    def test_summary_has_bootstrap_ci(self, eng):
        """Every summary entry has ci = [lo, hi] around the mean, None when n < 2."""
        results = (
            eng.dataset(samples=_samples()).with_metrics(["retrieval-mrr"]).evaluate(_outputs())
        )
        entry = results.summary()["retrieval-mrr"]
        assert entry["ci"][0] <= entry["mean"] <= entry["ci"][1]
        one = (
            eng.dataset(samples=_samples()[:1]).with_metrics(["retrieval-mrr"]).evaluate(_outputs())
        )
        assert one.summary()["retrieval-mrr"]["ci"] is None

    def test_json_ci_conforms_to_schema(self, eng):
        """The JSON summary carries ci (or null) and validates; metadata is kept per sample."""
        results = (
            eng.dataset(samples=_samples()).with_metrics(["retrieval-mrr"]).evaluate(_outputs())
        )
        document = json.loads(results.to_json())
        assert not list(schemas.problems(document, "results"))
        assert len(document["summary"]["retrieval-mrr"]["ci"]) == 2
        assert document["samples"][1]["metadata"] == {"stratum": "odd"}
        one = (
            eng.dataset(samples=_samples()[:1]).with_metrics(["retrieval-mrr"]).evaluate(_outputs())
        )
        document = json.loads(one.to_json())
        assert document["summary"]["retrieval-mrr"]["ci"] is None
        assert not list(schemas.problems(document, "results"))

    def test_round_trip_through_json(self, eng, tmp_path):
        """read_results gives back the scores, labels, metadata and summary."""
        results = eng.dataset(samples=_samples()).with_metrics(METRICS).evaluate(_outputs())
        results.to_json(tmp_path / "r.json")
        again = read_results(tmp_path / "r.json")
        assert again.labels == results.labels
        for label in results.labels:
            np.testing.assert_array_equal(again.scores[label], results.scores[label])
        assert again.summary() == results.summary()
        assert again.by("stratum").to_dict() == results.by("stratum").to_dict()


class TestCurvesAndStrata:
    def test_at_k_expands_every_cutoff(self, eng):
        """at_k evaluates each metric with k at every K in one pass; others once."""
        results = (
            eng.dataset(samples=_samples())
            .with_metrics(["retrieval-recall-at-k", "retrieval-ndcg-at-k", "retrieval-map"])
            .at_k([1, 3, 5])
            .evaluate(_outputs())
        )
        assert "retrieval-recall-at-k@3" in results.labels
        assert "retrieval-ndcg-at-k@5" in results.labels
        found = {c.name: c for c in curves(results)}
        assert found["retrieval-recall-at-k"].ks == [1, 3, 5]
        means = [p.mean for p in found["retrieval-recall-at-k"].points]
        assert means == sorted(means)  # recall@K never falls as K grows

    @pytest.mark.parametrize("ks", [[], [0, 3], 5])
    def test_at_k_rejects_bad_cutoffs(self, eng, ks):
        """at_k needs a non-empty list of positive integers."""
        evaluation = eng.dataset(samples=_samples()).with_metrics(["retrieval-mrr"])
        with pytest.raises((TypeError, engine.MetricParameterError)):
            evaluation.at_k(ks)

    def test_by_stratum(self, eng):
        """Per-stratum n and mean; samples without the key go to '(none)', listed last."""
        results = (
            eng.dataset(samples=_samples()).with_metrics(["retrieval-mrr"]).evaluate(_outputs())
        )
        breakdown = results.by("stratum")
        assert breakdown.strata == ("even", "odd", NO_STRATUM)
        assert breakdown.sizes == {"even": 5, "odd": 5, NO_STRATUM: 2}
        values = results.scores["retrieval-mrr"]
        assert breakdown.row("odd", "retrieval-mrr").mean == pytest.approx(values[1:10:2].mean())
        assert breakdown.row(NO_STRATUM, "retrieval-mrr").n == 2

    def test_cli_curve_and_strata(self, capsys, monkeypatch):
        """`run --k 1,3,5,10 --by stratum` prints one column per K and a stratum table."""
        monkeypatch.chdir(QUICKSTART)
        code = main(
            [
                "run",
                "quickstart",
                "--outputs",
                "outputs/bm25.json",
                "--metrics",
                "retrieval-ndcg-at-k,retrieval-recall-at-k,retrieval-mrr@10",
                "--k",
                "1,3,5,10",
                "--by",
                "stratum",
            ]
        )
        out = capsys.readouterr().out
        assert code == 0
        assert "@1" in out and "@10" in out and "retrieval-recall-at-k" in out
        assert "multi-hop (10)" in out and "95% CI" in out

    def test_cli_bad_cutoff_list(self, capsys, monkeypatch):
        """A malformed --k list is a usage error."""
        monkeypatch.chdir(QUICKSTART)
        assert main(["run", "quickstart", "--k", "1,x"]) == 2


class TestCompareAPI:
    def test_quickstart_hybrid_beats_bm25(self, quickstart_results):
        """hybrid-rerank is significantly better than bm25 on nDCG@10 after Holm."""
        bm25, hybrid = quickstart_results
        comparison = engine.compare([bm25, hybrid], names=["bm25", "hybrid"])
        row = comparison.row("retrieval-ndcg-at-k@10")
        assert row.n == 46 and row.difference > 0 and row.significant and row.mark == "▲"
        assert row.p_holm >= row.p
        assert row.ci[0] < row.difference < row.ci[1]
        assert row.movers and abs(row.movers[0].difference) >= abs(row.movers[-1].difference)
        assert gate(comparison, min_judged=None, max_judged_gap=None).outcome == "held"

    @pytest.mark.parametrize("test", ["randomization", "bootstrap", "t"])
    def test_every_test_runs(self, quickstart_results, test):
        """All three tests give p-values in [0, 1] and Holm over the whole family."""
        bm25, hybrid = quickstart_results
        comparison = compare([bm25, hybrid], test=test)
        raw = [r.p for r in comparison.rows]
        assert all(0 <= p <= 1 for p in raw)
        np.testing.assert_allclose([r.p_holm for r in comparison.rows], stats.holm(raw))

    def test_three_systems_all_pairs(self, quickstart_results):
        """Three results: every pair, Holm over metrics x pairs."""
        bm25, hybrid = quickstart_results
        comparison = compare([bm25, hybrid, bm25], names=["a", "b", "c"])
        assert {(r.a, r.b) for r in comparison.rows} == {("a", "b"), ("a", "c"), ("b", "c")}
        assert len(comparison.rows) == 3 * len(METRICS)
        same = comparison.row("retrieval-map", "a", "c")
        assert same.difference == 0 and same.p == 1.0 and not same.significant

    def test_names(self, quickstart_results):
        """Systems are named by names=, or by the keys of a mapping, else "system 1",
        "system 2" in order; names= beside a mapping is an error."""
        bm25, hybrid = quickstart_results
        assert compare({"bm25": bm25, "hybrid": hybrid}).systems == ("bm25", "hybrid")
        assert compare([bm25, hybrid], names=["b", "h"]).systems == ("b", "h")
        assert compare([bm25, hybrid]).systems == ("system 1", "system 2")
        with pytest.raises(ValueError, match="mapping"):
            compare({"bm25": bm25, "hybrid": hybrid}, names=["b", "h"])

    def test_prints_as_the_cli_does(self, quickstart_results, files, capsys):
        """print(comparison) shows the table and the notes `slotwise compare` prints
        (judged@k, pairs left out, the samples that moved most); its repr says in one
        line what was compared and how it came out."""
        bm25, hybrid = quickstart_results
        comparison = engine.compare({"bm25": bm25, "hybrid-rerank": hybrid})
        assert main(["compare", *map(str, files)]) == 0
        printed = capsys.readouterr().out.splitlines()
        text = str(comparison).splitlines()
        body = [line for line in printed if line.startswith("│")]
        assert body and [line for line in text if line.startswith("│")] == body
        assert text[-len(comparison.notes()) :] == comparison.notes()
        verdict = gate(comparison).lines()
        assert printed[-len(verdict) :] == verdict  # the gate's verdict comes last
        moved = printed[-len(verdict) - 4 : -len(verdict)]
        assert comparison.notes()[-4:] == moved  # the samples that moved most
        assert "moved most (b - a):" in text
        assert repr(comparison) == (
            "<Comparison quickstart: bm25 → hybrid-rerank; 4 metric(s), 4 better, 0 worse "
            "at alpha = 0.05 (Holm)>"
        )

    def test_renderers(self, quickstart_results):
        """to_dict, Markdown, LaTeX and the rich table all name every metric."""
        bm25, hybrid = quickstart_results
        comparison = compare([bm25, hybrid], names=["bm25", "hybrid_rerank"])
        document = comparison.to_dict()
        assert document["schema"] == "slotwise.comparison/v1"
        assert json.loads(json.dumps(document)) == document
        markdown, latex = comparison.to_markdown(), comparison.to_latex()
        for label in METRICS:
            assert label in markdown and label in latex
        assert "| metric |" in markdown and "▲" in markdown
        assert r"\begin{tabular}" in latex and r"hybrid\_rerank" in latex and "▲" not in latex

    def test_regression_respects_direction(self, eng):
        """A metric where lower is better regresses when it rises (judged@k aside)."""
        dataset = eng.dataset(samples=_samples(30)).with_metrics(["retrieval-mrr"])
        good, worse = dataset.evaluate(_outputs(30)), dataset.evaluate(_outputs(30, shift=3))

        def outcome(results: list[engine.Results]) -> str:
            return gate(compare(results), min_judged=None, max_judged_gap=None).outcome

        assert outcome([good, worse]) == "regressed"
        assert outcome([worse, good]) == "held"
        # flip the direction: the same change is now an improvement
        flipped = [attrs.evolve(m, higher_is_better=False) for m in good.metrics]
        good.metrics, worse.metrics = flipped, flipped
        assert outcome([good, worse]) == "held"
        assert outcome([worse, good]) == "regressed"

    def test_three_samples_cant_tell_whatever_the_margin(self, eng):
        """Three pairs: an exact paired test's smallest p is 2 / 2**3 = 0.25 > 0.05, so no
        margin makes a verdict: can't tell, naming the 6 pairs needed."""
        dataset = eng.dataset(samples=_samples(3)).with_metrics(["retrieval-mrr"])
        good, worse = dataset.evaluate(_outputs(3)), dataset.evaluate(_outputs(3, shift=1))
        comparison = compare([good, worse])
        assert not comparison.row("retrieval-mrr").significant
        for margin in (None, 0.01, 1.0):
            (verdict,) = gate(
                comparison, max_drop=margin, min_judged=None, max_judged_gap=None
            ).verdicts
            assert verdict.outcome == "can't tell" and verdict.needed == 6
            assert (
                "smallest p an exact paired test can reach is 0.25 > alpha=0.05" in verdict.reason
            )

    def test_zero_variance_and_single_sample(self, eng):
        """Identical systems: p = 1, no crash; one sample: n = 1, no CI, p = 1."""
        dataset = eng.dataset(samples=_samples()).with_metrics(["retrieval-mrr"])
        results = dataset.evaluate(_outputs())
        for test in ("randomization", "bootstrap", "t"):
            row = compare([results, results], test=test).row("retrieval-mrr")
            assert row.p == 1.0 and row.dz is None and not row.significant
        single = eng.dataset(samples=_samples()[:1]).with_metrics(["retrieval-mrr"])
        a, b = single.evaluate(_outputs()), single.evaluate(_outputs(shift=2))
        row = compare([a, b], test="t").row("retrieval-mrr")
        assert row.n == 1 and row.ci is None and row.p == 1.0

    def test_na_pairs_are_dropped_and_reported(self, eng):
        """Samples NA in one system are left out of the pairs and counted in dropped."""
        dataset = eng.dataset(samples=_samples()).with_metrics(["retrieval-mrr"])
        a, b = dataset.evaluate(_outputs()), dataset.evaluate(_outputs(shift=1))
        b.scores["retrieval-mrr"][:3] = np.nan
        row = compare([a, b]).row("retrieval-mrr")
        assert row.n == 9 and row.dropped == 3
        assert row.mean_a == pytest.approx(a.scores["retrieval-mrr"][3:].mean())

    def test_different_datasets_rejected(self, eng):
        """Results of different datasets cannot be compared."""
        a = eng.dataset(samples=_samples()).with_metrics(["retrieval-mrr"]).evaluate(_outputs())
        b = eng.dataset(samples=_samples(11)).with_metrics(["retrieval-mrr"]).evaluate(_outputs())
        with pytest.raises(engine.InputError, match="different dataset"):
            compare([a, b])

    def test_different_parameters_rejected(self, eng):
        """The same label computed with different parameters is an error."""
        dataset = eng.dataset(samples=_samples())
        a = dataset.with_metrics(["retrieval-recall-at-k"]).evaluate(_outputs())
        other = engine.Engine(config={"metrics": {"retrieval": {"default_k": 2}}})
        b = (
            other.dataset(samples=_samples())
            .with_metrics(["retrieval-recall-at-k"])
            .evaluate(_outputs())
        )
        with pytest.raises(engine.InputError, match="different parameters"):
            compare([a, b])

    def test_a_parameter_added_since_compares(self, eng, tmp_path):
        """A results file written before a metric gained a parameter (nDCG's ``gains``,
        None when unset) compares with one that records it as None; a map read back from a
        file equals the one in memory."""
        dataset = eng.dataset(samples=_samples())
        for spec in ("retrieval-ndcg-at-k@5", "retrieval-ndcg-at-k@5(gains={1: 3})"):
            new = dataset.with_metrics([spec]).evaluate(_outputs())
            new.to_json(tmp_path / "new.json")
            document = json.loads((tmp_path / "new.json").read_text())
            if "gains" not in spec:
                assert document["metrics"][0]["params"].pop("gains") is None
            (tmp_path / "old.json").write_text(json.dumps(document))
            old = engine.read_results(tmp_path / "old.json")
            comparison = compare([old, new])
            assert [row.label for row in comparison.rows] == new.labels
            assert comparison.skipped == ()

    def test_unshared_labels_skipped(self, eng):
        """Labels in only one results are skipped and listed; none shared is an error."""
        dataset = eng.dataset(samples=_samples())
        a = dataset.with_metrics(["retrieval-mrr", "retrieval-map"]).evaluate(_outputs())
        b = dataset.with_metrics(["retrieval-mrr"]).evaluate(_outputs())
        assert compare([a, b]).skipped == ("retrieval-map",)
        c = dataset.with_metrics(["retrieval-r-precision"]).evaluate(_outputs())
        with pytest.raises(engine.InputError, match="share no metric"):
            compare([b, c])


class _Cells(HTMLParser):
    """Rows of text cells of an HTML table, with each row's style and the caption."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.styles: list[str | None] = []
        self.caption = ""
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
            self.styles.append(dict(attrs).get("style"))
        elif tag in ("td", "th", "caption"):
            self._in = tag
            if tag != "caption":
                self.rows[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "caption":
            self.caption += data
        elif self._in:
            self.rows[-1][-1] += data


def _parsed(markup: str) -> _Cells:
    parser = _Cells()
    parser.feed(markup)
    return parser


class TestNotebook:
    """Results and comparisons render as HTML tables in Jupyter (``_repr_html_``)."""

    def test_results_table_is_the_summary(self, quickstart_results):
        bm25, _ = quickstart_results
        table = _parsed(bm25._repr_html_())
        assert table.caption == "quickstart (46 samples)"
        assert table.rows[0] == ["metric", "mean", "95% CI", "n", "na", "errors"]
        expected = [
            [
                label,
                f"{s['mean']:.4f}",
                f"[{s['ci'][0]:.4f}, {s['ci'][1]:.4f}]",
                str(s["n"]),
                str(s["na"]),
                str(s["errors"]),
            ]
            for label, s in bm25.summary().items()
        ]
        assert table.rows[1:] == expected

    def test_escaped_and_na(self, eng):
        """Names are escaped; an all-NA metric shows NA and no interval."""
        results = (
            eng.dataset(samples=[{"id": "q", "expected_output": []}], name="<b>&")
            .with_metrics(["ra-nwg-at-k"])
            .evaluate({"q": ["a"]})
        )
        markup = results._repr_html_()
        assert "<b>" not in markup and "&lt;b&gt;&amp;" in markup
        assert _parsed(markup).rows[1] == ["ra-nwg-at-k", "NA", "-", "0", "1", "0"]

    def test_comparison_table_marks_the_winners(self, quickstart_results):
        bm25, hybrid = quickstart_results
        comparison = compare([bm25, hybrid], names=["bm25", "hybrid"])
        table = _parsed(comparison._repr_html_())
        assert table.caption.startswith("quickstart: hybrid vs bm25")
        assert [row[0] for row in table.rows[1:]] == [row.label for row in comparison.rows]
        for row, style in zip(comparison.rows, table.styles[1:], strict=True):
            assert (style == "color: green") == (row.mark == "▲")


@pytest.fixture
def files(quickstart_results, tmp_path) -> tuple[Path, Path]:
    bm25, hybrid = quickstart_results
    bm25_path, hybrid_path = tmp_path / "bm25.json", tmp_path / "hybrid-rerank.json"
    bm25.to_json(bm25_path)
    hybrid.to_json(hybrid_path)
    return bm25_path, hybrid_path


class TestCompareCLI:
    @pytest.mark.parametrize("fmt", ["table", "json", "markdown", "latex"])
    def test_formats(self, files, capsys, fmt):
        """Every format prints the comparison; names come from the file names."""
        assert main(["compare", *map(str, files), "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "retrieval-ndcg-at-k@10" in out
        if fmt == "json":
            assert json.loads(out)["systems"] == ["bm25", "hybrid-rerank"]

    def test_gate_holds_on_improvement(self, files, capsys):
        """bm25 -> hybrid improves: held, exit 0, once the quickstart's sparse labels are
        allowed (its unjudged documents are non-relevant by design); with the default
        judged@k checks, can't tell, exit 4, naming the systems' judged@k."""
        assert main(["compare", *map(str, files), "--fail-on-regression", "--allow-unjudged"]) == 0
        err = capsys.readouterr().err
        assert "regression gate: exit 0" in err and "verdict: HELD" in err
        assert main(["compare", *map(str, files), "--fail-on-regression"]) == 4
        err = capsys.readouterr().err
        assert "verdict: CAN'T TELL" in err and "labels: CAN'T TELL: bm25: judged@" in err

    def test_gate_fails_on_regression(self, files, capsys):
        """hybrid -> bm25 regresses significantly: exit 1, naming the metrics and why."""
        baseline, new = files[1], files[0]
        code = main(["compare", str(baseline), str(new), "--fail-on-regression", "--test", "t"])
        err = capsys.readouterr().err
        assert code == 1
        assert "verdict: REGRESSED" in err
        assert "retrieval-ndcg-at-k@10: REGRESSED" in err and "p (Holm)" in err

    def test_gate_max_drop(self, files, capsys, tmp_path):
        """Three samples' MAP lowered by 0.5: not significant (3 pairs differ, smallest p
        0.25), and the interval reaches below the 0.01 margin: can't tell; a margin of 0.2
        for MAP (every resample's mean drop is at most 3 x 0.5 / 46 = 0.033) holds."""
        document = json.loads(files[1].read_text())
        for sample in document["samples"][:3]:
            sample["scores"]["retrieval-map"] = max(0.0, sample["scores"]["retrieval-map"] - 0.5)
        lowered = tmp_path / "lowered.json"
        lowered.write_text(json.dumps(document))
        args = ["compare", str(files[1]), str(lowered), "--fail-on-regression", "--allow-unjudged"]
        assert main([*args, "--max-drop", "0.01"]) == 4
        err = capsys.readouterr().err
        assert "retrieval-map: CAN'T TELL" in err and "only 3 of the 46 pairs differ" in err
        assert main([*args, "--max-drop", "retrieval-map=0.2"]) == 0
        assert main([*args, "--max-drop", "retrieval-map=0.2", "--allow-inconclusive"]) == 0
        assert main([*args, "--max-drop", "0.01", "--allow-inconclusive"]) == 0
        assert "regression gate: exit 0 (--allow-inconclusive)" in capsys.readouterr().err
        for bad in ("nope=0.1", "1_0", "-1", "nan", "0.1,retrieval-map=0.2"):
            assert main([*args, "--max-drop", bad]) == 2, bad

    def test_output_file(self, files, tmp_path, capsys):
        """--output writes the rendered comparison."""
        target = tmp_path / "cmp.md"
        assert (
            main(["compare", *map(str, files), "--format", "markdown", "--output", str(target)])
            == 0
        )
        assert target.read_text().count("|") > 10

    def test_bad_inputs_exit_2(self, files, tmp_path, capsys, eng):
        """Other dataset, a non-results file, one file, missing file: exit 2, no traceback."""
        other = eng.dataset(samples=_samples()).with_metrics(METRICS).evaluate(_outputs())
        other_path = tmp_path / "other.json"
        other.to_json(other_path)
        not_results = tmp_path / "outputs.json"
        not_results.write_text(json.dumps({"q-1": ["d1"]}))
        for args in (
            [str(files[0]), str(other_path)],
            [str(files[0]), str(not_results)],
            [str(files[0])],
            [str(files[0]), str(tmp_path / "missing.json")],
            [*map(str, files), "--names", "x"],
        ):
            assert main(["compare", *args]) == 2, args
            err = capsys.readouterr().err
            assert "Traceback" not in err and "error" in err

    def test_results_from_dict_rejects_other_documents(self):
        """A document that is not slotwise results is an InputError."""
        with pytest.raises(engine.InputError):
            results_from_dict({"samples": []})
