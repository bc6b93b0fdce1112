"""Label-free evaluation end to end, against a real local chat-completions server (the
stand-in, engine.annotate.stand_in, a subprocess on 127.0.0.1): questions only, the
reference-free judge, adversarial and flaky endpoints, kill and resume, questions made
from a corpus, and the gate on judged@k and on a PPI interval."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import engine
from engine.annotate import Cache, Runner, fill_holes, pool
from engine.annotate.http_annotator import OpenAICompatibleAnnotator, retry_after
from engine.annotate.prompts import UMBRELA_VERSION
from engine.annotate.stand_in import umbrela_grade
from engine.annotate.synthesize import Passage, draw
from engine.cli import main
from engine.io.records import samples_of
from engine.io.sources import read_dataset, read_outputs
from engine.testing import Inconclusive, assert_no_regression

QUESTIONS = {
    "q1": "What is the capital city of France?",
    "q2": "When was the album Follow the Leader released?",
    "q3": "Where does the novel The Great Gatsby take place?",
}
PASSAGES = {
    "d1": "Paris is the capital city of France and its largest city.",
    "d2": "Lyon is a city in France known for its food.",
    "d3": "The album Follow the Leader was released on August 18, 1998.",
    "d4": "Korn is a nu metal band from Bakersfield.",
    "d5": "The novel The Great Gatsby takes place on Long Island in 1922.",
    "d6": "F. Scott Fitzgerald wrote several novels.",
}
RUN_A = {"q1": ["d1", "d2", "d4"], "q2": ["d3", "d4", "d6"], "q3": ["d5", "d6", "d2"]}
RUN_B = {"q1": ["d4", "d1", "d6"], "q2": ["d6", "d3", "d2"], "q3": ["d2", "d5", "d4"]}
SOURCE = f"openai-compatible:stand-in:{UMBRELA_VERSION}"


def _outputs(run: dict[str, list[str]], texts: dict[str, str] = PASSAGES) -> dict[str, Any]:
    return {
        sid: {"retrieved": [{"id": d, "text": texts[d]} for d in docs]} for sid, docs in run.items()
    }


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A questions-only dataset (no labels, no answers) and two systems' outputs."""
    found = {
        "questions": tmp_path / "questions.yaml",
        "a": tmp_path / "a.json",
        "b": tmp_path / "b.json",
        "labelled": tmp_path / "labelled.yaml",
    }
    samples = [{"id": sid, "input": {"question": q}} for sid, q in QUESTIONS.items()]
    found["questions"].write_text(yaml.safe_dump({"samples": samples}))
    found["a"].write_text(json.dumps(_outputs(RUN_A)))
    found["b"].write_text(json.dumps(_outputs(RUN_B)))
    return found


def _fill(files: dict[str, Path], url: str, *extra: str, runs: tuple[str, ...] = ("a", "b")) -> int:
    return main(
        [
            "annotate", str(files["questions"]), "--task", "relevance", "--runs",
            *(str(files[r]) for r in runs), "--holes", "--depth", "3", "--output",
            str(files["labelled"]), "--annotator", "openai-compatible", "--base-url", url,
            "--model", "stand-in", "--backoff", "0.01", *extra,
        ]
    )  # fmt: skip


def _written(path: Path) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in yaml.safe_load(path.read_text())["samples"]}


def _pooled(runs: tuple[dict[str, list[str]], ...] = (RUN_A, RUN_B)) -> set[tuple[str, str]]:
    return {(sid, doc) for run in runs for sid, docs in run.items() for doc in docs}


