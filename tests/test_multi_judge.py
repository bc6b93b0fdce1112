"""Several judges as one (engine/annotate/ensemble.py), their agreement among themselves
and with people (engine/analysis/agreement.py) from ``slotwise annotate --runs
--also-judge ... --agreement``, and the self-preference warning (engine/annotate/
families.py). The judges are stand-in servers over HTTP (engine/annotate/stand_in.py),
whose grades follow a published rule (:func:`umbrela_grade`); a second one ``--bias 1``
(one grade kinder, at most 3) and ``--unreadable`` on a share of the prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ir_measures
import krippendorff
import numpy as np
import pytest
import yaml
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from engine.annotate.ensemble import combine_grades
from engine.annotate.families import family, self_preference
from engine.annotate.stand_in import umbrela_grade
from engine.cli import main

QUESTION = "Which harbour lighthouse guided sailors near Port{i}?"
PASSAGES = {
    "echo": "Which harbour lighthouse guided sailors near Port{i}? Asked often.",  # 3
    "half": "The harbour lighthouse guided ships home.",  # 3 of 6 long words: 2
    "quarter": "A harbour with a lighthouse.",  # 2 of 6: 1
    "filler": "Bread recipes vary by region and by season.",  # 0
    "tail": "Lighthouse keepers kept logs.",  # 1 of 6: 0
}
#: What people said of each kind of passage, by query number mod 3.
HUMAN = [
    {"echo": 3, "half": 1, "quarter": 0, "filler": 0, "tail": 0},
    {"echo": 2, "half": 2, "quarter": 1, "filler": 0, "tail": 0},
    {"echo": 3, "half": 0, "quarter": 0, "filler": 1, "tail": 2},  # the judge's worst
]


class TestCombine:
    def test_majority_is_scipys_mode_the_lowest_of_a_tie(self) -> None:
        """On random grades of 3 to 5 judges, some missing, the majority is
        ``scipy.stats.mode`` with NaN omitted (which returns the smallest of tied modes);
        the spread is the highest minus the lowest grade given."""
        rng = np.random.default_rng(5)
        for judges in (2, 3, 5):
            grades = rng.integers(0, 4, (judges, 200)).astype(float)
            grades[rng.random(grades.shape) < 0.2] = np.nan
            combined, spread = combine_grades(grades, "majority")
            for column in range(grades.shape[1]):
                given = grades[:, column][~np.isnan(grades[:, column])]
                if not given.size:
                    assert np.isnan(combined[column]) and np.isnan(spread[column])
                    continue
                assert combined[column] == stats.mode(given).mode
                assert spread[column] == given.max() - given.min()

    def test_mean_rounds_half_down_by_hand(self) -> None:
        """[1, 2]: 1.5 -> 1; [1, 2, 2]: 5/3 -> 2; [0, 1, 3]: 4/3 -> 1; [2, 3]: 2.5 -> 2;
        [3, missing]: 3 (the judge that answered); [missing, missing]: none."""
        nan = np.nan
        grades = np.array(
            [[1, 1, 0, 2, 3, nan], [2, 2, 1, 3, nan, nan], [nan, 2, 3, nan, nan, nan]]
        )
        combined, spread = combine_grades(grades, "mean")
        assert combined[:5].tolist() == [1, 2, 1, 2, 3] and np.isnan(combined[5])
        assert spread[:5].tolist() == [1, 1, 3, 1, 0]
        majority, _ = combine_grades(grades, "majority")
        assert majority[:5].tolist() == [1, 2, 0, 2, 3]  # ties: 1|2 -> 1, 0|1|3 -> 0, 2|3 -> 2

    def test_an_unknown_rule_is_refused(self) -> None:
        with pytest.raises(ValueError, match="unknown rule 'median'"):
            combine_grades(np.zeros((2, 2)), "median")


class TestFamilies:
    def test_the_table(self) -> None:
        for model, expected in [
            ("gpt-4o-mini", "OpenAI"),
            ("openai/gpt-4.1", "OpenAI"),
            ("o3-mini", "OpenAI"),
            ("claude-3-5-sonnet-20241022", "Anthropic"),
            ("models/gemini-1.5-pro", "Google"),
            ("meta-llama/Llama-3.1-70B-Instruct", "Meta"),
            ("Qwen/Qwen2.5-7B-Instruct", "Alibaba Qwen"),
            ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mistral"),
            ("stand-in", None),
        ]:
            assert family(model) == expected, model

    def test_a_judge_of_the_systems_family_is_warned_about(self) -> None:
        found = self_preference(
            {"gpt-4o-mini": "gpt-4o-mini", "llama": "llama3.1:70b"}, ["openai/gpt-4o"]
        )
        assert (
            len(found) == 1 and "the judge gpt-4o-mini (gpt-4o-mini) is of the OpenAI" in found[0]
        )
        assert self_preference({"j": "claude-3-haiku"}, ["gpt-4o", "stand-in"]) == []


def _files(tmp_path: Path, n: int = 12) -> dict[str, Path]:
    """n questions, each with its five passages; people labelled all five of the first
    n - 3 (HUMAN by query number mod 3); runs a and b rank them in two orders."""
    paths = {name: tmp_path / f"{name}.yaml" for name in ("dataset", "labelled")}
    samples: list[dict[str, Any]] = []
    for i in range(n):
        sample: dict[str, Any] = {"id": f"q{i:02d}", "input": {"question": QUESTION.format(i=i)}}
        if i < n - 3:
            sample["expected_output"] = {
                "relevance": {f"{kind}{i}": grade for kind, grade in HUMAN[i % 3].items()}
            }
        samples.append(sample)
    paths["dataset"].write_text(yaml.safe_dump({"samples": samples}))
    for name, order in (("a", list(PASSAGES)), ("b", list(PASSAGES)[::-1])):
        outputs = {
            f"q{i:02d}": {
                "retrieved": [{"id": f"{k}{i}", "text": PASSAGES[k].format(i=i)} for k in order]
            }
            for i in range(n)
        }
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(outputs))
    return paths


def _annotate(paths: dict[str, Path], url: str, *extra: str) -> int:
    return main(
        ["annotate", str(paths["dataset"]), "--task", "relevance", "--runs", str(paths["a"]),
         str(paths["b"]), "--depth", "5", "--output", str(paths["labelled"]), "--annotator",
         "openai-compatible", "--base-url", url, "--model", "judge-a", "--backoff", "0.01",
         "--max-unlabelled", "1", *extra]
    )  # fmt: skip


def _grade(doc: str, i: int) -> int:
    kind = doc.rstrip("0123456789")
    return umbrela_grade(QUESTION.format(i=i), PASSAGES[kind].format(i=i))


class TestTwoJudges:
    def test_combined_with_each_judges_grade_and_the_spread(
        self, server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Judge a grades by the stand-in's rule; judge b one grade kinder (at most 3)
        and unreadable on about 30% of the prompts. Every pooled pair: metadata.judges
        holds a's grade and b's (null where b's answer could not be read), the label is
        the majority (a tie of two: the lower, a's), the spread b - a where both
        answered, 0 where a answered alone. Their agreement is scikit-learn's kappa and
        the package's alpha on the grades written."""
        first = server_factory()
        second = server_factory("--bias", "1", "--unreadable", "0.3")
        paths = _files(tmp_path)
        code = _annotate(paths, first.url, "--also-judge", f"judge-b@{second.url}")
        assert code == 0
        captured = capsys.readouterr()
        written = yaml.safe_load(paths["labelled"].read_text())["samples"]
        a, b = [], []
        for i, sample in enumerate(written):
            metadata = sample["metadata"]
            relevance = sample["expected_output"]["relevance"]
            assert set(metadata["judges"]) == {f"{k}{i}" for k in PASSAGES}
            for doc, given in metadata["judges"].items():
                expected_a = _grade(doc, i)
                assert given["judge-a"] == expected_a
                assert given["judge-b"] in (None, min(3, expected_a + 1))
                assert relevance[doc] == expected_a  # a alone, or a tie resolved low
                spread = 0 if given["judge-b"] is None else given["judge-b"] - expected_a
                assert metadata["judge_spread"][doc] == spread
                assert metadata["label_sources"][doc].startswith(
                    "majority(openai-compatible:judge-a:"
                )
                a.append(expected_a)
                b.append(np.nan if given["judge-b"] is None else given["judge-b"])
        missing = int(np.isnan(b).sum())
        assert 0 < missing < len(b)  # b could not be read on some pairs, which say so
        assert f"the others' grades decide): judge-a 0, judge-b {missing}" in captured.err
        assert f"judge-b: {missing} judge answer(s) could not be read" in captured.err
        both = ~np.isnan(b)
        a_both, b_both = np.array(a)[both], np.array(b)[both]
        kappa = cohen_kappa_score(a_both, b_both, weights="quadratic")
        assert f"quadratic {kappa:.4f} on {int(both.sum())} pairs both graded" in captured.out
        alpha = krippendorff.alpha(np.array([a, b], dtype=float), level_of_measurement="ordinal")
        assert f"ordinal {alpha:.4f}" in captured.out

    def test_a_pair_no_judge_answered_is_unjudged_with_each_reason(
        self, server_factory: Any, tmp_path: Path
    ) -> None:
        """Both judges unreadable on every prompt: no label is written; each pair is in
        metadata.unjudged saying both judges' reasons, and judges holds nulls."""
        first = server_factory("--unreadable", "1")
        second = server_factory("--unreadable", "1")
        paths = _files(tmp_path, n=3)
        assert _annotate(paths, first.url, "--also-judge", f"judge-b@{second.url}") == 0
        sample = yaml.safe_load(paths["labelled"].read_text())["samples"][2]
        assert "expected_output" not in sample or not sample["expected_output"].get("relevance")
        why = sample["metadata"]["unjudged"]["echo2"]
        assert why.startswith("no judge answered (judge-a: ") and "; judge-b: " in why
        assert sample["metadata"]["judges"]["echo2"] == {"judge-a": None, "judge-b": None}


