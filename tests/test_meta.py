"""Meta-evaluation (engine.meta, engine.meta_cli): correlations equal scipy's, NA rules,
UDCG_theta fitting recovers a known positional model, gamma calibration, the CLI handlers."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import engine
from engine.analysis.meta import (
    GAMMA_GRID,
    MissingDependencyError,
    bootstrap_ci,
    calibrate,
    context_features,
    contexts_to_raw,
    correlate,
    fit_udcg_theta,
    per_question,
    question_groups,
    read_contexts,
    split_questions,
    write_theta,
)
from engine.cli.meta import add
from engine.evaluation.metric import metric_label
from engine.testing import make_batch
from metrics_plugins.utility import UDCG, read_theta

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "utility" / "contexts.json"


def one_group(x, y):
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    codes = np.zeros(len(x), dtype=np.int64)
    return (
        per_question(x, y, codes)[0],
        per_question(x, y, codes, statistic="kendall")[0],
    )


class TestStatistics:
    def test_hand_computed_case(self):
        """x = 1..4, outcomes (0, 2, 1, 2): rho = 3/sqrt(22.5), tau-b = 3/sqrt(30)."""
        rho, tau = one_group([1, 2, 3, 4], [0, 2, 1, 2])
        assert rho == pytest.approx(3 / math.sqrt(22.5), abs=1e-12)
        assert tau == pytest.approx(3 / math.sqrt(30), abs=1e-12)

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(
            st.tuples(st.integers(0, 4), st.sampled_from([0.0, 1.0, 2.0])), min_size=2, max_size=12
        )
    )
    def test_equal_scipy(self, pairs):
        """Per question, the values are scipy.stats.spearmanr / kendalltau on the same vectors."""
        x = np.array([p[0] for p in pairs], dtype=float)
        y = np.array([p[1] for p in pairs])
        rho, tau = one_group(x, y)
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            assert math.isnan(rho) and math.isnan(tau)
        else:
            assert rho == stats.spearmanr(x, y).statistic
            assert tau == stats.kendalltau(x, y).statistic

    def test_groups_are_independent(self):
        """Each question's value uses only its own contexts, whatever the sample order."""
        codes = np.array([1, 0, 1, 0, 1, 0], dtype=np.int64)
        x = np.array([3.0, 1.0, 2.0, 2.0, 1.0, 3.0])
        y = np.array([2.0, 0.0, 1.0, 1.0, 0.0, 2.0])
        np.testing.assert_allclose(per_question(x, y, codes), [1.0, 1.0])
        np.testing.assert_allclose(per_question(-x, y, codes), [-1.0, -1.0])

    @pytest.mark.parametrize(
        ("x", "y"),
        [([1, 2, 3], [2, 2, 2]), ([5, 5, 5], [0, 1, 2]), ([1], [2]), ([1, np.nan, 3], [0, 1, 0])],
    )
    def test_na_cases(self, x, y):
        """Constant outcomes, constant scores, one context (also after dropping NA scores): NA."""
        rho, tau = one_group(x, y)
        assert math.isnan(rho) and math.isnan(tau)

    def test_bootstrap_is_seeded_and_brackets_the_mean(self):
        """Same seed, same CI; the CI contains the mean; NaNs are ignored; all-NA gives NaNs."""
        values = np.array([0.1, 0.5, np.nan, 0.9, 0.3, 0.7])
        ci = bootstrap_ci(values, seed=3)
        assert ci == bootstrap_ci(values, seed=3)
        assert ci[0] < 0.5 < ci[1]
        assert all(math.isnan(v) for v in bootstrap_ci(np.array([np.nan])))


def meta_sample(question, context, utility, outcome, **extra):
    return {
        "id": f"{question}/{context}",
        "expected_output": {"utility": utility, **extra},
        "metadata": {"question": question, "outcome": outcome},
    }