class TestReferenceFreeJudge:
    def test_questions_only_get_graded_labels(
        self, server_factory: Any, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """No answers anywhere: UMBRELA grades every pooled pair 0-3, each grade is the
        pair's label (the stand-in's answer), its source names UMBRELA's prompt, and the
        plan line says which judge runs and why, before any call."""
        server = server_factory()
        assert _fill(files, server.url) == 0
        err = capsys.readouterr().err
        assert (
            f"relevance judge {UMBRELA_VERSION} (reference-free, grades 0-3; 3 of 3 sample(s) "
            "have no acceptable answers)" in err.splitlines()[0]
        )
        written = _written(files["labelled"])
        for sid, doc in _pooled():
            grade = umbrela_grade(QUESTIONS[sid], PASSAGES[doc])
            assert written[sid]["expected_output"]["relevance"][doc] == grade
            assert written[sid]["metadata"]["label_sources"][doc] == SOURCE
        grades = {written[s]["expected_output"]["relevance"][d] for s, d in _pooled()}
        assert {0, 3} <= grades  # the stand-in's word rule spreads them
        assert server.stats()["structured"] == len(_pooled())  # asked as structured output

    def test_grades_feed_graded_and_binary_metrics(
        self, server_factory: Any, files: dict[str, Path]
    ) -> None:
        """The grades are gains for nDCG; binary metrics count grade >= their
        relevance_threshold (1 by default; 2 for TREC DL's convention)."""
        assert _fill(files, server_factory().url) == 0
        written = _written(files["labelled"])
        data = engine.Engine(config={}).dataset(files["labelled"])
        results = data.with_metrics(
            ["retrieval-precision-at-k@3", "retrieval-precision-at-k(k=3, relevance_threshold=2)"]
        ).evaluate(files["a"])
        for sid, docs in RUN_A.items():
            grades = [written[sid]["expected_output"]["relevance"][d] for d in docs]
            index = results.sample_ids.index(sid)
            assert (
                results.values("retrieval-precision-at-k@3")[index]
                == sum(g >= 1 for g in grades) / 3
            )
            assert results.values(results.labels[1])[index] == sum(g >= 2 for g in grades) / 3

    def test_answer_aware_judge_needs_answers(
        self, server_factory: Any, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--judge answers on questions without answers: exit 2 before any call, naming
        each sample, its pointer and the reference-free alternative."""
        server = server_factory()
        assert _fill(files, server.url, "--judge", "answers") == 2
        err = capsys.readouterr().err
        for sid in QUESTIONS:
            assert f"sample {sid!r} /expected_output/answers" in err
        assert "--judge umbrela" in err
        assert server.stats()["requests"] == 0

    def test_outputs_path_and_python(self, server_factory: Any, files: dict[str, Path]) -> None:
        """`annotate --outputs --task relevance` and fill_holes(judge="umbrela") write the
        same grades and sources."""
        server = server_factory()
        command = [
            "annotate", str(files["questions"]), "--task", "relevance", "--outputs",
            str(files["a"]), "--output", str(files["labelled"]), "--annotator",
            "openai-compatible", "--base-url", server.url, "--model", "stand-in",
        ]  # fmt: skip
        assert main(command) == 0
        by_cli = _written(files["labelled"])
        raws = yaml.safe_load(files["questions"].read_text())["samples"]
        _, columns = read_dataset(files["questions"])
        annotator = OpenAICompatibleAnnotator("stand-in", base_url=server.url)
        with Runner(Cache(files["labelled"].with_suffix(".py.sqlite"))) as runner:
            pooled = pool(columns, [read_outputs(files["a"])], depth=3)
            labelled, filling = fill_holes(
                raws, samples_of(columns), pooled, annotator, runner, judge="umbrela"
            )
        annotator.close()
        assert filling.source == SOURCE and filling.written == 9
        for raw in labelled:
            assert raw["expected_output"] == by_cli[raw["id"]]["expected_output"]
            assert (
                raw["metadata"]["label_sources"] == by_cli[raw["id"]]["metadata"]["label_sources"]
            )


ADVERSARIAL = {
    "Lyon is a city": "The document is not relevant.",
    "Korn is a nu metal": "Grade: not relevant",
    "F. Scott Fitzgerald": '{"motivation": "The passage is not relevant',
}


class TestAdversarialAnswers:
    def test_no_unreadable_answer_becomes_a_label(
        self,
        server_factory: Any,
        files: dict[str, Path],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """A judge that answers some pairs in prose, truncated JSON or a negation: those
        pairs get no label, are listed by sample/document on stderr and in
        metadata.unjudged, counted as unreadable, never cached; the re-run asks only for
        them, and once the judge answers properly they are labelled."""
        canned = tmp_path / "canned.json"
        canned.write_text(json.dumps(ADVERSARIAL))
        bad_docs = {"d2", "d4", "d6"}
        server = server_factory("--canned", str(canned))
        assert _fill(files, server.url) == 3  # more than --max-unlabelled 0.05 of the pairs
        err = capsys.readouterr().err
        bad = sorted((s, d) for s, d in _pooled() if d in bad_docs)
        assert f"{len(bad)} unreadable" in err
        assert f"{len(bad)} judge answer(s) could not be read" in err
        for sid, doc in bad:
            assert f"{sid}/{doc}" in err
        written = _written(files["labelled"])
        for sid, doc in _pooled():
            relevance = written[sid]["expected_output"].get("relevance", {})
            unjudged = written[sid]["metadata"].get("unjudged", {})
            if doc in bad_docs:
                assert doc not in relevance and unjudged[doc].startswith("unreadable: ")
            else:
                assert relevance[doc] == umbrela_grade(QUESTIONS[sid], PASSAGES[doc])
        cache = files["labelled"].with_suffix(".cache.sqlite")
        with sqlite3.connect(cache) as connection:
            (cached,) = connection.execute("SELECT COUNT(*) FROM annotations").fetchone()
        assert cached == len(_pooled()) - len(bad)

        healthy = server_factory()
        files["questions"] = files["labelled"]  # fill the holes of the written dataset
        files["labelled"] = tmp_path / "again.yaml"
        assert _fill(files, healthy.url, "--cache", str(cache)) == 0
        assert healthy.stats()["requests"] == len(bad)
        again = _written(files["labelled"])
        for sid, doc in bad:
            assert again[sid]["expected_output"]["relevance"][doc] == umbrela_grade(
                QUESTIONS[sid], PASSAGES[doc]
            )
            assert "unjudged" not in again[sid]["metadata"]


class TestFlakyEndpoint:
    def test_retry_after_is_honoured(
        self, server_factory: Any, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """429 with Retry-After: 1: the retry waits a second, not the 0.01 s backoff."""
        server = server_factory("--throttle-first", "1", "--retry-after", "1")
        started = time.monotonic()
        assert _fill(files, server.url, "--concurrency", "1") == 0
        assert time.monotonic() - started >= 1.0
        err = capsys.readouterr().err
        assert "(1 retried;" in err and "1s waited on rate limits" in err

    def test_retry_after_values(self) -> None:
        """Seconds, an HTTP date (in the past: 0), or nothing readable."""
        assert retry_after("3") == 3.0
        assert retry_after(" 0 ") == 0.0
        later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
        assert 25 <= (retry_after(later) or 0) <= 30
        assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
        assert retry_after("soon") is None and retry_after(None) is None

    def test_dropped_connections_and_500s_are_retried(
        self, server_factory: Any, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Connections closed without an answer, then 503s: retried, and the run completes."""
        server = server_factory("--drop-first", "2", "--fail-first", "2")
        assert _fill(files, server.url, "--concurrency", "1") == 0
        assert "(4 retried;" in capsys.readouterr().err
        assert len(_written(files["labelled"])["q1"]["expected_output"]["relevance"]) == 4

    def test_one_pair_failing_does_not_stop_the_others(
        self,
        server_factory: Any,
        files: dict[str, Path],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """One pair answered HTTP 500 every time: the others are labelled, the pair is
        named with the reason (stderr, metadata.unjudged), exit 3; the re-run against a
        healthy endpoint asks for that pair alone."""
        canned = tmp_path / "canned.json"
        canned.write_text(json.dumps({"Korn is a nu metal": {"status": 500}}))
        server = server_factory("--canned", str(canned))
        assert _fill(files, server.url, "--retries", "2") == 3
        err = capsys.readouterr().err
        failing = sorted((s, d) for s, d in _pooled() if d == "d4")
        assert f"{len(failing)} call(s) failed for good" in err
        for sid, doc in failing:
            assert f"{sid}/{doc}" in err
        assert "HTTP 500" in err and "giving up after 3 attempts" in err
        written = _written(files["labelled"])
        for sid, doc in _pooled():
            if doc == "d4":
                assert "HTTP 500" in written[sid]["metadata"]["unjudged"][doc]
            else:
                assert doc in written[sid]["expected_output"]["relevance"]
        healthy = server_factory()
        assert _fill(files, healthy.url) == 0
        assert healthy.stats()["requests"] == len(failing)

    def test_an_endpoint_that_keeps_failing_stops_the_run(
        self, server_factory: Any, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Every call failing: the run stops after 10 failed batches in a row (not after
        trying every pair), exit 2, saying how to resume."""
        server = server_factory("--mode", "fail", "--delay", "0.05")
        assert _fill(files, server.url, "--retries", "0", "--concurrency", "1") == 2
        err = capsys.readouterr().err
        assert "stopped after 10 failed batches in a row" in err
        assert "run the same command again to resume" in err
        assert 10 <= server.stats()["requests"] <= 11 < len(_pooled())  # at most one in flight

    def test_structured_output_refused_falls_back(
        self, server_factory: Any, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An endpoint that refuses response_format (HTTP 400): the judge asks without it
        from then on, reads the free-text form (##final score: N), and says so."""
        server = server_factory("--no-structured")
        assert _fill(files, server.url, "--concurrency", "1") == 0
        assert "the endpoint refused response_format" in capsys.readouterr().err
        assert server.stats()["structured"] == 1  # the first request only
        written = _written(files["labelled"])
        for sid, doc in _pooled():
            assert written[sid]["expected_output"]["relevance"][doc] == umbrela_grade(
                QUESTIONS[sid], PASSAGES[doc]
            )

    @pytest.mark.slow
    def test_kill_and_resume(self, server_factory: Any, files: dict[str, Path]) -> None:
        """SIGKILL mid-run: the re-run asks only for what was not cached, and the labels
        equal an uninterrupted run's."""
        server = server_factory("--delay", "0.3")
        cache = files["labelled"].with_suffix(".cache.sqlite")
        command = [
            sys.executable, "-m", "engine.cli", "annotate", str(files["questions"]), "--task",
            "relevance", "--runs", str(files["a"]), str(files["b"]), "--holes", "--depth", "3",
            "--output", str(files["labelled"]), "--annotator", "openai-compatible",
            "--base-url", server.url, "--model", "stand-in", "--concurrency", "1",
        ]  # fmt: skip
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        done, deadline = 0, time.monotonic() + 30
        while time.monotonic() < deadline and done < 3:
            if cache.exists():
                try:
                    with sqlite3.connect(cache) as connection:
                        (done,) = connection.execute("SELECT COUNT(*) FROM annotations").fetchone()
                except sqlite3.OperationalError:
                    done = 0
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        assert not files["labelled"].exists()
        with sqlite3.connect(cache) as connection:
            (kept,) = connection.execute("SELECT COUNT(*) FROM annotations").fetchone()
        before = server.stats()["requests"]
        rerun = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
        assert rerun.returncode == 0, rerun.stderr
        assert server.stats()["requests"] - before == len(_pooled()) - kept
        written = _written(files["labelled"])
        for sid, doc in _pooled():
            assert written[sid]["expected_output"]["relevance"][doc] == umbrela_grade(
                QUESTIONS[sid], PASSAGES[doc]
            )


def _corpus(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


class TestSynthesize:
    def _command(self, corpus: Path, output: Path, url: str, *extra: str) -> list[str]:
        return [
            "synthesize", str(corpus), "--output", str(output), "--annotator",
            "openai-compatible", "--base-url", url, "--model", "stand-in", *extra,
        ]  # fmt: skip

    def test_questions_labelled_by_their_passages(
        self, server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Questions from a corpus: a repeated question and one its passage does not
        answer (graded 1) are dropped; the rest label their source passage with the
        judge's grade and the generator's source; a re-run is free; the dataset scores."""
        records = [{"id": d, "text": t} for d, t in PASSAGES.items()]
        # d7 gives d1's question (the same first five long words): a repeat
        records.append({"id": "d7", "text": PASSAGES["d1"] + " Visit it."})
        corpus = _corpus(tmp_path / "corpus.jsonl", records)
        canned = tmp_path / "canned.json"  # the check of d4's question: graded 1
        canned.write_text(
            json.dumps({"Query: What about Korn metal band from Bakersfield?": "##final score: 1"})
        )
        server = server_factory("--canned", str(canned))
        output = tmp_path / "synthetic.yaml"
        command = self._command(corpus, output, server.url, "--questions", "7", "--oversample", "1")
        assert main(command) == 0
        err = capsys.readouterr().err
        assert err.startswith(
            "synthesize: 7 question(s) wanted from 7 passages; 7 drawn uniformly; at most 14 model calls"
        )
        assert "1 repeated question(s) dropped" in err
        assert (
            "1 question(s) the judge did not grade as answered by their passage, dropped (passage ids): d4 (grade 1)"
            in err
        )
        assert "only 5 of the 7 questions wanted" in err
        written = _written(output)
        assert len(written) == 5 and {"syn-d1", "syn-d7"} & set(written) != {"syn-d1", "syn-d7"}
        for sample in written.values():
            doc = sample["metadata"]["synthesized"]["passage"]
            question = sample["input"]["question"]
            grade = umbrela_grade(question, PASSAGES.get(doc) or records[-1]["text"])
            assert grade >= 2 and sample["expected_output"] == {"relevance": {doc: grade}}
            assert sample["metadata"]["label_sources"] == {
                doc: "openai-compatible:stand-in:slotwise-question-v1"
            }
        requests = server.stats()["requests"]
        assert main(command) == 0
        assert "0 computed with 0 model calls" in capsys.readouterr().err
        assert server.stats()["requests"] == requests
        results = engine.Engine(config={}).dataset(output).with_metrics(["retrieval-recall-at-k@3"])
        assert (
            results.evaluate(
                {sid: [s["metadata"]["synthesized"]["passage"]] for sid, s in written.items()}
            ).summary()["retrieval-recall-at-k@3"]["mean"]
            == 1.0
        )

    def test_stratified_draw_takes_turns(self) -> None:
        """Strata take turns in sorted order, each in its own seeded order, until one runs out."""
        passages = [Passage(f"a{i}", "x", "a") for i in range(6)] + [
            Passage(f"b{i}", "x", "b") for i in range(2)
        ]
        drawn = draw(passages, 6, seed=3)
        assert [p.stratum for p in drawn] == ["a", "b", "a", "b", "a", "a"]
        assert len({p.id for p in drawn}) == 6
        assert draw(passages, 6, seed=3) == drawn
        assert [p.id for p in draw(passages, 20, seed=3)].__len__() == 8

    def test_stratum_recorded_and_dry_run_writes_nothing(
        self, server_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--stratify records each sample's stratum; --dry-run says the plan and neither
        calls the model nor writes a file."""
        records = [
            {"id": d, "text": t, "metadata": {"topic": "music" if d in ("d3", "d4") else "other"}}
            for d, t in PASSAGES.items()
        ]
        corpus = _corpus(tmp_path / "corpus.jsonl", records)
        server = server_factory()
        output = tmp_path / "s.jsonl"
        command = self._command(
            corpus, output, server.url, "--questions", "4", "--stratify", "topic"
        )
        assert main([*command, "--dry-run"]) == 0
        assert "5 drawn stratified over 2 values" in capsys.readouterr().err
        assert server.stats()["requests"] == 0
        assert not output.exists() and not output.with_suffix(".cache.sqlite").exists()
        assert main(command) == 0
        strata = [
            json.loads(line)["metadata"]["stratum"] for line in output.read_text().splitlines()
        ]
        assert strata.count("music") == 2 and strata.count("other") == 2

    def test_bad_corpus_lines_are_named(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        corpus = _corpus(
            tmp_path / "corpus.jsonl",
            [
                {"id": "a", "text": "x"},
                {"id": "a", "text": "y"},
                {"text": "z"},
                {"id": "c", "text": " "},
            ],
        )
        code = main(
            self._command(corpus, tmp_path / "o.yaml", "http://127.0.0.1:9/v1", "--questions", "1")
        )
        assert code == 2
        err = capsys.readouterr().err
        assert f"{corpus}:2 sample 'a' /id: a repeated passage id" in err
        assert f"{corpus}:3 /id: no id" in err
        assert f"{corpus}:4 sample 'c' /text: no text" in err


def _samples(labelled: dict[str, list[str]]) -> list[dict[str, Any]]:
    return [
        {
            "id": sid,
            "input": {"question": sid},
            "expected_output": {"relevance": dict.fromkeys(docs, 1) | {"j1": 0, "j2": 0}},
        }
        for sid, docs in labelled.items()
    ]


class TestJudgedGate:
    """Baseline [r, j1, j2] (all judged), new [r, u1, u2] (two unjudged): the same MRR,
    judged@3 1.0 against 1/3 — by hand."""

    def _pair(self, n: int = 20) -> tuple[engine.Results, engine.Results]:
        data = engine.Engine(config={}).dataset(
            samples=_samples({f"q{i}": [f"r{i}"] for i in range(n)})
        )
        evaluation = data.with_metrics(["retrieval-mrr", "retrieval-precision-at-k@3"])
        base = evaluation.evaluate({f"q{i}": [f"r{i}", "j1", "j2"] for i in range(n)})
        new = evaluation.evaluate({f"q{i}": [f"r{i}", f"u{i}", "u"] for i in range(n)})
        return base, new

    def test_judged_counts(self) -> None:
        base, new = self._pair()
        assert base.diagnostics.judged == {3: (60, 60)}
        assert new.diagnostics.judged == {3: (20, 60)}
        assert new.diagnostics.judged_at(3) == pytest.approx(1 / 3)
        document = json.loads(json.dumps(new.to_dict()))
        assert document["diagnostics"]["judged"] == [{"k": 3, "judged": 20, "documents": 60}]
        assert engine.read_results  # results files carry them back
        assert json.loads(json.dumps(new.to_dict()))["diagnostics"]["judged"][0]["judged"] == 20

    def test_judged_counts_equal_in_chunks(self) -> None:
        """Counted per chunk and summed: the same at any chunk size."""
        data = engine.Engine(config={}).dataset(
            samples=_samples({f"q{i}": [f"r{i}"] for i in range(300)})
        )
        outputs = {
            f"q{i}": [f"r{i}", f"u{i}"][: 1 + i % 2] + ["j1"] * (i % 3 == 0) for i in range(300)
        }
        evaluation = data.with_metrics(["retrieval-precision-at-k@2"])
        whole = evaluation.evaluate(outputs).diagnostics.judged
        chunked = evaluation.evaluate(outputs, chunk_size=64).diagnostics.judged
        expected_docs = sum(min(2, len(v)) for v in outputs.values())
        expected_judged = sum(sum(d[0] in "rj" for d in v[:2]) for v in outputs.values())
        assert whole == chunked == {2: (expected_judged, expected_docs)}

    def test_too_few_labels_cant_tell(self, tmp_path: Path) -> None:
        """The same MRR, but judged@3 1/3 against 1: the new system's numbers stand on
        too few labels (< 0.9) and the two differ by 0.667 (> 0.05): can't tell, exit 4,
        whatever the metrics say (they held)."""
        base, new = self._pair()
        with pytest.raises(Inconclusive) as failed:
            assert_no_regression(new, base)
        message = str(failed.value)
        assert "current: judged@3 0.333 (40 of 60 unjudged) < 0.9" in message
        assert (
            "judged@3: current 0.333 (40 of 60 unjudged) against baseline 1.000 (0 of 60 "
            "unjudged), 0.667 apart > 0.05" in message
        )
        assert "slotwise annotate --task relevance --runs" in message
        assert "retrieval-mrr: HELD +0.0000 [+0.0000, +0.0000]" in message
        held = assert_no_regression(new, base, min_judged=None, max_judged_gap=None)
        assert held.outcome == "held"
        base.to_json(tmp_path / "base.json")
        new.to_json(tmp_path / "new.json")
        arguments = [
            "compare",
            str(tmp_path / "base.json"),
            str(tmp_path / "new.json"),
            "--fail-on-regression",
        ]
        assert main(arguments) == 4
        assert main([*arguments, "--allow-inconclusive"]) == 0
        assert main([*arguments, "--allow-unjudged"]) == 0
        assert main([*arguments, "--min-judged", "0.3", "--max-judged-gap", "0.7"]) == 0
        assert main([*arguments, "--min-judged", "0.3"]) == 4
        assert main([*arguments[:3], "--format", "json", "--output", str(tmp_path / "c.json")]) == 0
        document = json.loads((tmp_path / "c.json").read_text())
        judged = document["judged"]
        assert judged["new"] == [{"k": 3, "judged": 20, "documents": 60, "judged_at_k": 1 / 3}]
        assert document["verdict"]["outcome"] == "can't tell"
        assert [v["by"] for v in document["verdict"]["verdicts"]] == [
            "labels",
            "labels",
            "paired test",
            "paired test",
        ]


class TestLabelsGrow:
    def test_compare_rescores_kept_outputs(
        self,
        server_factory: Any,
        files: dict[str, Path],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Labels from system a's pool; b scored later after --holes added b's: compare
        refuses and names --dataset; with --dataset both are re-scored on the new labels,
        equal to scoring there directly; outputs files are scored with --metrics."""
        server = server_factory()
        assert _fill(files, server.url, runs=("a",)) == 0
        first = tmp_path / "first.yaml"
        files["labelled"].rename(first)
        metrics = "retrieval-ndcg-at-k@3"
        base = tmp_path / "base.json"
        assert (
            main(
                [
                    "run",
                    str(first),
                    "--outputs",
                    str(files["a"]),
                    "--metrics",
                    metrics,
                    "--format",
                    "json",
                    "--output",
                    str(base),
                    "--keep-outputs",
                ]
            )
            == 0
        )
        files["questions"] = first
        assert _fill(files, server.url, runs=("a", "b")) == 0
        new = tmp_path / "new.json"
        assert (
            main(
                [
                    "run",
                    str(files["labelled"]),
                    "--outputs",
                    str(files["b"]),
                    "--metrics",
                    metrics,
                    "--format",
                    "json",
                    "--output",
                    str(new),
                    "--keep-outputs",
                ]
            )
            == 0
        )
        capsys.readouterr()
        assert main(["compare", str(base), str(new)]) == 2
        assert "slotwise compare --dataset" in capsys.readouterr().err
        out = tmp_path / "c.json"
        assert (
            main(
                [
                    "compare",
                    str(base),
                    str(new),
                    "--dataset",
                    str(files["labelled"]),
                    "--format",
                    "json",
                    "--output",
                    str(out),
                ]
            )
            == 0
        )
        row = json.loads(out.read_text())["comparisons"][0]
        direct = engine.Engine(config={}).dataset(files["labelled"]).with_metrics([metrics])
        assert row["mean_a"] == pytest.approx(
            direct.evaluate(files["a"]).summary()[metrics]["mean"], abs=1e-12
        )
        assert row["mean_b"] == pytest.approx(
            direct.evaluate(files["b"]).summary()[metrics]["mean"], abs=1e-12
        )
        assert (
            main(
                [
                    "compare",
                    str(files["a"]),
                    str(files["b"]),
                    "--dataset",
                    str(files["labelled"]),
                    "--metrics",
                    metrics,
                    "--format",
                    "json",
                    "--output",
                    str(out),
                ]
            )
            == 0
        )
        assert json.loads(out.read_text())["comparisons"][0]["mean_b"] == row["mean_b"]


class TestPPIGate:
    def test_an_interval_below_zero_fails(self, tmp_path: Path) -> None:
        """Human labels on 40 of 60 queries, the judge's on all: a system that ranks the
        relevant document second or last is worse by PPI's interval of the difference; the gate
        fails exactly when that interval lies below 0 (read off the report itself)."""
        n, human_n = 60, 40
        human = [
            {
                "id": f"q{i}",
                "input": {"question": f"q{i}"},
                **(
                    {"expected_output": {"relevance": {f"r{i}": 1, "x": 0, "y": 0}}}
                    if i < human_n
                    else {}
                ),
            }
            for i in range(n)
        ]
        judged = [
            {
                "id": f"q{i}",
                "input": {"question": f"q{i}"},
                "expected_output": {"relevance": {f"r{i}": 1, "x": 0, "y": int(i % 5 == 0)}},
            }
            for i in range(n)
        ]
        eng = engine.Engine(config={})
        metrics = ["retrieval-mrr"]
        good = (
            eng.dataset(samples=judged)
            .with_metrics(metrics)
            .evaluate({f"q{i}": [f"r{i}", "x", "y"] for i in range(n)}, keep_outputs=True)
        )
        bad = (
            eng.dataset(samples=judged)
            .with_metrics(metrics)
            .evaluate(
                {f"q{i}": ["x", "y", f"r{i}"] if i % 2 else ["x", f"r{i}", "y"] for i in range(n)},
                keep_outputs=True,
            )
        )
        report = (
            eng.dataset(samples=human)
            .with_metrics(metrics)
            .ppi(bad, eng.dataset(samples=judged), baseline=good)
        )
        estimate = report.metrics[0].ppi
        assert estimate.high < 0  # the interval lies below 0: a regression
        with pytest.raises(
            AssertionError, match=r"retrieval-mrr: REGRESSED .* \(PPI\): the PPI interval lies"
        ):
            assert_no_regression(bad, good, ppi=report, max_judged_gap=None)
        flipped = (
            eng.dataset(samples=human)
            .with_metrics(metrics)
            .ppi(good, eng.dataset(samples=judged), baseline=bad)
        )
        assert flipped.metrics[0].ppi.low > 0
        held = assert_no_regression(good, bad, ppi=flipped, max_judged_gap=None)
        assert [(v.outcome, v.by) for v in held.verdicts] == [("held", "PPI")]
        (tmp_path / "human.yaml").write_text(yaml.safe_dump({"samples": human}))
        (tmp_path / "judged.yaml").write_text(yaml.safe_dump({"samples": judged}))
        good.to_json(tmp_path / "good.json")
        bad.to_json(tmp_path / "bad.json")
        arguments = [
            "compare",
            str(tmp_path / "good.json"),
            str(tmp_path / "bad.json"),
            "--ppi",
            str(tmp_path / "judged.yaml"),
            "--human",
            str(tmp_path / "human.yaml"),
            "--fail-on-regression",
        ]
        assert main(arguments) == 1
        assert (
            main([*arguments[:-1], "--format", "json", "--output", str(tmp_path / "c.json")]) == 0
        )
        found = json.loads((tmp_path / "c.json").read_text())["ppi"][0]["metrics"][0]
        assert found["ppi"]["ci"] == [pytest.approx(estimate.low), pytest.approx(estimate.high)]


class TestPlanAndModes:
    def test_dry_run_needs_no_httpx_and_writes_nothing(
        self, files: dict[str, Path], tmp_path: Path
    ) -> None:
        """--dry-run says the plan (pairs, judge) without the llm extra's httpx and
        without creating a cache file."""
        arguments = [
            "annotate", str(files["questions"]), "--task", "relevance", "--runs",
            str(files["a"]), str(files["b"]), "--holes", "--depth", "3", "--output",
            str(files["labelled"]), "--annotator", "openai-compatible", "--base-url",
            "http://127.0.0.1:9/v1", "--model", "m", "--dry-run",
        ]  # fmt: skip
        code = (
            "import sys; sys.modules['httpx'] = None; from engine.cli import main; "
            f"sys.exit(main({arguments!r}))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert f"{len(_pooled())} to judge: 0 from the cache" in done.stderr
        assert UMBRELA_VERSION in done.stderr
        assert not files["labelled"].exists()
        assert not files["labelled"].with_suffix(".cache.sqlite").exists()

    def test_structured_off_and_forced(
        self, server_factory: Any, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--structured off sends no response_format; --structured json-schema against an
        endpoint that refuses it stops at the first refusal (exit 2), saying what to use."""
        server = server_factory()
        assert _fill(files, server.url, "--structured", "off") == 0
        assert server.stats()["structured"] == 0
        refusing = server_factory("--no-structured")
        other = str(files["labelled"].with_suffix(".other.sqlite"))
        arguments = ("--structured", "json-schema", "--cache", other, "--concurrency", "1")
        assert _fill(files, refusing.url, *arguments) == 2
        err = capsys.readouterr().err
        assert "refused the request with response_format (HTTP 400" in err
        assert "use --structured auto (then free text) or off" in err
        assert refusing.stats()["requests"] == 1  # the error stops the batches after it


class TestPPINotes:
    def test_human_labels_in_and_out_of_the_pool(self) -> None:
        """Predictions that keep people's labels: those on documents the systems retrieved
        get one note (PPI wants the judge's there), those outside the pool another."""
        judge = {"label_sources": {"r0": "j:m:v", "x": "j:m:v"}}
        judged = [
            {"id": f"q{i}", "expected_output": {"relevance": {f"r{i}": 1, "x": 0, "far": 1}},
             "metadata": judge | {"label_sources": {f"r{i}": "j:m:v", "x": "human" if i < 2 else "j:m:v"}}}
            for i in range(6)
        ]  # fmt: skip
        human = [{"id": f"q{i}", "expected_output": {"relevance": {f"r{i}": 1}}} for i in range(3)]
        eng = engine.Engine(config={})
        outputs = {f"q{i}": [f"r{i}", "x", "y"] for i in range(6)}
        report = (
            eng.dataset(samples=human)
            .with_metrics(["retrieval-mrr"])
            .ppi(outputs, eng.dataset(samples=judged))
        )
        assert report.notes == (
            "2 relevance label(s) of the predictions on documents the systems retrieved are "
            "human labels: PPI wants the judge's label on every pooled pair (slotwise annotate "
            "--runs without --holes)",
            "6 relevance label(s) of the predictions are human labels of documents the systems "
            "did not retrieve: they count only in metrics that read labels beyond the ranking "
            "(recall's number of relevant documents)",
        )