class TestUncertaintyForTheSampler:
    def test_the_judges_disagreement_drives_active_sampling(
        self, server_factory: Any, tmp_path: Path
    ) -> None:
        """--uncertainty-output: per pair the standard deviation of the judges' grades as
        written in metadata.judges (a and b one grade apart: 0.5; b unreadable: 0), per
        query their mean; ``slotwise sample --active --uncertainty`` reads both."""
        first = server_factory()
        second = server_factory("--bias", "1", "--unreadable", "0.3")
        paths = _files(tmp_path)
        pairs, queries = tmp_path / "pairs.jsonl", tmp_path / "queries.jsonl"
        also = ("--also-judge", f"judge-b@{second.url}", "--uncertainty-output")
        assert _annotate(paths, first.url, *also, str(pairs), "--uncertainty-unit", "pair") == 0
        written = yaml.safe_load(paths["labelled"].read_text())["samples"]
        expected = {
            (sample["id"], doc): float(np.std([g for g in given.values() if g is not None]))
            for sample in written
            for doc, given in sample["metadata"]["judges"].items()
        }
        rows = [json.loads(line) for line in pairs.read_text().splitlines()]
        found = {(row["query_id"], row["doc_id"]): row["uncertainty"] for row in rows}
        assert found == pytest.approx(expected) and set(found.values()) == {0.0, 0.5}
        assert _annotate(paths, first.url, *also, str(queries)) == 0
        per_query = {
            row["query_id"]: row["uncertainty"]
            for row in map(json.loads, queries.read_text().splitlines())
        }
        for sample in written:
            mine = [u for (q, _), u in expected.items() if q == sample["id"]]
            assert per_query[sample["id"]] == pytest.approx(np.mean(mine))
        runs = ["--runs", str(paths["a"]), str(paths["b"]), "--depth", "5"]
        for unit, file in (("pair", pairs), ("query", queries)):
            drawn = tmp_path / f"{unit}-sample.jsonl"
            assert main(
                ["sample", str(paths["dataset"]), "--unit", unit, *runs, "--active",
                 "--uncertainty", str(file), "--size", "4", "--seed", "1", "--output", str(drawn)]
            ) == 0  # fmt: skip
            assert drawn.read_text().strip()


