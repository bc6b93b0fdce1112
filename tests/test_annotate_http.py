"""The openai-compatible annotator, the judge, the grader and the cache against a real
local chat-completions server (engine.annotate.stand_in, a subprocess on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.annotate.base import UtilityItem
from engine.annotate.http_annotator import OpenAICompatibleAnnotator
from engine.annotate.prompts import utility_user_message
from engine.annotate.stand_in import expected_p
from engine.cli import main
from engine.io.records import samples_of
from engine.io.sources import read_dataset

QUESTIONS = {
    "q1": ("What is the capital of France?", ["Paris"]),
    "q2": ("When was Follow the Leader released?", ["August 18, 1998"]),
    "q3": ("Where does The Great Gatsby take place?", ["Long Island"]),
}
PASSAGES = {
    "d1": "Paris is the capital and largest city of France.",
    "d2": "Lyon is a city in France known for its food.",
    "d3": "Follow the Leader was released on August 18, 1998.",
    "d4": "Korn is a nu metal band from Bakersfield.",
    "d5": "The Great Gatsby is set on Long Island in 1922.",
    "d6": "F. Scott Fitzgerald wrote several novels.",
}
RETRIEVED = {"q1": ["d1", "d2", "d4"], "q2": ["d3", "d4", "d6"], "q3": ["d5", "d6", "d2"]}
RELEVANT = {"q1": ["d1"], "q2": ["d3"], "q3": ["d5"]}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    samples = [
        {
            "id": sid,
            "input": {"question": question},
            "expected_output": {"relevance": RELEVANT[sid], "answers": answers},
        }
        for sid, (question, answers) in QUESTIONS.items()
    ]
    outputs = {
        sid: {"retrieved": [{"id": d, "text": PASSAGES[d]} for d in docs]}
        for sid, docs in RETRIEVED.items()
    }
    dataset, out = tmp_path / "data.jsonl", tmp_path / "outputs.json"
    dataset.write_text("".join(json.dumps(s) + "\n" for s in samples))
    out.write_text(json.dumps(outputs))
    return {"dataset": dataset, "outputs": out, "labelled": tmp_path / "labelled.jsonl"}


def _expected(sid: str, doc: str) -> float:
    return expected_p(utility_user_message(QUESTIONS[sid][0], PASSAGES[doc]))


def _arguments(files: dict[str, Path], url: str, *extra: str) -> list[str]:
    return [
        "annotate",
        str(files["dataset"]),
        "--outputs",
        str(files["outputs"]),
        "--output",
        str(files["labelled"]),
        "--annotator",
        "openai-compatible",
        "--base-url",
        url,
        "--model",
        "tiny-chat",
        "--backoff",
        "0.01",
        *extra,
    ]


def _annotate(files: dict[str, Path], url: str, *extra: str) -> int:
    return main(_arguments(files, url, *extra))


def _tally(err: str) -> dict[str, float]:
    """The finished tally line's calls, retried calls, tokens and seconds waited."""
    found = re.search(
        r"with (\d+) model calls \((\d+) retried; (\d+) prompt \+ (\d+) completion tokens\)"
        r".* (\d+)s waited on rate limits",
        err,
    )
    assert found is not None, err
    names = ("calls", "retried", "prompt_tokens", "completion_tokens", "waited")
    return dict(zip(names, map(float, found.groups()), strict=True))


