"""The Python API as a plain script, the REPL and a harness meet it: printable results and
tables, short reprs, source plugins' Loaded, TREC-shaped inputs from ir_measures, a
pinnable provenance.created, and log events as structured records."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import ir_measures
import pandas as pd
import pytest

import engine
from engine.evaluation.source_plugins import Loaded

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"
QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
SAMPLES = [{"id": f"q{i}", "expected_output": [f"d{i}"]} for i in range(300)]
RUN = {f"q{i}": [f"x{i}", f"d{i}"] for i in range(300)}


@pytest.fixture
def results(eng):
    return eng.dataset(samples=SAMPLES, name="tiny").with_metrics(["retrieval-mrr"]).evaluate(RUN)


class TestPrinting:
    def test_repr_is_one_short_line(self, results, eng):
        """repr() of Results, Evaluation and Dataset: one line, not the Arrow data."""
        assert repr(results) == "<Results tiny: 300 samples; retrieval-mrr=0.5000>"
        dataset = eng.dataset(samples=SAMPLES, name="tiny")
        assert repr(dataset) == "<Dataset tiny: 300 samples>"
        evaluation = dataset.with_metrics(["retrieval-mrr", "retrieval-ndcg-at-k@10"])
        assert str(evaluation) == (
            "<Evaluation of tiny (300 samples): retrieval-mrr, retrieval-ndcg-at-k@10>"
        )

    def test_print_shows_the_table(self, results):
        """print(results) and print(results.table()) show the rendered summary, as does
        the table's repr at the REPL prompt (MRR of rank 2 everywhere: 0.5)."""
        text = str(results)
        assert text.splitlines()[0].strip() == "tiny (300 samples)"
        row = next(line for line in text.splitlines() if "retrieval-mrr" in line)
        assert row.split("│")[1:6] == [
            " retrieval-mrr ",
            " 0.5000 ",
            " [0.5000, 0.5000] ",
            " 300 ",
            "  0 ",
        ]
        assert str(results.table()) == text == repr(results.table())
        assert "object at 0x" not in text

    def test_python_script_prints_the_table(self, tmp_path):
        """A plain script's print(results.table()) writes the table to stdout."""
        script = textwrap.dedent(
            """
            import engine
            samples = [{"id": "q1", "expected_output": ["a"]}]
            results = engine.Engine(config={}).dataset(samples=samples).with_metrics(
                ["retrieval-mrr"]
            ).evaluate({"q1": ["b", "a"]})
            print(results.table())
            """
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "│ retrieval-mrr │ 0.5000 │" in done.stdout

    def test_all_na_metric_says_why(self, eng):
        """A metric NA on every sample gets a note under the table: here every sample
        failed; answer-less data would quote the metric's documented NA condition."""
        evaluation = eng.dataset(samples=SAMPLES[:3]).with_metrics(["retrieval-mrr"])

        def failing(_):
            raise RuntimeError("down")

        results = evaluation.run(failing, progress=False)
        assert results.na_notes() == [
            "retrieval-mrr is NA on every sample; every sample failed (see the errors)"
        ]
        assert results.na_notes()[0] in str(results)


class TestInputs:
    def test_loaded_from_a_source_plugin(self, eng):
        """engine.dataset(Loaded(...)) takes the samples, name and outputs a plugin read."""
        loaded = Loaded(samples=SAMPLES[:2], outputs={"q0": ["d0"], "q1": ["x", "d1"]}, name="p")
        dataset = eng.dataset(loaded)
        assert (dataset.name, len(dataset)) == ("p", 2)
        mrr = dataset.with_metrics(["retrieval-mrr"]).evaluate(dataset.outputs)
        assert mrr.values("retrieval-mrr").tolist() == [1.0, 0.5]

    @pytest.mark.parametrize(
        "shape", ["namedtuples", "iterators", "frames"], ids=["list", "iterator", "DataFrame"]
    )
    def test_ir_measures_shapes_give_ir_measures_numbers(self, eng, shape):
        """evaluate_trec takes ir_measures' Qrel/ScoredDoc tuples (a list, or the iterators
        its readers return) and frames with its columns; on trec_eval's test files the
        means equal ir_measures' own (its pytrec_eval provider)."""
        qrels = list(ir_measures.read_trec_qrels(str(DATA / "qrels.test")))
        run = list(ir_measures.read_trec_run(str(DATA / "results.test")))
        given = {
            "namedtuples": (qrels, run),
            "iterators": (iter(qrels), iter(run)),
            "frames": (pd.DataFrame(qrels), pd.DataFrame(run)),
        }[shape]
        measures = {
            "retrieval-map": ir_measures.AP,
            "retrieval-ndcg-at-k@10": ir_measures.nDCG @ 10,
        }
        expected = ir_measures.calc_aggregate(list(measures.values()), qrels, run)
        found = eng.evaluate_trec(*given, list(measures)).summary()
        for label, measure in measures.items():
            assert found[label]["mean"] == pytest.approx(expected[measure], abs=1e-12)

    def test_unknown_shape_is_a_slotwise_error(self, eng):
        with pytest.raises(engine.InputError, match="cannot read int as qrels"):
            eng.evaluate_trec(5, {"q": {"d": 1.0}}, ["retrieval-mrr"])
        with pytest.raises(engine.InputError, match="cannot read float as run"):
            eng.evaluate_trec({"q": {"d": 1}}, 2.5, ["retrieval-mrr"])


class TestCreated:
    def test_parameter_pins_created(self, results):
        """to_json(created=...) pins provenance.created: two runs, one document."""
        again = engine.Engine(config={}).dataset(samples=SAMPLES, name="tiny")
        other = again.with_metrics(["retrieval-mrr"]).evaluate(RUN)
        when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        first, second = results.to_json(created=when), other.to_json(created=when)
        assert first == second
        assert json.loads(first)["provenance"]["created"] == "2026-01-02T03:04:05+00:00"

    def test_source_date_epoch(self, eng, monkeypatch):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")
        evaluation = eng.dataset(samples=SAMPLES[:2]).with_metrics(["retrieval-mrr"])
        found = evaluation.evaluate(RUN)
        assert found.provenance["created"] == "1970-01-02T00:00:00+00:00"
        assert found.to_json() == evaluation.evaluate(RUN).to_json()


def test_events_are_structured_records(eng, caplog):
    """A harness's handler gets each event as a record with its name and fields as
    attributes, no timestamp or level rendered into the message, even when the harness
    configured structlog for itself."""
    import structlog

    structlog.configure(processors=[structlog.processors.JSONRenderer()])
    try:
        with caplog.at_level(logging.INFO, logger="slotwise"):
            evaluation = eng.dataset(samples=SAMPLES[:2]).with_metrics(["retrieval-mrr"])
            evaluation.evaluate({"q0": ["d0", "d0"], "q1": ["d1"]})
    finally:
        structlog.reset_defaults()
    (dropped,) = [
        r for r in caplog.records if getattr(r, "event", None) == "outputs.duplicates_dropped"
    ]
    assert dropped.levelno == logging.WARNING and dropped.name == "slotwise"
    assert dropped.fields == {"samples": 1, "dropped": 1, "examples": ["q0"]}
    assert (dropped.samples, dropped.dropped) == (1, 1)
    assert dropped.getMessage() == "outputs.duplicates_dropped samples=1 dropped=1 examples=['q0']"
    (finished,) = [r for r in caplog.records if getattr(r, "event", None) == "evaluation.finished"]
    assert finished.fields["samples"] == 2 and finished.levelno == logging.INFO
