"""The regression gate's three verdicts (engine.analysis.verdict): regressed, held, can't
tell, each with its reason. Each case of issue 59 that the old gate passed or failed
silently is here, the judge's against the real stand-in server over HTTP."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
import yaml
from sklearn.metrics import cohen_kappa_score

import engine
from engine.analysis.agreement import judge_agreement, weighted_kappa
from engine.analysis.compare import compare
from engine.analysis.verdict import gate, min_pairs
from engine.cli import main
from engine.testing import Inconclusive, assert_no_regression


def _samples(n: int) -> list[dict[str, Any]]:
    """Query i: d{i} graded 2, e{i} graded 1, x{i} and y{i} judged non-relevant."""
    return [
        {
            "id": f"q{i}",
            "input": f"question {i}",
            "expected_output": {"relevance": {f"d{i}": 2, f"e{i}": 1, f"x{i}": 0, f"y{i}": 0}},
        }
        for i in range(n)
    ]


def _scored(n: int, runs: dict[str, dict[str, list[str]]]) -> dict[str, engine.Results]:
    evaluation = engine.Engine(config={}).dataset(samples=_samples(n))
    return {
        name: evaluation.with_metrics(["retrieval-ndcg-at-k@10"]).evaluate(run)
        for name, run in runs.items()
    }


class TestTooFewPairs:
    def test_the_smallest_pairs_an_exact_test_needs(self) -> None:
        """The exact sign-flip test's smallest two-sided p with n pairs is 2 / 2**n: 2/32
        = 0.0625 > 0.05 but 2/64 = 0.031 <= 0.05; 2/128 = 0.0156 > 0.01, 2/256 <= 0.01."""
        assert min_pairs(0.05) == 6
        assert min_pairs(0.01) == 8
        assert min_pairs(0.0625) == 5  # 2 / 2**5 reaches 0.0625 exactly

    def test_four_questions_cant_tell_not_held(self, tmp_path: Path) -> None:
        """nDCG@10 falls on each of 4 questions (the relevant documents moved from the top
        to ranks 3 and 4): the CI lies wholly below 0, but with 4 pairs the exact test's
        smallest p is 2/16 = 0.125 > 0.05. Before: "no metric regressed", exit 0."""
        good = {f"q{i}": [f"d{i}", f"e{i}", f"x{i}", f"y{i}"] for i in range(4)}
        bad = {f"q{i}": [f"x{i}", f"y{i}", f"d{i}", f"e{i}"] for i in range(4)}
        found = _scored(4, {"good": good, "bad": bad})
        for name, results in found.items():
            results.to_json(tmp_path / f"{name}.json")
        argv = ["compare", str(tmp_path / "good.json"), str(tmp_path / "bad.json")]
        assert main([*argv, "--fail-on-regression"]) == 4
        assert main([*argv, "--fail-on-regression", "--allow-inconclusive"]) == 0
        verdict = gate(compare(list(found.values())))
        (row,) = verdict.verdicts
        assert row.outcome == "can't tell" and row.needed == 6
        assert row.interval is not None and row.interval[1] < 0
        assert "smallest p an exact paired test can reach is 0.125 > alpha=0.05" in row.reason
        with pytest.raises(Inconclusive, match="too few pairs"):
            assert_no_regression(found["bad"], found["good"])


class TestHeldIsNonInferiority:
    def test_held_needs_the_interval_above_the_margin(self) -> None:
        """40 queries, 4 of which rank e above d: 4 pairs differ, so the exact test's
        smallest p is 2/16 = 0.125 (never significant), and the interval reaches below
        -0.01: can't tell, with the minimum detectable effect (z_0.975 + z_0.8) sd /
        sqrt(n) and about how many pairs would resolve it; a margin of 1 holds."""
        n = 40
        good = {f"q{i}": [f"d{i}", f"e{i}"] for i in range(n)}
        worse = {f"q{i}": [f"e{i}", f"d{i}"] if i < 4 else [f"d{i}", f"e{i}"] for i in range(n)}
        found = _scored(n, {"good": good, "worse": worse})
        comparison = compare([found["good"], found["worse"]])
        row = comparison.rows[0]
        differences = found["worse"].values(row.label) - found["good"].values(row.label)
        sd = float(np.std(differences, ddof=1))
        assert row.sd == pytest.approx(sd) and row.varied == 4
        (verdict,) = gate(comparison).verdicts
        assert verdict.outcome == "can't tell"
        z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
        assert verdict.mde == pytest.approx(z * sd / math.sqrt(n))
        assert "only 4 of the 40 pairs differ" in verdict.reason
        # about how many pairs: the change is beyond the margin, so those at which the
        # drop would be significant (normal approximation, one test in Holm's family),
        # with the 6 pairs that differ an exact test needs at 4 of 40 that do: 60
        change = row.difference
        assert change < -0.01
        significant = (NormalDist().inv_cdf(1 - 0.05 / 2) * sd / change) ** 2
        assert verdict.needed == math.ceil(max(significant, 40 * 6 / 4)) == 60
        # a margin wider than the whole interval: held
        (wide,) = gate(comparison, max_drop=1.0).verdicts
        assert wide.outcome == "held" and wide.margin == 1.0

    def test_margins_by_family_and_by_label(self) -> None:
        """Retrieval metrics default to 0.01, set-based to 0.02; LABEL=AMOUNT overrides
        one; a label that is not compared is an input error."""
        graded = [
            {"id": f"q{i}", "expected_output": {"relevance": {f"d{i}": 2, f"e{i}": 1}}}
            for i in range(8)
        ]
        data = engine.Engine(config={}).dataset(samples=graded)
        metrics = ["retrieval-ndcg-at-k@10", "proc-at-k@5"]
        run = {f"q{i}": [f"d{i}", f"e{i}"] for i in range(8)}
        evaluation = data.with_metrics(metrics)
        comparison = compare([evaluation.evaluate(run), evaluation.evaluate(run)])
        assert dict(comparison.families) == {metrics[0]: "retrieval", metrics[1]: "set-based"}
        margins = {v.metric: v.margin for v in gate(comparison).verdicts}
        assert margins == {metrics[0]: 0.01, metrics[1]: 0.02}
        margins = {
            v.metric: v.margin for v in gate(comparison, max_drop={metrics[1]: 0.1}).verdicts
        }
        assert margins == {metrics[0]: 0.01, metrics[1]: 0.1}
        with pytest.raises(engine.InputError, match="not compared"):
            gate(comparison, max_drop={"retrieval-map": 0.1})


class TestIdsThatMatchNothing:
    def test_uuids_are_flagged_and_get_no_verdict(self, tmp_path: Path) -> None:
        """A vector store's uuids: none of the 40 documents in the top 5 has a label, so
        nDCG is 0 [0, 0] with 0 errors. Before: only a log line. Now the summary, print,
        the results file and the gate say so, and the gate gives no verdict on it."""
        n = 20
        good = {f"q{i}": [f"d{i}", f"e{i}"] for i in range(n)}
        uuids = {f"q{i}": [f"5f0c-{i}-a", f"5f0c-{i}-b"] for i in range(n)}
        found = _scored(n, {"good": good, "uuids": uuids})
        flagged = found["uuids"]
        summary = flagged.summary()["retrieval-ndcg-at-k@10"]
        assert summary["mean"] == 0.0 and summary["errors"] == 0
        assert "0 of 40 documents in the top 10 are known to the labels" in summary["unknown_ids"]
        assert "WARNING: the retrieved ids match almost no label" in str(flagged)
        assert "id_key=" in str(flagged)
        document = json.loads(flagged.to_json())
        assert document["diagnostics"]["unknown_ids"] == summary["unknown_ids"]
        assert "unknown_ids" not in found["good"].summary()["retrieval-ndcg-at-k@10"]
        verdict = gate(compare([found["good"], flagged], names=["good", "uuids"]))
        assert verdict.outcome == "can't tell"
        assert [(v.by, v.metric) for v in verdict.verdicts] == [("ids", None)]
        assert verdict.verdicts[0].reason.startswith(
            "uuids: the retrieved ids match almost no label"
        )
        assert [v.outcome for v in verdict.advisory] == ["regressed"]
        found["good"].to_json(tmp_path / "good.json")
        flagged.to_json(tmp_path / "uuids.json")
        argv = ["compare", str(tmp_path / "good.json"), str(tmp_path / "uuids.json")]
        assert main([*argv, "--fail-on-regression"]) == 4
        assert main(["report", *argv[1:], "--output", str(tmp_path / "r.html")]) == 0
        page = (tmp_path / "r.html").read_text()
        assert "uuids: the retrieved ids match almost no label" in page
        assert "Verdict: can&#x27;t tell" in page


class TestAgreement:
    def test_weighted_kappa_is_sklearns(self) -> None:
        """Quadratic-weighted kappa equals scikit-learn's on graded labels, a category
        one side never uses included; undefined (None) when both give one category."""
        rng = np.random.default_rng(7)
        for _ in range(20):
            human = rng.integers(0, 4, 60)
            judge = np.clip(human + rng.integers(-2, 3, 60), 0, 3)
            judge[judge == 1] = 2  # the judge never says 1
            expected = cohen_kappa_score(human, judge, weights="quadratic")
            assert weighted_kappa(human, judge) == pytest.approx(expected, abs=1e-12)
        assert weighted_kappa([2, 2], [2, 2]) is None
        assert weighted_kappa([], []) is None

    def test_human_labels_among_the_judges_are_left_out(self) -> None:
        """Labels the predictions record as a person's are not the judge's: only the
        judge's own labels are compared (here 2 pairs, on which it agrees exactly)."""
        eng = engine.Engine(config={})
        human = eng.dataset(
            samples=[{"id": "q", "expected_output": {"relevance": {"a": 3, "b": 0, "c": 1}}}]
        )
        judged = eng.dataset(
            samples=[
                {
                    "id": "q",
                    "expected_output": {"relevance": {"a": 3, "b": 0, "c": 1}},
                    "metadata": {"label_sources": {"a": "judge", "b": "judge", "c": "human"}},
                }
            ]
        )
        agreement = judge_agreement(human, judged)
        assert (agreement.pairs, agreement.samples, agreement.kappa) == (2, 1, 1.0)


