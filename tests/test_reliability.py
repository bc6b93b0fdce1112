"""A reliability trial's cases (issue 49): re-scored results files, long rankings, empty
and unrelated inputs, the configuration a command read, a bad ``SOURCE_DATE_EPOCH``,
labels too large for their gain, and the testing kit without pytest. Each gives the right
number or a clear error, the same from the command line and from Python. Every expected
number is derived by hand in the test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np
import pytest

import engine
from engine.cli import main


def _samples(count: int) -> list[dict]:
    """q{i} has one relevant document, d{i}."""
    return [{"id": f"q{i}", "input": i, "expected_output": [f"d{i}"]} for i in range(count)]


class TestTestingWithoutPytest:
    """``engine.testing`` imports in a plain script, where pytest is not installed."""

    SCRIPT = """
import sys
sys.modules["pytest"] = None  # as where pytest is not installed: importing it fails
from engine.testing import assert_no_regression
from engine.evaluation.results import read_results
baseline = read_results(sys.argv[1])
assert_no_regression(baseline, sys.argv[1], max_drop=0.0)  # the same results: no drop
try:
    assert_no_regression(read_results(sys.argv[2]), sys.argv[1], max_drop=0.0)
except AssertionError as failed:
    print("regressed:", str(failed).splitlines()[1].strip())
try:
    from engine.testing import MetricConformance
except ImportError as missing:
    print(type(missing).__name__, missing)