#: Two questions. q1: the context with the answer is correct, the distracted one wrong.
SMALL = [
    meta_sample("q1", "a", {"r": 0.9, "d": -0.8}, "correct", relevance=["r"]),
    meta_sample("q1", "b", {"r": 0.9, "d": -0.8}, "abstained", relevance=["r"]),
    meta_sample("q1", "c", {"r": 0.9, "d": -0.8}, "wrong", relevance=["r"]),
    meta_sample("q2", "a", {"s": 0.5}, "correct", relevance=["s"]),
    meta_sample("q2", "b", {"s": 0.5}, "correct", relevance=["s"]),
]
SMALL_OUTPUTS = {
    "q1/a": ["r", "x"],
    "q1/b": ["x", "y"],
    "q1/c": ["d", "y"],
    "q2/a": ["s"],
    "q2/b": ["y"],
}


class TestCorrelate:
    def test_ranks_metrics_and_counts_na(self, eng):
        """udcg orders q1 perfectly, hit-at-k ties b and c; q2 (all correct) is NA for both."""
        dataset = eng.dataset(samples=SMALL)
        report = correlate(dataset, SMALL_OUTPUTS, ["retrieval-hit-at-k", "udcg"], resamples=50)
        assert [r.label for r in report.rows] == ["udcg", "retrieval-hit-at-k"]
        udcg, hit = report.rows
        assert (udcg.spearman, udcg.kendall, udcg.n, udcg.na) == (1.0, 1.0, 1, 1)
        assert hit.spearman == pytest.approx(stats.spearmanr([1, 0, 0], [2, 1, 0]).statistic)
        assert report.questions == 2 and report.contexts == 5
        document = json.loads(report.to_json())
        assert document["metrics"][0]["rank"] == 1 and document["metrics"][0]["na"] == 1

    def test_lower_is_better_metrics_are_negated(self, eng):
        """A metric with higher_is_better = False is oriented before correlating."""

        @attrs.frozen
        class NegUDCG(UDCG):
            alias = "neg-udcg"
            higher_is_better = False

            def score(self, batch):
                return -super().score(batch)

        eng.register_metric(NegUDCG)
        report = correlate(eng.dataset(samples=SMALL), SMALL_OUTPUTS, ["neg-udcg"], resamples=10)
        assert report.rows[0].spearman == pytest.approx(1.0)

    def test_outcomes_may_be_numbers(self, eng):
        """A numeric outcome orders contexts like the labels do."""
        samples = [
            meta_sample("q", str(i), {"r": 0.9}, outcome) for i, outcome in enumerate([0.1, 0.7])
        ]
        outputs = {"q/0": ["x"], "q/1": ["r"]}
        report = correlate(eng.dataset(samples=samples), outputs, ["udcg"], resamples=10)
        assert report.rows[0].spearman == pytest.approx(1.0)

    @pytest.mark.parametrize(
        ("metadata", "pointer"),
        [
            ({"outcome": "correct"}, "/metadata/question"),
            ({"question": "q"}, "/metadata/outcome"),
            ({"question": "q", "outcome": "maybe"}, "/metadata/outcome"),
        ],
    )
    def test_missing_metadata_is_an_input_error(self, eng, metadata, pointer):
        """Samples need metadata.question and a valid metadata.outcome; the error names them."""
        dataset = eng.dataset(samples=[{"id": "s1", "metadata": metadata}])
        with pytest.raises(engine.InputError) as caught:
            question_groups(dataset)
        assert caught.value.problems[0].sample_id == "s1"
        assert caught.value.problems[0].pointer == pointer