QUESTION = "Which harbour lighthouse guided sailors near Port{i}?"
PASSAGES = {
    # every long word of the question: the stand-in judge grades it 3
    "echo": "Which harbour lighthouse guided sailors near Port{i}? A question, not an answer.",
    # the answer, in other words: the stand-in grades it 0
    "answer": "The beacon on the cape of that town steered mariners past the shoals.",
    "filler": "Bread recipes vary by region and by season.",
}


def _biased_files(tmp_path: Path, n: int, labelled: int) -> dict[str, Path]:
    """n questions; people label the echo and the answer of the first ``labelled`` of
    them relevant (2) and the filler not (0). System a ranks the echo first, b the
    answer: equal by the human labels, b far worse by the stand-in judge's."""
    paths = {name: tmp_path / f"{name}.yaml" for name in ("questions", "human", "predictions")}
    questions = [{"id": f"q{i}", "input": {"question": QUESTION.format(i=i)}} for i in range(n)]
    paths["questions"].write_text(yaml.safe_dump({"samples": questions}))
    human = [
        {**q, "expected_output": {"relevance": {f"echo{i}": 2, f"answer{i}": 2, f"filler{i}": 0}}}
        if i < labelled
        else q
        for i, q in enumerate(questions)
    ]
    paths["human"].write_text(yaml.safe_dump({"samples": human}))
    for system, order in (("a", ("echo", "filler", "answer")), ("b", ("answer", "filler", "echo"))):
        outputs = {
            f"q{i}": {
                "retrieved": [
                    {"id": f"{kind}{i}", "text": PASSAGES[kind].format(i=i)} for kind in order
                ]
            }
            for i in range(n)
        }
        paths[system] = tmp_path / f"{system}.json"
        paths[system].write_text(json.dumps(outputs))
    return paths


