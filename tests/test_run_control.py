"""Running a system and keeping what it gave: per-call timeouts, cancelled calls, Ctrl-C,
outputs kept when labels are missing, samples without an output never scored quietly,
and print(results) showing every note the CLI prints."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from engine.errors import MetricRequirementError

SAMPLES = [
    {"id": f"q{i}", "input": {"question": f"question {i}"}, "expected_output": [f"d{i}"]}
    for i in range(12)
]
HANGS = {"q3", "q7"}


def number(value: dict) -> int:
    return int(value["question"].split()[-1])


@pytest.fixture
def release():
    """An event the hanging calls wait on, set when the test ends."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def evaluation(eng):
    return eng.dataset(samples=SAMPLES, name="tiny").with_metrics(["retrieval-mrr"])


class TestTimeout:
    def test_a_hanging_call_is_an_error_row(self, evaluation, release):
        """A call still running after ``timeout`` is an error row with its reason; the
        run goes on and ends promptly, the other values as without it."""

        def system(value):
            if f"q{number(value)}" in HANGS:
                release.wait(60)
            return ["x", f"d{number(value)}"]

        started = time.monotonic()
        results = evaluation.run(system, timeout=0.3, concurrency=2, progress=False)
        assert time.monotonic() - started < 5
        values = results.values("retrieval-mrr")
        assert [i for i, v in zip(results.sample_ids, values, strict=True) if math.isnan(v)] == [
            "q3",
            "q7",
        ]
        assert all(
            v == 0.5 for i, v in zip(results.sample_ids, values, strict=True) if i not in HANGS
        )
        assert results.diagnostics.errors == dict.fromkeys(
            ["q3", "q7"], "TimeoutError: no output within timeout=0.3 s"
        )
        assert results.summary()["retrieval-mrr"]["errors"] == 2

    def test_async_timeout_and_cancelled_inner_task(self, evaluation):
        """In arun, a coroutine past its timeout and one whose inner task is cancelled are
        error rows; the other outputs are kept."""

        async def system(value):
            i = number(value)
            if i == 3:
                await asyncio.sleep(60)
            if i == 5:
                inner = asyncio.ensure_future(asyncio.sleep(60))
                asyncio.get_running_loop().call_later(0.01, inner.cancel)
                await inner
            return ["x", f"d{i}"]

        results = asyncio.run(evaluation.arun(system, timeout=0.3, progress=False))
        assert results.diagnostics.errors == {
            "q3": "TimeoutError: no output within timeout=0.3 s",
            "q5": "CancelledError: the call was cancelled",
        }
        assert results.summary()["retrieval-mrr"]["n"] == 10
        same = evaluation.run(system, timeout=0.3, progress=False)  # run(): its own loop
        assert same.diagnostics.errors == results.diagnostics.errors

    def test_timeout_raises_with_on_error_raise(self, evaluation, release):
        def system(value):
            release.wait(60)

        with pytest.raises(TimeoutError, match=r"timeout=0\.2"):
            evaluation.run(system, timeout=0.2, on_error="raise", progress=False)

    def test_system_own_timeout_error_is_its_own(self, evaluation):
        """A TimeoutError the system raises itself keeps its own message."""

        async def system(value):
            raise TimeoutError("upstream took too long")

        results = evaluation.run(system, timeout=5, progress=False)
        assert set(results.diagnostics.errors.values()) == {"TimeoutError: upstream took too long"}


CTRL_C = textwrap.dedent(
    """
    import asyncio, json, os, signal, sys, threading, time
    import engine

    samples = [{"id": f"q{i}", "input": i, "expected_output": [f"d{i}"]} for i in range(40)]
    evaluation = engine.Engine(config={}).dataset(samples=samples).with_metrics(["retrieval-mrr"])

    def plain(i):
        if i % 10 == 3:
            time.sleep(600)
        return [f"d{i}"]

    async def awaited(i):
        if i % 10 == 3:
            await asyncio.sleep(600)
        return [f"d{i}"]

    system = plain if sys.argv[1] == "threads" else awaited
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    try:
        evaluation.run(system, concurrency=4, progress=False, save_outputs=sys.argv[2])
    except engine.RunInterrupted as stop:
        print(json.dumps({
            "seconds": time.monotonic() - started,
            "gathered": len(stop.outputs),
            "scored": stop.results.provenance["partial"],
            "mean": stop.results.summary()["retrieval-mrr"]["mean"],
            "written": len(json.load(open(sys.argv[2]))),
            "message": str(stop),
        }))
    """
)