def positional_dataset(eng, rng, questions, contexts, k, score_of):
    """Synthetic meta-evaluation data: random utilities, outcome = order of score_of(u)."""
    samples, outputs, truth = [], {}, []
    for q in range(questions):
        pool = {
            f"p{i}": float((1 if rng.random() < 0.4 else -1) * rng.uniform(0.05, 1.0))
            for i in range(3 * k)
        }
        for c in range(contexts):
            ranking = list(rng.choice(sorted(pool), size=k, replace=False))
            u = np.array([pool[p] for p in ranking])
            s = score_of(u)
            truth.append(s)
            sample = meta_sample(f"q{q}", str(c), pool, float(s))
            samples.append(sample)
            outputs[sample["id"]] = ranking
    return eng.dataset(samples=samples), outputs, np.array(truth)


ALPHA = np.array([1.0, 0.4, 0.2, 0.5, 0.9])
BETA = np.array([0.8, 0.3, 0.2, 0.3, 0.6])


class TestFit:
    def test_recovers_a_positional_model(self, eng, tmp_path):
        """On data generated from sigmoid-free alpha·u⁺ + beta·u⁻, the fitted theta scores
        the contexts in (nearly) the generator's order: Spearman > 0.95 over all contexts,
        and the weight vector points the same way (cosine > 0.9)."""
        rng = np.random.default_rng(11)

        def score_of(u):
            return float(ALPHA @ np.maximum(u, 0) + BETA @ np.minimum(u, 0))

        dataset, outputs, truth = positional_dataset(eng, rng, 60, 8, 5, score_of)
        theta = fit_udcg_theta(dataset, outputs, 5)
        assert theta.k == 5 and theta.provenance["converged"]
        assert theta.provenance["questions"] == 60
        features = context_features(make_batch([dict(s) for s in _raw(dataset)], outputs), 5)
        fitted = features @ np.array([*theta.alpha, *theta.beta])
        assert stats.spearmanr(fitted, truth).statistic > 0.95
        w, true = np.array([*theta.alpha, *theta.beta]), np.concatenate([ALPHA, BETA])
        assert w @ true / (np.linalg.norm(w) * np.linalg.norm(true)) > 0.9

        path = tmp_path / "theta.json"
        write_theta(theta, path)
        assert read_theta(path) == theta
        metric = eng.metric("udcg-theta", params_file=str(path))
        scores = dataset.with_metrics([metric]).evaluate(outputs).scores[metric_label(metric)]
        np.testing.assert_allclose(scores, 1 / (1 + np.exp(-fitted)), atol=1e-12)

    def test_no_pairs_is_an_input_error(self, eng):
        """Questions whose contexts all share an outcome give nothing to fit."""
        samples = [meta_sample("q", str(i), {"r": 0.5}, "correct") for i in range(3)]
        outputs = {f"q/{i}": ["r"] for i in range(3)}
        with pytest.raises(engine.InputError, match="different outcomes"):
            fit_udcg_theta(eng.dataset(samples=samples), outputs, 2)

    def test_correlate_and_calibrate_need_only_the_core(self, monkeypatch, capsys):
        """Without scikit-learn (the `meta` extra), `slotwise correlate` and `calibrate`
        run: only fitting UDCG_theta needs it (the README's table of extras)."""
        from engine.cli import main

        for name in ["sklearn", *(m for m in sys.modules if m.startswith("sklearn."))]:
            monkeypatch.setitem(sys.modules, name, None)  # even if imported before: unimportable
        metrics = ["--metrics", "udcg,retrieval-ndcg-at-k"]
        assert main(["correlate", str(EXAMPLE), *metrics]) == 0
        assert main(["calibrate", "udcg", str(EXAMPLE), "--seed", "0"]) == 0
        assert "best gamma" in capsys.readouterr().out

    def test_missing_scikit_learn_names_the_extra(self, eng, monkeypatch):
        """Without scikit-learn, fitting says how to install it."""
        monkeypatch.setitem(sys.modules, "sklearn.svm", None)
        with pytest.raises(MissingDependencyError, match=r"slotwise\[meta\]"):
            fit_udcg_theta(eng.dataset(samples=SMALL), SMALL_OUTPUTS, 2)