def test_relevance_kappa_beside_the_graded_one() -> None:
    """People grade 5 and 1 (a 1-5 scale), the judge 3 and 0 (0-3): the graded kappa
    reads them as given (categories 0, 1, 3, 5); the kappa of relevance (label > 0) has
    people relevant, relevant and the judge relevant, not: observed agreement 1/2, chance
    1 x 1/2 + 0 x 1/2 = 1/2, kappa 0. Both as scikit-learn computes them."""
    eng = engine.Engine(config={})
    human = eng.dataset(samples=[{"id": "q", "expected_output": {"relevance": {"a": 5, "b": 1}}}])
    judged = eng.dataset(samples=[{"id": "q", "expected_output": {"relevance": {"a": 3, "b": 0}}}])
    agreement = judge_agreement(human, judged)
    assert agreement.pairs == 2 and agreement.binary == 0.0
    assert agreement.kappa == pytest.approx(cohen_kappa_score([5, 1], [3, 0], weights="quadratic"))
    assert "(of relevance, label > 0: 0.00)" in agreement.describe()


def _judge(paths: dict[str, Path], url: str, *extra: str) -> int:
    """``slotwise annotate``: the stand-in judge at ``url`` labels the pool of a and b."""
    argv = [
        "annotate", str(paths["questions"]), "--task", "relevance", "--runs",
        str(paths["a"]), str(paths["b"]), "--depth", "3", "--output",
        str(paths["predictions"]), "--annotator", "openai-compatible", "--base-url",
        url, "--model", "stand-in", "--backoff", "0.01", *extra,
    ]  # fmt: skip
    return main(argv)