class TestGradedAgreementCommand:
    def test_json_report_against_the_peers(
        self, server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--agreement --agreement-format json: the judge's grades (the stand-in's rule)
        against HUMAN on the 9 labelled questions' 45 pairs; kappas as scikit-learn's,
        alpha as the package's, the confusion matrix counted by hand from the two lists,
        Kendall's tau of the runs' order as scipy's. The judge is a gpt model judging a
        gpt system: the self-preference warning is logged and in the report."""
        server = server_factory()
        paths = _files(tmp_path)
        argv = ["--agreement", "--agreement-format", "json", "--system-model", "openai/gpt-4o"]
        code = main(
            ["annotate", str(paths["dataset"]), "--task", "relevance", "--runs", str(paths["a"]),
             str(paths["b"]), "--depth", "5", "--output", str(paths["labelled"]), "--annotator",
             "openai-compatible", "--base-url", server.url, "--model", "gpt-4o-mini", *argv]
        )  # fmt: skip
        assert code == 0
        captured = capsys.readouterr()
        report = json.loads(captured.out)
        human = [HUMAN[i % 3][k] for i in range(9) for k in sorted(PASSAGES)]
        judge = [_grade(f"{k}{i}", i) for i in range(9) for k in sorted(PASSAGES)]
        graded = report["graded"]
        assert graded["pairs"] == 45 and report["pairs"] == 45 and report["missing"] == []
        for weights in ("linear", "quadratic"):
            assert graded["cohen_kappa"][weights] == pytest.approx(
                cohen_kappa_score(human, judge, weights=weights)
            )
        for level in ("nominal", "ordinal", "interval"):
            assert graded["krippendorff_alpha"][level] == pytest.approx(
                krippendorff.alpha(np.array([human, judge], float), level_of_measurement=level)
            )
        counts = np.zeros((4, 4), int)
        for h, j in zip(human, judge, strict=True):
            counts[h, j] += 1
        assert graded["confusion"]["counts"] == counts.tolist()
        (ranking,) = report["rankings"]
        runs = list(ranking["human"])
        tau = stats.kendalltau(
            [ranking["human"][r] for r in runs], [ranking["judge"][r] for r in runs]
        )
        assert ranking["kendall_tau"] == pytest.approx(tau.statistic)
        # each topic: 5 pairs; unreliable where scikit-learn's kappa on its own pairs (on
        # the scale of all pairs, labels=) is below 0.6 (HUMAN's third kind: q02, q05, q08)
        each = {topic["id"]: topic for topic in graded["topics"]["each"]}
        unreliable = []
        for i in range(9):
            mine = slice(5 * i, 5 * i + 5)
            kappa = cohen_kappa_score(
                human[mine], judge[mine], weights="quadratic", labels=[0, 1, 2, 3]
            )
            assert each[f"q{i:02d}"]["quadratic_kappa"] == pytest.approx(kappa)
            unreliable += [f"q{i:02d}"] if kappa < 0.6 else []
        assert graded["topics"]["unreliable"] == unreliable == ["q02", "q05", "q08"]
        assert "self-preference: the judge gpt-4o-mini" in captured.err
        assert report["self_preference"] and "OpenAI family" in report["self_preference"][0]

    def test_two_judges_json_and_markdown(
        self, server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--also-judge with --agreement-format json: one JSON document, the judges'
        agreement among themselves under among_judges (alpha as the package's on the
        grades metadata.judges holds); markdown: both as tables."""
        first = server_factory()
        second = server_factory("--bias", "1")
        paths = _files(tmp_path)
        extra = ("--also-judge", f"judge-b@{second.url}", "--agreement")
        assert _annotate(paths, first.url, *extra, "--agreement-format", "json") == 0
        report = json.loads(capsys.readouterr().out)
        written = yaml.safe_load(paths["labelled"].read_text())["samples"]
        grades = [
            [
                given[judge]
                for sample in written
                for given in sample.get("metadata", {}).get("judges", {}).values()
            ]
            for judge in ("judge-a", "judge-b")
        ]
        among = report["among_judges"]
        # --agreement judges the 9 human-labelled questions' 45 pairs alone
        assert among["judges"] == ["judge-a", "judge-b"] and among["pairs"] == 45
        for level in ("nominal", "ordinal", "interval"):
            assert among["krippendorff_alpha"][level] == pytest.approx(
                krippendorff.alpha(np.array(grades, float), level_of_measurement=level)
            )
        (pair,) = among["pairwise"]
        assert pair["judges"] == ["judge-a", "judge-b"] and pair["pairs"] == 45
        for weights in ("linear", "quadratic"):
            assert pair[f"{weights}_kappa"] == pytest.approx(
                cohen_kappa_score(*grades, weights=weights)
            )
        assert _annotate(paths, first.url, *extra, "--agreement-format", "markdown") == 0
        out = capsys.readouterr().out
        assert "| Cohen's kappa, quadratic |" in out and "### Agreement among the judges" in out

    def test_a_model_the_outputs_name_is_read(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Run b's outputs say actual_output.model "meta-llama/Llama-3.1-8B-Instruct"; the
        judge llama3.1:70b (Meta too) is warned about before any call (--dry-run); a
        claude judge is not."""
        paths = _files(tmp_path, n=3)
        outputs = json.loads(paths["b"].read_text())
        for output in outputs.values():
            output["model"] = "meta-llama/Llama-3.1-8B-Instruct"
        paths["b"].write_text(json.dumps(outputs))
        for model, warned in (("llama3.1:70b", True), ("claude-3-5-haiku", False)):
            code = main(
                ["annotate", str(paths["dataset"]), "--task", "relevance", "--runs",
                 str(paths["a"]), str(paths["b"]), "--output", str(paths["labelled"]),
                 "--annotator", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1",
                 "--model", model, "--dry-run"]
            )  # fmt: skip
            assert code == 0
            err = capsys.readouterr().err
            assert ("self-preference: the judge llama3.1:70b" in err) is warned
            assert ("Llama-3.1-8B-Instruct" in err) is warned

    def test_text_report(
        self, server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        server = server_factory()
        paths = _files(tmp_path)
        assert _annotate(paths, server.url, "--agreement") == 0
        out = capsys.readouterr().out
        assert "Cohen's kappa  linear " in out and "Krippendorff's alpha  nominal " in out
        assert "confusion (rows: human grade, columns: judge grade)" in out
        assert "per topic: 3 of 9 topics with at least 5 pairs" in out and "    q02  kappa" in out

    def test_also_judge_needs_runs(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        paths = _files(tmp_path, n=3)
        code = main(
            ["annotate", str(paths["dataset"]), "--task", "relevance", "--outputs", str(paths["a"]),
             "--output", str(paths["labelled"]), "--annotator", "openai-compatible",
             "--base-url", "http://127.0.0.1:9/v1", "--model", "j", "--also-judge", "k"]
        )  # fmt: skip
        assert code == 2 and "--also-judge combines judges of --runs" in capsys.readouterr().err


def test_compare_ppi_prints_the_graded_agreement(
    server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compare --ppi --human``: the JSON has the judge's graded agreement with the
    human labels (kappas as scikit-learn's on the 45 pairs both labelled), the table its
    lines, the markdown its table."""
    server = server_factory()
    paths = _files(tmp_path)
    assert _annotate(paths, server.url) == 0
    metric = "retrieval-ndcg-at-k@5"
    for system in ("a", "b"):
        assert main(
            ["run", str(paths["labelled"]), "--outputs", str(paths[system]), "--metrics", metric,
             "--format", "json", "--output", str(tmp_path / f"{system}-results.json"),
             "--keep-outputs"]
        ) == 0  # fmt: skip
    argv = ["compare", str(tmp_path / "a-results.json"), str(tmp_path / "b-results.json"),
            "--ppi", str(paths["labelled"]), "--human", str(paths["dataset"])]  # fmt: skip
    capsys.readouterr()
    assert main([*argv, "--format", "json"]) == 0
    agreement = json.loads(capsys.readouterr().out)["agreement"]
    human = [HUMAN[i % 3][k] for i in range(9) for k in sorted(PASSAGES)]
    judge = [_grade(f"{k}{i}", i) for i in range(9) for k in sorted(PASSAGES)]
    assert agreement["pairs"] == 45 and agreement["samples"] == 9
    assert agreement["graded"]["cohen_kappa"]["linear"] == pytest.approx(
        cohen_kappa_score(human, judge, weights="linear")
    )
    assert agreement["weighted_kappa"] == pytest.approx(
        cohen_kappa_score(human, judge, weights="quadratic")
    )
    # the systems' order: nDCG@5 of each run on the 9 labelled questions, by ir_measures
    # under the human qrels and under the judge's
    runs = {
        name: {f"q{i:02d}": {f"{k}{i}": 5.0 - r for r, k in enumerate(order)} for i in range(9)}
        for name, order in (("a", list(PASSAGES)), ("b", list(PASSAGES)[::-1]))
    }
    human_qrels = {f"q{i:02d}": {f"{k}{i}": HUMAN[i % 3][k] for k in PASSAGES} for i in range(9)}
    judge_qrels = {
        f"q{i:02d}": {f"{k}{i}": _grade(f"{k}{i}", i) for k in PASSAGES} for i in range(9)
    }
    (order,) = agreement["rankings"]
    assert order["metric"] == metric
    for side, qrels in (("human", human_qrels), ("judge", judge_qrels)):
        means = [
            ir_measures.calc_aggregate([ir_measures.nDCG @ 5], qrels, runs[name])[
                ir_measures.nDCG @ 5
            ]
            for name in ("a", "b")
        ]
        assert list(order[side].values()) == pytest.approx(means)
    tau = stats.kendalltau(list(order["human"].values()), list(order["judge"].values()))
    assert order["kendall_tau"] == pytest.approx(tau.statistic)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "Krippendorff's alpha  nominal" in text
    assert f"{metric}: Kendall's tau " in text
    assert main([*argv, "--format", "markdown"]) == 0
    assert "| Cohen's kappa, linear |" in capsys.readouterr().out