def _raw(dataset):
    return [
        {
            "id": s.id,
            "expected_output": {"utility": dict(s.utility or {})},
            "metadata": dict(s.metadata),
        }
        for s in dataset.samples
    ]


class TestCalibrate:
    def test_finds_the_generating_gamma(self, eng):
        """Outcomes ordered by mean u⁺ + 0.6 mean u⁻: the best gamma is near 0.6 and the
        held-out correlation is near 1."""
        rng = np.random.default_rng(5)

        def score_of(u):
            return float(np.maximum(u, 0).mean() + 0.6 * np.minimum(u, 0).mean())

        dataset, outputs, _ = positional_dataset(eng, rng, 40, 8, 5, score_of)
        result = calibrate(dataset, outputs, "udcg", "gamma", seed=1, resamples=100)
        assert result.grid == GAMMA_GRID and len(result.train_spearman) == 21
        assert 0.45 <= result.best <= 0.75
        assert result.test.spearman > 0.95
        assert len(result.test_questions) == 12 and len(result.train_questions) == 28
        assert result.test.n + result.test.na == 12
        assert json.loads(result.to_json())["best"] == result.best

    def test_split_is_seeded_and_disjoint(self):
        """split_questions: same seed, same split; disjoint; round(fraction * n) held out."""
        keys = [f"q{i}" for i in range(10)]
        train, test = split_questions(keys, 0.3, seed=4)
        assert (train, test) == split_questions(keys, 0.3, seed=4)
        assert len(test) == 3 and not set(train) & set(test) and set(train) | set(test) == set(keys)
        with pytest.raises(engine.InputError):
            split_questions(keys, 1.0)
        with pytest.raises(engine.InputError):
            split_questions(["only"], 0.3)