class TestHumanLabelsDecide:
    def test_a_biased_judge_cannot_overrule_the_human_sample(
        self, server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Two systems equal by the human labels; the stand-in judge (a real server over
        HTTP) favours a. With 40 human-labelled questions of 60, PPI's interval of b - a
        has zero width (every human-labelled difference is 0): can't tell, with that
        reason, not the judge-only test's "regressed", which is shown as advisory beside
        the judge's weighted kappa, below 0.6. Before: exit 1 on the judge alone."""
        server = server_factory()
        paths = _biased_files(tmp_path, n=60, labelled=40)
        assert _judge(paths, server.url) == 0
        metric = "retrieval-ndcg-at-k@3"
        for system in ("a", "b"):
            run = [
                "run", str(paths["predictions"]), "--outputs", str(paths[system]), "--metrics",
                metric, "--format", "json", "--output", str(tmp_path / f"{system}-results.json"),
                "--keep-outputs",
            ]  # fmt: skip
            assert main(run) == 0
        capsys.readouterr()
        argv = [
            "compare", str(tmp_path / "a-results.json"), str(tmp_path / "b-results.json"),
            "--ppi", str(paths["predictions"]), "--human", str(paths["human"]),
            "--fail-on-regression",
        ]  # fmt: skip
        assert main(argv) == 4
        err = capsys.readouterr().err
        assert f"{metric}: CAN'T TELL +0.0000 [+0.0000, +0.0000] (PPI)" in err
        assert "the PPI interval has zero width: the 40 human-labelled differences" in err
        assert f"{metric}: REGRESSED" in err and "(paired test on the judge's labels)" in err
        assert "but the judge cannot decide alone" in err
        assert "judge agreement with the human sample: weighted kappa" in err
        assert "(of relevance, label > 0: " in err
        assert "on 120 pairs of 40 samples" in err  # echo, answer, filler of each
        human = engine.Engine(config={}).dataset(paths["human"])
        agreement = judge_agreement(human, engine.Engine(config={}).dataset(paths["predictions"]))
        # human 2, 2, 0 against the judge's 3, 0, 0 on every question, by hand: categories
        # 0, 2, 3; observed (2,3) 40, (2,0) 40, (0,0) 40
        expected = cohen_kappa_score([2, 2, 0] * 40, [3, 0, 0] * 40, weights="quadratic")
        assert agreement.kappa == pytest.approx(expected) and not agreement.sufficient

    def test_too_few_human_labels_cant_tell(self, server_factory: Any, tmp_path: Path) -> None:
        """10 human-labelled questions (< 20): PPI can't estimate the judge's error."""
        server = server_factory()
        paths = _biased_files(tmp_path, n=30, labelled=10)
        assert _judge(paths, server.url) == 0
        eng = engine.Engine(config={})
        predictions = eng.dataset(paths["predictions"])
        evaluation = predictions.with_metrics(["retrieval-ndcg-at-k@3"])
        a = evaluation.evaluate(paths["a"], keep_outputs=True)
        b = evaluation.evaluate(paths["b"], keep_outputs=True)
        human = eng.dataset(paths["human"]).with_metrics(["retrieval-ndcg-at-k@3"])
        report = human.ppi(b, predictions, baseline=a)
        with pytest.raises(Inconclusive, match="only 10 human-labelled samples"):
            assert_no_regression(b, a, ppi=report)


def test_a_third_of_the_labels_missing_cant_tell(
    server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stand-in answers about a third of the judge prompts unreadably; annotate
    allowed to go on (--max-unlabelled 0.5) leaves those pairs unlabelled, so each system's
    judged@3 is about 1 - 2/3 x 0.31 = 0.79 (its filler labelled by a person): can't tell,
    naming the system and its unjudged count.
    Before: the unlabelled pairs counted as non-relevant and the gate passed."""
    server = server_factory("--unreadable", "0.31")
    paths = _biased_files(tmp_path, n=30, labelled=0)
    # a person labelled each filler (so no question is left with no label at all)
    questions = yaml.safe_load(paths["questions"].read_text())["samples"]
    for i, sample in enumerate(questions):
        sample["expected_output"] = {"relevance": {f"filler{i}": 0}}
    paths["questions"].write_text(yaml.safe_dump({"samples": questions}))
    assert _judge(paths, server.url, "--holes", "--max-unlabelled", "0.5") == 0
    for system in ("a", "b"):
        run = [
            "run", str(paths["predictions"]), "--outputs", str(paths[system]), "--metrics",
            "retrieval-precision-at-k@3", "--format", "json", "--output",
            str(tmp_path / f"{system}.results.json"),
        ]  # fmt: skip
        assert main(run) == 0
    found = [engine.read_results(tmp_path / f"{s}.results.json") for s in ("a", "b")]
    shares = [r.diagnostics.judged_at(3) for r in found]
    assert all(s is not None and 0.5 < s < 0.9 for s in shares), shares
    capsys.readouterr()
    argv = ["compare", *(str(tmp_path / f"{s}.results.json") for s in ("a", "b"))]
    assert main([*argv, "--fail-on-regression"]) == 4
    err = capsys.readouterr().err
    judged, documents = found[0].diagnostics.judged[3]
    assert (
        f"a.results: judged@3 {judged / documents:.3f} ({documents - judged} of {documents} unjudged) < 0.9"
        in err
    )