@pytest.mark.parametrize("mode", ["threads", "async"])
def test_ctrl_c_stops_promptly_keeping_what_was_done(mode, tmp_path: Path):
    """Ctrl-C during a run whose calls hang stops it at once: RunInterrupted holds the
    outputs gathered (also written to save_outputs) and those samples scored as
    partial results; the hanging calls hold up neither the run nor the exit."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C, mode, str(tmp_path / "partial.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    found = json.loads(done.stdout)
    assert found["seconds"] < 3
    assert 0 < found["gathered"] < 40
    assert found["written"] == found["gathered"]
    assert found["scored"] == {"samples_scored": found["gathered"], "samples_in_dataset": 40}
    assert found["mean"] == 1.0
    assert found["message"].startswith(f"interrupted after {found['gathered']} of 40 samples")


class TestLabelsMissing:
    def test_run_keeps_the_outputs_and_names_the_next_step(self, eng, tmp_path):
        """Without labels, run raises one line per metric (not per sample), keeps the
        outputs on the error and in the file asked for, and names slotwise annotate."""
        unlabelled = [{"id": s["id"], "input": s["input"]} for s in SAMPLES]
        evaluation = eng.dataset(samples=unlabelled, name="fresh").with_metrics(
            ["retrieval-mrr", "retrieval-ndcg-at-k@10"]
        )
        path = tmp_path / "outputs.json"
        with pytest.raises(MetricRequirementError) as caught:
            evaluation.run(lambda value: [f"d{number(value)}"], save_outputs=path, progress=False)
        error = caught.value
        assert len(error.problems) == 2
        assert "12 of 12 samples lack it" in str(error.problems[0])
        assert error.outputs.outputs["q4"] == ["d4"] and len(error.outputs) == 12
        assert json.loads(path.read_text())["q4"] == ["d4"]
        message = str(error)
        assert f"written to {path}" in message
        assert f"slotwise annotate fresh --task relevance --holes --runs {path}" in message

    def test_collect_needs_no_labels(self, eng):
        unlabelled = [{"id": s["id"], "input": s["input"]} for s in SAMPLES]
        collected = eng.dataset(samples=unlabelled).collect(lambda value: ["d1"], progress=False)
        assert (len(collected.outputs), collected.errors, collected.samples) == (12, {}, 12)


class TestNoOutput:
    def test_python_default_is_an_error_row(self, evaluation):
        """A sample without an output is an error row, counted and shown, not a zero."""
        results = evaluation.evaluate({"q0": ["d0"], "q1": ["d1"]})
        assert results.summary()["retrieval-mrr"]["n"] == 2
        assert results.summary()["retrieval-mrr"]["errors"] == 10
        assert results.diagnostics.errors["q5"] == "no output"
        assert "10 sample(s) failed and are NA" in str(results)
        assert "10 x no output" in str(results)

    def test_empty_is_an_explicit_choice_shown_everywhere(self, evaluation):
        results = evaluation.evaluate({"q0": ["d0"], "q1": ["d1"]}, missing="empty")
        assert results.summary()["retrieval-mrr"]["n"] == 12
        assert results.summary()["retrieval-mrr"]["missing_outputs"] == 10
        assert results.provenance["missing_outputs"] == "empty"
        assert "10 sample(s) had no output and were scored as empty rankings" in str(results)
        kept = evaluation.evaluate({"q0": ["d0"]}, missing="empty", keep_outputs=True)
        assert evaluation.evaluate(kept).provenance["missing_outputs"] == "empty"  # as recorded

    def test_trec_runs_keep_trec_eval_convention(self, evaluation):
        """A TREC run (pytrec_eval's dict here; read_run's columns, a run frame) that lacks
        a query scores it as an empty ranking, as trec_eval -c does."""
        results = evaluation.evaluate({"q0": {"d0": 1.0}, "q1": {"x": 2.0, "d1": 1.0}})
        assert results.values("retrieval-mrr").tolist()[:3] == [1.0, 0.5, 0.0]
        assert results.provenance["missing_outputs"] == "empty"
        trec = evaluation.engine.evaluate_trec(
            {"q0": {"d0": 1}, "q1": {"d1": 1}}, {"q0": {"d0": 1.0}}, ["retrieval-mrr"]
        )
        assert trec.values("retrieval-mrr").tolist() == [1.0, 0.0]

    def test_gate_counts_them(self, evaluation):
        from engine.testing import assert_no_regression

        complete = evaluation.evaluate({s["id"]: [f"d{s['id'][1:]}"] for s in SAMPLES})
        with pytest.raises(AssertionError, match="failed on 11 sample"):
            assert_no_regression(evaluation.evaluate({"q0": ["d0"]}), complete)


class TestPrinting:
    SAMPLES = (
        {
            "id": "q1",
            "input": "a",
            "expected_output": {"d1": 1, "d2": 0},
            "metadata": {"label_sources": {"d2": "judge:m:v1"}},
        },
        {"id": "q2", "input": "b", "expected_output": ["d3"]},
        {"id": "q3", "input": "c", "expected_output": ["d4"]},
    )
    OUTPUTS = (("q1", ["d2", "d1", "x"]), ("q2", ["d3", "d3"]))

    def test_print_shows_what_the_cli_shows(self, eng, tmp_path, capsys):
        """print(results) shows, under the table, every line slotwise run prints under
        its own: the diagnostics (a sample without output, a dropped duplicate) and the
        label-source report with its unjudged slots; the notebook view too."""
        from engine.cli import main

        (tmp_path / "data.json").write_text(json.dumps({"samples": list(self.SAMPLES)}))
        (tmp_path / "outputs.json").write_text(json.dumps(dict(self.OUTPUTS)))
        arguments = [
            "run",
            str(tmp_path / "data.json"),
            "--outputs",
            str(tmp_path / "outputs.json"),
        ]
        assert main([*arguments, "--metrics", "retrieval-mrr@3", "--missing", "empty"]) == 0
        printed = capsys.readouterr().out.splitlines()
        evaluation = eng.dataset(tmp_path / "data.json").with_metrics(["retrieval-mrr@3"])
        results = evaluation.evaluate(tmp_path / "outputs.json", missing="empty")  # as --missing
        shown = str(results).splitlines()
        assert [line.rstrip() for line in shown] == [line.rstrip() for line in printed]
        notes = results.notes()
        assert notes[0].startswith("1 sample(s) had no output") and "duplicate" in notes[1]
        assert "label sources@3:" in notes and any("unjudged=" in n for n in notes)
        assert "label sources@3:" in results._repr_html_()