class TestContextsFile:
    def test_converter(self):
        """One sample per (question, context): id q/c, labels copied, k = context length."""
        records = [
            {
                "id": "q1",
                "question": "Why?",
                "utility": {"a": 0.5},
                "relevance": ["a"],
                "texts": {"a": "A text"},
                "contexts": [{"id": "c1", "passages": ["a", "b"], "outcome": "correct"}],
            }
        ]
        samples, outputs = contexts_to_raw(records)
        assert samples == [
            {
                "id": "q1/c1",
                "input": {"question": "Why?"},
                "metadata": {"question": "q1", "outcome": "correct", "k": 2},
                "expected_output": {"relevance": ["a"], "utility": {"a": 0.5}},
            }
        ]
        assert outputs == {"q1/c1": [{"id": "a", "text": "A text"}, {"id": "b"}]}

    def test_bad_records(self):
        """Records without a contexts list, or contexts without passages, are InputErrors."""
        with pytest.raises(engine.InputError, match="contexts list"):
            contexts_to_raw([{"id": "q"}])
        with pytest.raises(engine.InputError, match="passages"):
            contexts_to_raw([{"id": "q", "contexts": [{"outcome": "wrong"}]}])

    def test_example_file(self):
        """The shipped example: 12 questions x 5 contexts of 5 passages."""
        dataset, outputs = read_contexts(EXAMPLE)
        assert len(dataset) == 60 and len(question_groups(dataset).keys) == 12
        assert all(len(o) == 5 for o in outputs.values())


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="slotwise")
    parser.add_argument("--config", type=Path)
    handlers = add(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return handlers[args.command](args)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    samples, outputs = contexts_to_raw(json.loads(EXAMPLE.read_text())["questions"])
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    return tmp_path


class TestCLI:
    def test_add_commands_returns_the_handlers(self):
        """Four subcommands, each with a callable handler."""
        parser = argparse.ArgumentParser()
        handlers = add(parser.add_subparsers())
        assert set(handlers) == {"correlate", "fit", "calibrate", "import-udcg-reference"}

    def test_correlate_json(self, project, capsys):
        """correlate DATASET --outputs F --metrics a,b --format json ranks the metrics."""
        code = run_cli(
            [
                "correlate", "data.jsonl", "--outputs", "outputs.json",
                "--metrics", "retrieval-mrr,udcg(gamma=0.5)", "--format", "json",
                "--resamples", "50",
            ]
        )  # fmt: skip
        assert code == 0
        document = json.loads(capsys.readouterr().out)
        assert document["questions"] == 12 and document["contexts"] == 60
        assert {m["label"] for m in document["metrics"]} == {"retrieval-mrr", "udcg(gamma=0.5)"}
        assert document["metrics"][0]["spearman"] >= document["metrics"][1]["spearman"]

    def test_correlate_contexts_file_table(self, capsys):
        """Without --outputs the dataset argument is a contexts file; table output."""
        assert run_cli(["correlate", str(EXAMPLE), "--metrics", "udcg", "--resamples", "20"]) == 0
        out = capsys.readouterr().out
        assert "udcg" in out and "spearman" in out and "12 questions" in out

    def test_fit_then_score(self, project, capsys):
        """fit writes a parameter file that udcg-theta loads with the fitted k."""
        code = run_cli(
            ["fit", "udcg-theta", "data.jsonl", "--outputs", "outputs.json", "--k", "5",
             "--output", "theta.json"]
        )  # fmt: skip
        assert code == 0 and "wrote theta.json" in capsys.readouterr().out
        assert read_theta(project / "theta.json").k == 5
        code = run_cli(
            ["correlate", "data.jsonl", "--outputs", "outputs.json", "--resamples", "20",
             "--metrics", "udcg-theta(params_file='theta.json')"]
        )  # fmt: skip
        assert code == 0

    def test_calibrate(self, project, capsys):
        """calibrate prints the grid, the best gamma and the held-out correlation."""
        code = run_cli(
            ["calibrate", "udcg", "--param", "gamma", "data.jsonl", "--outputs", "outputs.json",
             "--seed", "2", "--test-fraction", "0.25", "--resamples", "20", "--format", "json"]
        )  # fmt: skip
        assert code == 0
        document = json.loads(capsys.readouterr().out)
        assert len(document["test_questions"]) == 3 and document["param"] == "gamma"
        assert document["best"] in GAMMA_GRID

    def test_import_reference(self, reference_data, tmp_path, capsys, eng):
        """import-udcg-reference writes a dataset and outputs that reproduce the stored udcg."""
        source = reference_data / "udcg" / "udcg_dataset_with_udcg.json"
        code = run_cli(
            ["import-udcg-reference", str(source), "--dataset-output", str(tmp_path / "d.json"),
             "--outputs-output", str(tmp_path / "o.json")]
        )  # fmt: skip
        assert code == 0
        results = (
            eng.dataset(tmp_path / "d.json")
            .with_metrics(["udcg(gamma=0.333)"])
            .evaluate(tmp_path / "o.json")
        )
        stored = [item["udcg"][next(iter(item["udcg"]))] for item in json.loads(source.read_text())]
        assert results.scores["udcg(gamma=0.333)"].tolist() == stored

    def test_bad_input_raises_slotwise_errors(self, project):
        """A dataset that is not a contexts file, or lacks outcomes, raises InputError."""
        with pytest.raises(engine.InputError, match="--outputs"):
            run_cli(["correlate", "data.jsonl", "--metrics", "udcg"])
        Path("plain.json").write_text(json.dumps({"samples": [{"id": "a"}]}))
        Path("o.json").write_text(json.dumps({"a": ["x"]}))
        with pytest.raises(engine.InputError, match=r"metadata\.question"):
            run_cli(["correlate", "plain.json", "--outputs", "o.json", "--metrics", "udcg"])
        with pytest.raises(engine.InputError, match="--grid"):
            run_cli(["calibrate", "udcg", "--param", "k", "data.jsonl", "--outputs", "o.json"])