"""

    def test_the_gate_runs_in_a_plain_script(self, tmp_path: Path) -> None:
        """Before: ModuleNotFoundError (pytest) on ``from engine.testing import ...``."""
        evaluation = (
            engine.Engine(config={}).dataset(samples=_samples(24)).with_metrics(["retrieval-mrr"])
        )
        evaluation.evaluate({f"q{i}": [f"d{i}"] for i in range(24)}).to_json(tmp_path / "a.json")
        evaluation.evaluate({f"q{i}": ["x", f"d{i}"] for i in range(24)}).to_json(
            tmp_path / "b.json"
        )
        done = subprocess.run(
            [sys.executable, "-c", self.SCRIPT, str(tmp_path / "a.json"), str(tmp_path / "b.json")],
            capture_output=True,
            text=True,
            check=True,
        )
        lines = done.stdout.splitlines()
        # MRR 1 (relevant first) against 1/2 (second): 24 drops of 0.5, significant
        assert lines[0].startswith("regressed: retrieval-mrr: REGRESSED -0.5000")
        assert lines[1] == (
            "MissingDependencyError engine.testing.MetricConformance needs the optional extra "
            "'test' (pytest is missing): pip install 'slotwise[test]'"
        )


@attrs.frozen
class _Counted(engine.MetricBase):
    """1.0 for every sample; records each batch it scores."""

    alias = "counted-test"
    requires = frozenset({"relevance"})
    scored: ClassVar[list[int]] = []

    def score(self, batch):
        self.scored.append(len(batch))
        return np.ones(len(batch))


class TestSourceDateEpoch:
    """A ``SOURCE_DATE_EPOCH`` that names no time is a clear error before scoring."""

    @pytest.mark.parametrize("value", ["abc", "1.5e9", " 86400", "99999999999999999"])
    def test_python_refuses_it_before_scoring(self, value, monkeypatch):
        """Before: a bare ValueError from int(), raised after every metric had scored."""
        monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
        eng = engine.Engine(config={})
        eng.register_metric(_Counted)
        _Counted.scored.clear()
        evaluation = eng.dataset(samples=_samples(2)).with_metrics(["counted-test"])
        with pytest.raises(engine.InputError) as refused:
            evaluation.evaluate({"q0": ["d0"], "q1": ["d1"]})
        assert _Counted.scored == []
        assert (
            f"SOURCE_DATE_EPOCH: must be whole seconds since 1970, as `date +%s` prints, got {value!r}"
            in str(refused.value)
        )

    @pytest.mark.parametrize("value", ["abc", "1.5e9"])
    def test_the_cli_exits_2_before_scoring(self, value, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
        (tmp_path / "data.json").write_text(json.dumps({"samples": _samples(2)}))
        (tmp_path / "out.json").write_text(json.dumps({"q0": ["d0"], "q1": ["d1"]}))
        argv = ["run", "data.json", "--outputs", "out.json", "--metrics", "retrieval-mrr"]
        assert main([*argv, "--format", "json"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "slotwise: error: cannot date the results" in captured.err
        assert "SOURCE_DATE_EPOCH: must be whole seconds since 1970" in captured.err
        assert "internal error" not in captured.err

    def test_whole_seconds_date_the_results(self, monkeypatch):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")  # one day after the epoch
        results = (
            engine.Engine(config={})
            .dataset(samples=_samples(1))
            .with_metrics(["retrieval-mrr"])
            .evaluate({"q0": ["d0"]})
        )
        assert json.loads(results.to_json())["provenance"]["created"] == "1970-01-02T00:00:00+00:00"

    @pytest.mark.parametrize("created", ["yesterday", 86400])
    def test_to_json_refuses_a_created_that_names_no_time(self, created):
        results = (
            engine.Engine(config={})
            .dataset(samples=_samples(1))
            .with_metrics(["retrieval-mrr"])
            .evaluate({"q0": ["d0"]})
        )
        with pytest.raises(engine.InputError, match=r"created: must be .*ISO 8601 text"):
            results.to_json(created=created)


class TestLabelTooLargeForItsGain:
    """A finite label whose gain 2^label overflows a float64 is an error naming the sample,
    the label and where it is; never a silent NA (or an infinite mean)."""

    SAMPLES = (
        {"id": "q0", "expected_output": {"d0": 2000, "d1": 1}},
        {"id": "q1", "expected_output": {"d2": 2}},
    )
    OUTPUTS = {"q0": ["d1", "d0"], "q1": ["d2"]}  # noqa: RUF012

    @pytest.mark.parametrize(
        ("spec", "why"),
        [
            ("retrieval-ndcg-at-k(gain=exponential)", "retrieval-ndcg-at-k's gain=exponential"),
            ("retrieval-dcg-at-k(gain=exponential)", "retrieval-dcg-at-k's gain=exponential"),
            ("retrieval-err-at-k", "retrieval-err-at-k's mapping=exponential"),
        ],
    )
    def test_python_and_the_scorer_name_the_label(self, spec, why, eng):
        """Before: q0 NA (nDCG, ERR: inf / inf) or inf (DCG), with errors=0."""
        evaluation = eng.dataset(samples=list(self.SAMPLES)).with_metrics([spec])
        with pytest.raises(engine.MetricRequirementError) as refused:
            evaluation.evaluate(self.OUTPUTS)
        where = "sample 'q0' /expected_output/d0: label 2000 is too large for " + why
        assert where in str(refused.value)
        with pytest.raises(engine.MetricRequirementError, match="label 2000 is too large"):
            evaluation.scorer().add("q0", self.OUTPUTS["q0"])

    @pytest.mark.parametrize(
        "spec", ["retrieval-ndcg-rel", "retrieval-rndcg", "retrieval-g", "retrieval-ndcg-at-k"]
    )
    def test_linear_gains_that_sum_beyond_a_float64(self, spec, eng):
        """Two labels of 1.5e308: their sum overflows. Before: NaN (Rndcg, G) or 0
        (ndcg_rel), silently."""
        samples = [{"id": "q0", "expected_output": {"d0": 1.5e308, "d1": 1.5e308}}]
        evaluation = eng.dataset(samples=samples).with_metrics([spec])
        with pytest.raises(engine.MetricRequirementError) as refused:
            evaluation.evaluate({"q0": ["d1", "d0"]})
        assert f"sample 'q0' /expected_output/d0: label 1.5e+308 is too large for {spec}'s" in str(
            refused.value
        )

    def test_the_cli_exits_2_naming_the_label(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "qrels").write_text("q0 0 d0 2000\nq0 0 d1 1\nq1 0 d2 2\n")
        (tmp_path / "run").write_text("q0 Q0 d1 1 2.0 r\nq0 Q0 d0 2 1.0 r\nq1 Q0 d2 1 1.0 r\n")
        argv = ["run", "--qrels", "qrels", "--run", "run", "--metrics", "retrieval-err-at-k"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert (
            "sample 'q0' /expected_output/d0: label 2000 is too large for retrieval-err-at-k" in err
        )

    def test_a_max_grade_too_large_is_refused_when_the_metric_is_made(self, eng):
        with pytest.raises(engine.MetricParameterError, match="max_grade must be below 1024"):
            eng.metric("retrieval-err-at-k(max_grade=1024)")

    def test_labels_that_fit_score_exactly(self, eng):
        """Below 1024 the gains fit. One relevant document ranked first: nDCG 1; ERR's
        R_1 = (2^1000 - 1) / 2^1000 = 1 - 2^-1000, which is 1.0 in a float64: ERR 1.
        DCG@1 reads only rank 1 (d1, label 1: 2^1 - 1 = 1), so q0's label 2000 beyond
        the cutoff does not stop it; q1: 2^2 - 1 = 3."""
        fits = [{"id": "q", "expected_output": {"d": 1000}}]
        specs = ["retrieval-ndcg-at-k(gain=exponential)", "retrieval-err-at-k"]
        results = eng.dataset(samples=fits).with_metrics(specs).evaluate({"q": ["d", "x"]})
        assert [results.values(label).tolist() for label in results.labels] == [[1.0], [1.0]]
        dcg = eng.dataset(samples=list(self.SAMPLES)).with_metrics(
            ["retrieval-dcg-at-k(gain=exponential, k=1)"]
        )
        assert dcg.evaluate(self.OUTPUTS).values(dcg.plan.labels[0]).tolist() == [1.0, 3.0]


def _flaky(i: int) -> list[str]:
    """The relevant document first (MRR 1), but the call fails for every i divisible by 4."""
    if i % 4 == 0:
        raise TimeoutError(f"call {i} timed out")
    return [f"d{i}", "x"]


class TestRescoringAResultsFile:
    """Results whose system failed on q0 and q4 of 8 samples, re-scored or read on every
    path that reads a results file: the 2 failures stay errors, so MRR is 1.0 over the 6
    answered samples (never 6/8 = 0.75 over 8, the failures scored as empty rankings)."""

    EXPECTED = (1.0, 6, 2)  # mean, n, errors

    @pytest.fixture
    def files(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
        monkeypatch.chdir(tmp_path)
        (tmp_path / "data.json").write_text(json.dumps({"samples": _samples(8)}))
        evaluation = engine.Engine(config={}).dataset("data.json").with_metrics(["retrieval-mrr"])
        evaluation.run(_flaky, progress=False).to_json(tmp_path / "run.json")
        return {"data": tmp_path / "data.json", "run": tmp_path / "run.json"}

    @staticmethod
    def _seen(summary: dict) -> tuple[float, int, int]:
        stats = summary["retrieval-mrr"]
        return stats["mean"], stats["n"], stats["errors"]

    def test_python(self, files):
        evaluation = engine.Engine(config={}).dataset(files["data"]).with_metrics(["retrieval-mrr"])
        read = engine.read_results(files["run"])
        assert self._seen(read.summary()) == self.EXPECTED
        for outputs in (read, files["run"], str(files["run"])):  # before: a path gave 0.75, 8, 0
            for chunk_size in (None, 2):
                again = evaluation.evaluate(outputs, chunk_size=chunk_size)
                assert self._seen(again.summary()) == self.EXPECTED, (outputs, chunk_size)
                assert list(again.diagnostics.errors) == ["q0", "q4"]
                assert again.diagnostics.missing_outputs == ()
        streamed = engine.Engine(config={}).evaluate_stream(
            ["retrieval-mrr"], dataset=files["data"], outputs=files["run"]
        )
        assert self._seen(streamed.summary()) == self.EXPECTED
        assert streamed.diagnostics.errors == {
            "q0": "TimeoutError: call 0 timed out",
            "q4": "TimeoutError: call 4 timed out",
        }

    @pytest.mark.parametrize("stream", [False, True])
    def test_the_cli_run(self, files, stream, capsys):
        """``slotwise run DATASET --outputs RESULTS.json``; exit 3: something failed."""
        argv = ["run", "data.json", "--outputs", "run.json", "--metrics", "retrieval-mrr"]
        argv += ["--format", "json", "--output", "again.json", *(["--stream"] if stream else [])]
        assert main(argv) == 3
        again = json.loads(Path("again.json").read_text())
        assert self._seen(again["summary"]) == self.EXPECTED
        assert [e["id"] for e in again["diagnostics"]["errors"]] == ["q0", "q4"]

    def test_compare_report_and_the_gate(self, files, capsys):
        """The original against its re-scoring: equal means, equal failures, on 6 pairs:
        can't tell (fewer than the 20 pairs held needs), exit 4, and no regression: 0 with
        --allow-inconclusive (their top 5 half unjudged by design: --allow-unjudged)."""
        argv = ["run", "data.json", "--outputs", "run.json", "--metrics", "retrieval-mrr"]
        assert main([*argv, "--format", "json", "--output", "again.json", "--keep-outputs"]) == 3
        pair = ["run.json", "again.json"]
        gate = ["compare", *pair, "--fail-on-regression", "--max-drop", "0", "--allow-unjudged"]
        assert main(gate) == 4
        assert "at least 20 pairs are needed to hold" in capsys.readouterr().err
        assert main([*gate, "--allow-inconclusive"]) == 0
        row = engine.compare([engine.read_results(p) for p in pair]).row("retrieval-mrr")
        assert (row.mean_a, row.mean_b, row.failed_a, row.failed_b) == (1.0, 1.0, 2, 2)
        assert main(["report", *pair, "--output", "report.html"]) == 0
        page = Path("report.html").read_text()
        assert page.count(">2 of 8 (25.0%)</td>") == 2
        assert "TimeoutError: call 4 timed out" in page  # the sample's view: failed, not empty
        capsys.readouterr()
        assert main(["explain", "again.json", "--sample", "q4", "--dataset", "data.json"]) == 0
        said = "(the system failed: TimeoutError: call 4 timed out; NA, an error row)"
        assert said in capsys.readouterr().out  # before: "no output: scored as an empty ranking"
        from engine.testing import assert_no_regression

        again = engine.read_results("again.json")
        verdict = assert_no_regression(
            again, "run.json", max_drop=0.0, min_judged=None, allow_inconclusive=True
        )
        assert verdict.outcome == "can't tell" and not verdict.of("regressed")


class TestInputsThatScoreNothing:
    """Empty qrels, an empty dataset, an empty run or outputs none of whose ids is in the
    dataset: an error naming the culprit (CLI: exit 2), never an all-NA or all-zero table."""

    @pytest.fixture
    def files(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        monkeypatch.chdir(tmp_path)
        Path("empty.qrels").write_text("")
        Path("comments.qrels").write_text("# no judgement yet\n")
        Path("q.qrels").write_text("q0 0 d0 1\nq1 0 d1 1\n")
        Path("empty.run").write_text("")
        Path("r.run").write_text("q0 Q0 d0 1 2.0 r\nq1 Q0 x 1 1.0 r\n")
        Path("other.run").write_text("z9 Q0 d0 1 2.0 r\n")
        Path("data.json").write_text(json.dumps({"samples": _samples(2)}))
        Path("other.json").write_text(json.dumps({"z9": ["d0"], "z8": ["d1"]}))
        Path("none.json").write_text("{}")
        return tmp_path

    @pytest.mark.parametrize("stream", [[], ["--stream"]])
    @pytest.mark.parametrize(
        ("inputs", "culprit"),
        [
            (["--qrels", "empty.qrels", "--run", "r.run"], "empty.qrels: no qrels line"),
            (["--qrels", "comments.qrels", "--run", "r.run"], "comments.qrels: no qrels line"),
            (["--qrels", "q.qrels", "--run", "empty.run"], "empty.run: no run line"),
            (
                ["--qrels", "q.qrels", "--run", "other.run"],
                "none of the 1 output(s) is for a sample of the dataset: their ids ('z9') are "
                "not in the dataset, whose samples are 'q0', 'q1'",
            ),
            (
                ["data.json", "--outputs", "other.json"],
                "other.json: none of the 2 output(s) is for a sample of the dataset: their "
                "ids ('z8', 'z9') are not in the dataset, whose samples are 'q0', 'q1'",
            ),
            (["data.json", "--outputs", "none.json"], "none.json: no outputs"),
        ],
    )
    def test_the_cli_exits_2_naming_it(self, files, inputs, culprit, stream, capsys):
        """Before: exit 0 with '(0 samples) ... NA', or every sample scored 0.0."""
        argv = ["run", *inputs, "--metrics", "retrieval-mrr", *stream]
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert culprit in captured.err
        assert captured.out == ""

    def test_python_refuses_them_alike(self, files):
        eng = engine.Engine(config={})
        mrr = ["retrieval-mrr"]
        cases = [
            (lambda: eng.evaluate_trec("empty.qrels", "r.run", mrr), "empty.qrels: no qrels"),
            (lambda: eng.evaluate_trec("q.qrels", "empty.run", mrr), "empty.run: no run line"),
            (lambda: eng.evaluate_trec("q.qrels", "other.run", mrr), "their ids ('z9')"),
            (lambda: eng.evaluate_trec({}, {"q0": {"d0": 1.0}}, mrr), "the dataset has no samples"),
            (lambda: eng.dataset({}), "the dataset has no samples"),
            (
                lambda: eng.dataset("data.json").with_metrics(mrr).evaluate("other.json"),
                "other.json: none",
            ),
            (lambda: eng.dataset("data.json").with_metrics(mrr).evaluate({}), "no outputs"),
            (
                lambda: eng.evaluate_stream(mrr, qrels="q.qrels", run="other.run"),
                "other.run: none of the 1 output(s)",
            ),
        ]
        for call, culprit in cases:
            with pytest.raises(engine.InputError) as refused:
                call()
            assert culprit in str(refused.value)

    def test_error_rows_alone_are_something_to_score(self, eng):
        """A run in which every call failed is a result: every sample an error row."""

        def failing(_: object) -> list[str]:
            raise TimeoutError("down")

        evaluation = eng.dataset(samples=_samples(3)).with_metrics(["retrieval-mrr"])
        stats = evaluation.run(failing, progress=False).summary()["retrieval-mrr"]
        assert (stats["n"], stats["errors"]) == (0, 3)

    def test_partial_overlap_is_one_warning(self, files, capsys):
        """q0 scored, q1 missing (an empty ranking: MRR 0), z9 ignored: a warning, said
        once: under the table (table format), or on stderr (other formats). Before: both."""
        Path("some.json").write_text(json.dumps({"q0": ["d0"], "z9": ["d9"]}))
        argv = ["run", "data.json", "--outputs", "some.json", "--metrics", "retrieval-mrr"]
        argv += ["--missing", "empty"]
        said = "1 output(s) for ids not in the dataset were ignored: z9"
        assert main(argv) == 0
        table = capsys.readouterr()
        assert table.out.count(said) == 1 and "z9" not in table.err
        assert main([*argv, "--format", "json"]) == 0
        document = capsys.readouterr()
        assert json.loads(document.out)["summary"]["retrieval-mrr"]["mean"] == 0.5  # (1 + 0) / 2
        assert document.err.count("outputs.unknown_ids") == 1


class TestTheConfigACommandRead:
    """A ``slotwise.yaml`` found upward moves numbers: the command says on stderr which
    file it read and which defaults it set, once, before the tables."""

    CONFIG = "metrics:\n  retrieval:\n    default_k: 3\n  params:\n    retrieval-ndcg-at-k:\n      gain: exponential\n"

    @pytest.fixture
    def folder(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        (tmp_path / "slotwise.yaml").write_text(self.CONFIG)
        work = tmp_path / "project"
        work.mkdir()
        (work / "data.json").write_text(json.dumps({"samples": _samples(2)}))
        (work / "out.json").write_text(json.dumps({"q0": ["d0"], "q1": ["x"]}))
        monkeypatch.chdir(work)
        monkeypatch.delenv("SLOTWISE_CONFIG", raising=False)
        return tmp_path

    ARGV = ("run", "data.json", "--outputs", "out.json", "--metrics", "retrieval-recall-at-k")

    def test_once_before_the_tables(self, folder):
        """Before: nothing on the terminal, even with -v (only the results recorded it)."""
        done = subprocess.run(
            [sys.executable, "-m", "engine.cli", "-v", *self.ARGV],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=True,
        )
        said = (
            f"slotwise: read {folder / 'slotwise.yaml'} (the nearest upward from the working "
            "directory); it sets default_k=3, metrics.params.retrieval-ndcg-at-k.gain=exponential"
        )
        assert done.stdout.count(said) == 1
        assert done.stdout.index(said) < done.stdout.index("retrieval-recall-at-k")

    def test_how_it_was_found(self, folder, monkeypatch, capsys):
        other = folder / "other.yaml"
        other.write_text("datasets: {}\n")
        assert main(["--config", str(other), *self.ARGV]) == 0
        assert f"slotwise: read {other} (--config); it sets no default\n" in capsys.readouterr().err
        monkeypatch.setenv("SLOTWISE_CONFIG", str(other))
        assert main(list(self.ARGV)) == 0
        assert f"read {other} (named by SLOTWISE_CONFIG)" in capsys.readouterr().err

    def test_nothing_when_no_file_was_read(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "data.json").write_text(json.dumps({"samples": _samples(2)}))
        (tmp_path / "out.json").write_text(json.dumps({"q0": ["d0"], "q1": ["x"]}))
        assert main(list(self.ARGV)) == 0
        assert "slotwise: read" not in capsys.readouterr().err

    def test_with_json_logs_it_is_a_json_event(self, folder, capsys):
        assert main(["--log-format", "json", *self.ARGV]) == 0
        events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
        read = [e for e in events if e["event"] == "config.read"]
        assert len(read) == 1
        assert read[0]["path"] == str(folder / "slotwise.yaml")
        assert read[0]["sets"] == {
            "default_k": 3,
            "metrics.params.retrieval-ndcg-at-k.gain": "exponential",
        }


#: Classic metrics of every kind of computation: cut and uncut, running sums, ideal
#: rankings, interpolated precision, ERR's dataset-wide largest label.
LONG_METRICS = [
    "retrieval-ndcg-at-k@10",
    "retrieval-ndcg-at-k(gain=exponential)",
    "retrieval-map",
    "retrieval-mrr",
    "retrieval-recall-at-k@100",
    "retrieval-precision-at-k@10",
    "retrieval-r-precision",
    "retrieval-err-at-k@20",
    "retrieval-auc-pr",
    "retrieval-bpref",
    "retrieval-rbp",
]


def _long_run(rows: int = 300, long: int = 6000) -> tuple[dict, dict]:
    """``rows`` queries of 2-4 graded labels and 20 ranked ids, the first ranking ``long``
    ids with a relevant one deep in it (rank 3000), seeded."""
    rng = np.random.default_rng(49)
    qrels, run = {}, {}
    for q in range(rows):
        judged = [f"{q}-{d}" for d in rng.choice(40, size=int(rng.integers(2, 5)), replace=False)]
        qrels[f"q{q}"] = {d: int(rng.integers(0, 4)) for d in judged}
        ranked = [f"{q}-{d}" for d in rng.permutation(40)[:20]]
        run[f"q{q}"] = ranked
    run["q0"] = run["q0"] + [f"0-x{i}" for i in range(long - 20)]
    run["q0"][2999] = next(iter(qrels["q0"]))  # (its label may be 0: judged, not relevant)
    qrels["q0"][run["q0"][2999]] = 3
    return qrels, run


class TestOneLongRanking:
    """One ranking of 6,000 ids among 300 of 20: the chunk is scored in groups of like
    lengths, so no row pays the long one's length; every value is the same, bit for bit,
    as one batch padded to the longest ranking gives, and pytrec_eval's to 1e-9."""

    @pytest.fixture
    def evaluation(self, eng):
        qrels, _ = _long_run()
        return eng.dataset(qrels).with_metrics(LONG_METRICS)

    def test_no_row_pays_the_long_ones_length(self, evaluation, monkeypatch):
        """Before: one (300, 6000) batch, 1.8 M slots for 11,980 ranked ids."""
        compiled = []
        compile_ = engine.Batch.compile.__func__

        def spy(cls, columns, *args, **kwargs):
            batch = compile_(cls, columns, *args, **kwargs)
            compiled.append(batch.doc_codes.size)
            return batch

        monkeypatch.setattr(engine.Batch, "compile", classmethod(spy))
        for chunk_size in (None, 64):  # chunks of 64 without it: not padded to 6,000 either
            compiled.clear()
            evaluation.evaluate(_long_run()[1], chunk_size=chunk_size)
            assert sum(compiled) <= 2 * (299 * 20 + 6000 + 300), chunk_size

    def test_values_are_one_batchs_bit_for_bit(self, evaluation):
        from engine.evaluation.pipeline import aligned, score_batch
        from engine.io.sources import read_outputs

        _, run = _long_run()
        results = evaluation.evaluate(run)
        joined, _ = aligned(evaluation.dataset.columns, read_outputs(run))
        one = score_batch(engine.Batch.compile(joined), evaluation.plan)
        for label in results.labels:
            assert results.values(label).tobytes() == one.values[label].tobytes(), label
        judged = {k: (int(j.sum()), int(n.sum())) for k, (j, n) in one.judged.items()}
        assert results.diagnostics.judged == judged  # judged@k counted over the groups too
        scorer = evaluation.scorer()
        for sample_id, ranking in run.items():
            scorer.add(sample_id, ranking)
        again = scorer.results()
        for label in results.labels:
            assert again.values(label).tobytes() == one.values[label].tobytes(), label

    def test_pytrec_evals_values(self, evaluation):
        pytrec_eval = pytest.importorskip("pytrec_eval")
        qrels, run = _long_run()
        scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items()}
        names = {
            "retrieval-ndcg-at-k@10": "ndcg_cut_10",
            "retrieval-map": "map",
            "retrieval-mrr": "recip_rank",
            "retrieval-recall-at-k@100": "recall_100",
            "retrieval-precision-at-k@10": "P_10",
            "retrieval-r-precision": "Rprec",
            "retrieval-bpref": "bpref",
        }
        measures = {"ndcg_cut.10", "map", "recip_rank", "recall.100", "P.10", "Rprec", "bpref"}
        expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(scored)
        results = evaluation.evaluate(run)
        for label, name in names.items():
            got = dict(zip(results.sample_ids, results.values(label).tolist(), strict=True))
            for query, values in expected.items():
                assert got[query] == pytest.approx(values[name], abs=1e-9), (label, query)

    def test_the_cli_and_a_stream_give_the_same_bits(self, evaluation, tmp_path):
        _, run = _long_run()
        expected = evaluation.evaluate(run)
        (tmp_path / "q.qrels").write_text(
            "".join(
                f"{q} 0 {d} {g}\n"
                for q, labels in _long_run()[0].items()
                for d, g in labels.items()
            )
        )
        (tmp_path / "r.run").write_text(
            "".join(
                f"{q} Q0 {d} {i} {len(r) - i} t\n"
                for q, r in run.items()
                for i, d in enumerate(r, 1)
            )
        )
        files = ["--qrels", str(tmp_path / "q.qrels"), "--run", str(tmp_path / "r.run")]
        for extra in ([], ["--stream", "--chunk-size", "64"]):
            out = tmp_path / "out.jsonl"
            argv = ["run", *files, "--metrics", ",".join(LONG_METRICS), "--format", "jsonl"]
            assert main([*argv, "--output", str(out), *extra]) == 0
            rows = [json.loads(line) for line in out.read_text().splitlines()]
            for label in expected.labels:
                cli = np.array(
                    [np.nan if r["scores"][label] is None else r["scores"][label] for r in rows]
                )
                assert cli.tobytes() == expected.values(label).tobytes(), (label, extra)

    def test_details_land_on_their_samples(self, eng):
        """answer-containment-at-k explains each value by the rank it matched at."""
        samples = [
            {"id": f"q{i}", "expected_output": {"relevance": [f"d{i}"], "answers": ["gold"]}}
            for i in range(80)
        ]
        outputs = {
            f"q{i}": [
                {"id": f"x{i}-{r}", "text": "gold" if r == i % 3 else "lead"} for r in range(5)
            ]
            for i in range(80)
        }
        outputs["q0"] = [{"id": f"y{r}", "text": "lead"} for r in range(3000)]
        outputs["q0"][3]["text"] = "the gold answer"
        evaluation = eng.dataset(samples=samples).with_metrics(["answer-containment-at-k@5"])
        results = evaluation.evaluate(outputs)
        ranks = [d["matched_rank"] for d in results.details["answer-containment-at-k@5"]]
        assert ranks == [4] + [i % 3 + 1 for i in range(1, 80)]  # 1-based ranks

    def test_a_metric_failing_on_one_group_fails_on_the_chunk(self, eng):
        """As when the chunk is one batch: NA on every sample, the failure recorded."""

        @attrs.frozen
        class Narrow(engine.MetricBase):
            alias = "narrow-test"
            requires = frozenset({"relevance"})

            def score(self, batch):
                if batch.doc_codes.shape[1] > 1000:
                    raise ValueError("too wide")
                return np.ones(len(batch))

        eng.register_metric(Narrow)
        qrels, run = _long_run()
        results = eng.dataset(qrels).with_metrics(["narrow-test"]).evaluate(run)
        assert np.isnan(results.values("narrow-test")).all()
        assert "too wide" in results.diagnostics.metric_errors["narrow-test"]