def _utility(path: Path) -> dict[str, dict[str, dict[str, object]]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {r["id"]: r["expected_output"]["utility"] for r in rows}


class TestLogprobs:
    def test_p_is_exp_logprob_of_the_no_token(self, server_factory: object) -> None:
        """p = exp(logprob) of `NO`; a one-letter prefix (` N`) does not count."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        annotator = OpenAICompatibleAnnotator("tiny-chat", base_url=server.url)
        items = [UtilityItem(QUESTIONS["q1"][0], PASSAGES[d]) for d in ("d1", "d2")]
        result = annotator.p_no_response(items, lambda: None)
        assert result.values == pytest.approx(
            [_expected("q1", "d1"), _expected("q1", "d2")], abs=1e-12
        )
        assert result.calls == 2 and result.prompt_tokens > 0
        annotator.close()

    def test_annotate_writes_utility_labels_that_feed_udcg(
        self, server_factory: object, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """annotate, then `slotwise run --metrics udcg` scores the labelled dataset."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        assert _annotate(files, server.url) == 0
        utility = _utility(files["labelled"])
        for sid, docs in RETRIEVED.items():
            for doc in docs:
                label = utility[sid][doc]
                assert label["relevant"] is (doc in RELEVANT[sid])
                assert label["p_no_response"] == pytest.approx(_expected(sid, doc), abs=1e-12)
        read_dataset(files["labelled"])  # validates against the schemas
        capsys.readouterr()
        code = main(
            [
                "run",
                str(files["labelled"]),
                "--outputs",
                str(files["outputs"]),
                "--metrics",
                "udcg",
                "--format",
                "json",
            ]
        )
        assert code == 0
        summary = json.loads(capsys.readouterr().out)["summary"]["udcg"]
        assert summary["n"] == 3 and 0 < summary["mean"] < 1

    def test_rerun_makes_no_calls(
        self, server_factory: object, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A second run is answered from the cache: the server sees no request."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        assert _annotate(files, server.url) == 0
        first = server.stats()["requests"]
        assert first == 9
        capsys.readouterr()
        assert _annotate(files, server.url) == 0
        assert server.stats()["requests"] == first
        assert "9 from the cache, 0 computed with 0 model calls" in capsys.readouterr().err


class TestSampling:
    def test_monte_carlo_frequency_without_logprobs(self, server_factory: object) -> None:
        """No logprobs: n samples, p = the fraction that say NO-RESPONSE."""
        server = server_factory("--mode", "sampling")  # type: ignore[operator]
        annotator = OpenAICompatibleAnnotator("m", base_url=server.url, samples=20)
        item = UtilityItem(QUESTIONS["q2"][0], PASSAGES["d3"])
        result = annotator.p_no_response([item, item], lambda: None)
        p = _expected("q2", "d3")
        assert result.values == [round(p * 20) / 20] * 2
        # the first item asked for logprobs, then sampled; the second sampled at once
        assert result.calls == 3
        annotator.close()

    def test_logprobs_method_is_a_clear_error(self, server_factory: object) -> None:
        """--method logprobs against a server without them says what to do."""
        from engine.annotate.base import AnnotationError

        server = server_factory("--mode", "sampling")  # type: ignore[operator]
        annotator = OpenAICompatibleAnnotator("m", base_url=server.url, method="logprobs")
        with pytest.raises(AnnotationError, match="no logprobs; use --method sampling"):
            annotator.p_no_response([UtilityItem("q", "p")], lambda: None)
        annotator.close()


class TestFailures:
    def test_retries_with_backoff_then_succeed(
        self, server_factory: object, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """503s are retried; the run completes and counts the retried calls among its calls."""
        server = server_factory("--mode", "logprobs", "--fail-first", "3")  # type: ignore[operator]
        assert _annotate(files, server.url, "--concurrency", "1") == 0
        assert "12 model calls (3 retried;" in capsys.readouterr().err
        assert len(_utility(files["labelled"])) == 3

    @pytest.mark.parametrize(
        ("mode", "message"), [("malformed", "malformed JSON"), ("fail", "HTTP 503")]
    )
    def test_bad_server_is_a_clear_error(
        self,
        server_factory: object,
        files: dict[str, Path],
        capsys: pytest.CaptureFixture[str],
        mode: str,
        message: str,
    ) -> None:
        """Malformed JSON or 503s: after the retries every item is a failure, listed by
        sample and passage with the reason, which suggests a larger --retries; the dataset
        is written without those labels, exit 3, and the message says how to ask again."""
        server = server_factory("--mode", mode)  # type: ignore[operator]
        assert _annotate(files, server.url, "--retries", "2") == 3
        err = capsys.readouterr().err
        assert message in err and "giving up after 3 attempts" in err
        assert "(--retries 2; a larger --retries tries longer)" in err
        assert "9 call(s) failed for good" in err and "q2/d6 (utility)" in err
        assert "to ask for those alone" in err
        rows = [json.loads(line) for line in files["labelled"].read_text().splitlines()]
        assert all("utility" not in row["expected_output"] for row in rows)

    def test_unreachable_endpoint_keeps_finished_work(
        self, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Nothing listens: every item fails (exit 3), `cannot reach`, and the cache is kept."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        cache = files["labelled"].with_suffix(".cache.sqlite")
        assert _annotate(files, f"http://127.0.0.1:{port}/v1", "--retries", "1") == 3
        err = capsys.readouterr().err
        assert "cannot reach" in err and str(cache) in err
        assert cache.exists()

    def test_missing_api_key_variable(
        self, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--api-key-env naming an unset variable is a usage error."""
        os.environ.pop("SLOTWISE_TEST_NO_KEY", None)
        code = _annotate(files, "http://127.0.0.1:9/v1", "--api-key-env", "SLOTWISE_TEST_NO_KEY")
        assert code == 2
        assert "SLOTWISE_TEST_NO_KEY" in capsys.readouterr().err


class TestRateLimits:
    def test_a_rate_limit_storm_is_waited_out(
        self, server_factory: object, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """429 with Retry-After: 1 to every request for 3 s: waited out without spending
        a retry (none allowed here), the labels written, exit 0; no line per retry, one
        tally at the end counting the retried calls among the calls and the time waited."""
        server = server_factory("--throttle-for", "3", "--retry-after", "1")  # type: ignore[operator]
        started = time.monotonic()
        assert _annotate(files, server.url, "--retries", "0") == 0
        assert time.monotonic() - started >= 3
        err = capsys.readouterr().err
        assert "annotate.retry" not in err and "429" not in err
        tally = _tally(err)
        stats = server.stats()
        assert tally["calls"] == stats["requests"] == 9 + tally["retried"]
        assert tally["retried"] >= 3 and 2 <= tally["waited"] <= 5
        assert len(_utility(files["labelled"])) == 3

    def test_past_max_wait_the_run_stops_naming_the_limit(
        self, server_factory: object, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An endpoint still limiting after --max-wait seconds of waits: exit 2, naming
        the limit and the time waited, suggesting a larger --max-wait and how to resume."""
        server = server_factory("--throttle-for", "60", "--retry-after", "1")  # type: ignore[operator]
        started = time.monotonic()
        assert _annotate(files, server.url, "--max-wait", "2") == 2
        assert time.monotonic() - started < 10
        err = capsys.readouterr().err
        assert "answered HTTP 429 (Retry-After: 1 s)" in err
        assert re.search(
            r"waited [12] s on the endpoint's rate limits in all, and another 1 s would pass "
            r"--max-wait 2 s: run again later, or with a larger --max-wait",
            err,
        )
        assert "run the same command again to resume" in err

    def test_the_tally_counts_every_request_and_its_tokens(
        self, server_factory: object, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Batches of 3 whose third item the endpoint fails (HTTP 500): the calls before
        it were answered, and their tokens count, in each attempt; the tally's calls and
        tokens are the server's."""
        canned = files["labelled"].with_name("canned.json")
        canned.write_text(json.dumps({"Korn is a nu metal": {"status": 500}}))
        server = server_factory("--canned", str(canned))  # type: ignore[operator]
        extra = ("--batch-size", "3", "--concurrency", "1", "--retries", "1")
        assert _annotate(files, server.url, *extra) == 3
        tally = _tally(capsys.readouterr().err)
        stats = server.stats()
        assert tally["calls"] == stats["requests"] and tally["retried"] == 2
        assert tally["prompt_tokens"] == stats["prompt_tokens"] > 0
        assert tally["completion_tokens"] == stats["completion_tokens"] > 0

    def test_on_a_terminal_one_line_shows_the_retries_and_waits(
        self,
        server_factory: object,
        files: dict[str, Path],
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """On a terminal the progress line, updated in place, says the retried calls and
        the time waited, and no line is written per retry."""
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
        monkeypatch.setenv("TTY_INTERACTIVE", "1")
        server = server_factory("--throttle-for", "2", "--retry-after", "1")  # type: ignore[operator]
        assert _annotate(files, server.url, "--progress", "--concurrency", "1") == 0
        err = capsys.readouterr().err
        assert re.search(r"\d+ retried calls, \d+ s waited on rate limits", err)
        assert "annotate.retry" not in err and "\r" in err


class TestUnlabelled:
    def test_unreadable_answers_past_the_share_exit_3(
        self,
        server_factory: object,
        files: dict[str, Path],
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """A judge whose answers are a third unreadable: the dataset is written, exit 3,
        the pairs listed (on stderr and in full in OUTPUT.unlabelled.txt) with their
        reasons counted, and the command that asks for those alone; that command against
        a judge that answers properly asks for them alone. With --max-unlabelled 0.5: exit
        0, the count said."""
        server = server_factory("--unreadable", "0.34")  # type: ignore[operator]
        arguments = _arguments(files, server.url, "--task", "relevance")
        assert main(arguments) == 3
        err = capsys.readouterr().err
        rows = [json.loads(line) for line in files["labelled"].read_text().splitlines()]
        missing = [f"{r['id']}/{doc}" for r in rows for doc in r["metadata"].get("unjudged", {})]
        assert 2 <= len(missing) <= 5
        share = f"{len(missing) / 9:.1%}"
        assert (
            f"slotwise: {len(missing)} of the 9 items asked about ({share}) were left "
            f"unlabelled: {len(missing)} unreadable answer(s), 0 failed call(s); more than "
            "--max-unlabelled 0.05" in err
        )
        assert f"{len(missing)} judge answer(s) could not be read" in err
        assert all(pair in err for pair in missing)
        listed = files["labelled"].with_suffix(".unlabelled.txt")
        assert listed.read_text() == "".join(f"unreadable\t{pair}\n" for pair in missing)
        cache = files["labelled"].with_suffix(".cache.sqlite")
        rerun = shlex.join(["slotwise", *arguments])
        assert f"to ask for those alone (the cache {cache} has the rest): {rerun}" in err

        healthy = server_factory()  # type: ignore[operator]
        again = [healthy.url if a == server.url else a for a in arguments]
        assert main(again) == 0
        assert healthy.stats()["requests"] == len(missing)
        assert not listed.exists()

        capsys.readouterr()
        server = server_factory("--unreadable", "0.34")  # type: ignore[operator]
        files["labelled"] = files["labelled"].with_name("other.jsonl")
        assert _annotate(files, server.url, "--task", "relevance", "--max-unlabelled", "0.5") == 0
        assert (
            f"slotwise: {len(missing)} of the 9 items asked about ({share}) were left "
            "unlabelled: " in capsys.readouterr().err
        )

    def test_failed_calls_count_and_synthesize_has_the_bound_too(
        self, server_factory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """synthesize: failed calls (here the question of one passage of six, HTTP 500)
        count against --max-unlabelled as annotate's unreadable answers do: 1 of the 11
        items asked about (6 questions, 5 checks)."""
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text(
            "".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in PASSAGES.items())
        )
        canned = tmp_path / "canned.json"
        canned.write_text(json.dumps({"Follow the Leader was released": {"status": 500}}))
        server = server_factory("--canned", str(canned))  # type: ignore[operator]
        arguments = [
            "synthesize", str(corpus), "--questions", "6", "--oversample", "1",
            "--output", str(tmp_path / "q.yaml"),
            "--annotator", "openai-compatible", "--base-url", server.url, "--model", "tiny-chat",
            "--backoff", "0.01", "--retries", "0",
        ]  # fmt: skip
        assert main(arguments) == 3
        err = capsys.readouterr().err
        assert (
            "1 of the 11 items asked about (9.1%) were left unlabelled: 0 unreadable "
            "answer(s), 1 failed call(s); more than --max-unlabelled 0.05" in err
        )
        assert (tmp_path / "q.unlabelled.txt").read_text() == "failed\td3 (question)\n"
        assert main([*arguments, "--max-unlabelled", "0.1"]) == 0


class TestJudges:
    def test_relevance_judge_then_utility(
        self, server_factory: object, files: dict[str, Path]
    ) -> None:
        """--task relevance,utility: the judge (Figure 5) decides `relevant`."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        # forget the given relevance labels: the judge must supply them
        rows = [json.loads(line) for line in files["dataset"].read_text().splitlines()]
        for row in rows:
            del row["expected_output"]["relevance"]
        files["dataset"].write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert _annotate(files, server.url, "--task", "relevance,utility") == 0
        labelled = [json.loads(line) for line in files["labelled"].read_text().splitlines()]
        for row in labelled:
            sid = row["id"]
            relevance = row["expected_output"]["relevance"]
            assert relevance == {d: int(d in RELEVANT[sid]) for d in RETRIEVED[sid]}
            assert {d: u["relevant"] for d, u in row["expected_output"]["utility"].items()} == {
                d: d in RELEVANT[sid] for d in RETRIEVED[sid]
            }

    def test_utility_without_relevance_labels_is_an_input_error(
        self, server_factory: object, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """No relevance labels and no judge: a clear error before any model call."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        rows = [json.loads(line) for line in files["dataset"].read_text().splitlines()]
        del rows[0]["expected_output"]["relevance"]
        files["dataset"].write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert _annotate(files, server.url) == 2
        assert "--task relevance" in capsys.readouterr().err
        assert server.stats()["requests"] == 0

    def test_grader_outcomes_feed_correlate(self, server_factory: object, tmp_path: Path) -> None:
        """--task grade turns metadata.response into metadata.outcome (Figure 6)."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        responses = {"c1": "It is Paris.", "c2": "NO-RESPONSE", "c3": "Lyon"}
        samples = [
            {
                "id": cid,
                "input": {"question": "What is the capital of France?"},
                "expected_output": {"relevance": ["d1"], "answers": ["Paris"]},
                "metadata": {"question": "q1", "response": response},
            }
            for cid, response in responses.items()
        ]
        dataset, labelled = tmp_path / "contexts.json", tmp_path / "graded.json"
        dataset.write_text(json.dumps({"samples": samples}))
        code = main(
            [
                "annotate",
                str(dataset),
                "--task",
                "grade",
                "--output",
                str(labelled),
                "--annotator",
                "openai-compatible",
                "--base-url",
                server.url,
                "--model",
                "judge",
            ]
        )
        assert code == 0
        graded = samples_of(read_dataset(labelled)[1])
        assert {s.id: s.metadata["outcome"] for s in graded} == {
            "c1": "correct",
            "c2": "abstained",
            "c3": "wrong",
        }


class TestKillAndResume:
    @pytest.mark.slow
    def test_sigkill_then_resume_then_free(
        self, server_factory: object, files: dict[str, Path]
    ) -> None:
        """SIGKILL mid-run keeps the finished work; the rerun computes only the rest and is
        complete and correct; a third run makes no model call."""
        # 9 calls of 0.4 s each: Ctrl-C after 2 leaves ~2.8 s before the run would end
        server = server_factory("--mode", "logprobs", "--delay", "0.4")  # type: ignore[operator]
        cache = files["labelled"].with_suffix(".cache.sqlite")
        command = [
            sys.executable, "-m", "engine.cli", "annotate", str(files["dataset"]),
            "--outputs", str(files["outputs"]), "--output", str(files["labelled"]),
            "--annotator", "openai-compatible", "--base-url", server.url, "--model", "tiny-chat",
            "--concurrency", "1",
        ]  # fmt: skip
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        done = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if cache.exists():
                try:
                    with sqlite3.connect(cache) as connection:
                        (done,) = connection.execute("SELECT COUNT(*) FROM annotations").fetchone()
                except sqlite3.OperationalError:
                    done = 0
                if done >= 3:
                    break
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        assert 3 <= done < 9 and not files["labelled"].exists()
        with sqlite3.connect(cache) as connection:
            (kept,) = connection.execute("SELECT COUNT(*) FROM annotations").fetchone()
        before = server.stats()["requests"]

        rerun = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
        assert rerun.returncode == 0, rerun.stderr
        assert (
            f"{kept} from the cache, {9 - kept} computed with {9 - kept} model calls"
            in rerun.stderr
        )
        stats = server.stats()
        assert stats["requests"] - before == 9 - kept
        # every prompt was computed once, but for at most the one in flight when killed
        assert sum(stats["by_prompt"].values()) <= 10 and len(stats["by_prompt"]) == 9
        utility = _utility(files["labelled"])
        for sid, docs in RETRIEVED.items():
            for doc in docs:
                assert utility[sid][doc]["p_no_response"] == pytest.approx(
                    _expected(sid, doc), abs=1e-12
                )

        third = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
        assert third.returncode == 0
        assert "0 computed with 0 model calls" in third.stderr
        assert server.stats()["requests"] == stats["requests"]

    @pytest.mark.slow
    def test_ctrl_c_says_how_to_resume(
        self, server_factory: object, files: dict[str, Path]
    ) -> None:
        """SIGINT: exit 130, the cache keeps finished work, the message says how to resume."""
        # 9 calls of 0.4 s each: Ctrl-C after 2 leaves ~2.8 s before the run would end
        server = server_factory("--mode", "logprobs", "--delay", "0.4")  # type: ignore[operator]
        cache = files["labelled"].with_suffix(".cache.sqlite")
        command = [
            sys.executable, "-m", "engine.cli", "annotate", str(files["dataset"]),
            "--outputs", str(files["outputs"]), "--output", str(files["labelled"]),
            "--annotator", "openai-compatible", "--base-url", server.url, "--model", "tiny-chat",
            "--concurrency", "1",
        ]  # fmt: skip
        # a shell runs background jobs with SIGINT ignored, and Python then never raises
        # KeyboardInterrupt: give the child the default disposition, as a terminal would
        process = subprocess.Popen(
            command,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and server.stats()["requests"] < 2:
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
        assert process.returncode == 130
        assert "interrupted" in err and "run the same command again to resume" in err
        with sqlite3.connect(cache) as connection:
            (kept,) = connection.execute("SELECT COUNT(*) FROM annotations").fetchone()
        assert kept >= 1
