"""Annotators on Ray workers (``slotwise annotate --executor ray``): a local Ray instance
started here, the openai-compatible annotator against the local chat-completions server
(engine.annotate.stand_in on 127.0.0.1, which the workers, on this machine, reach); the cache
stays in the driver. Results equal the local executor's; a re-run makes no call."""

from __future__ import annotations

import pickle
import sys
import time
from pathlib import Path

import pytest

from engine.annotate.base import UtilityItem
from engine.annotate.cache import Cache
from engine.annotate.http_annotator import OpenAICompatibleAnnotator
from engine.annotate.jobs import utility_job
from engine.annotate.runner import Runner
from engine.evaluation.executors import RayExecutor

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_annotate_http import (  # noqa: E402
    PASSAGES,
    QUESTIONS,
    RETRIEVED,
    _annotate,
    _expected,
    files,
)

__all__ = ["files"]  # a fixture used below


def _stats_line(err: str) -> str:
    return next(line for line in err.splitlines() if line.endswith("s") and "annotations:" in line)


def test_pickles_as_constructor_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """An annotator pickles as its constructor arguments (and its API key's variable), so
    a worker builds its own client: same model, same cache key, same key."""
    monkeypatch.setenv("SLOTWISE_TEST_KEY", "sk-secret")
    annotator = OpenAICompatibleAnnotator(
        "tiny-chat", base_url="http://127.0.0.1:1/v1", api_key_env="SLOTWISE_TEST_KEY", samples=3
    )
    data = pickle.dumps(annotator)
    monkeypatch.delenv("SLOTWISE_TEST_KEY")
    copy = pickle.loads(data)
    assert (copy.model, copy.cache_key()) == (annotator.model, annotator.cache_key())
    assert copy._client().headers["Authorization"] == "Bearer sk-secret"
    annotator.close()
    copy.close()


@pytest.mark.slow
class TestRay:
    def test_cli_identical_to_local_then_cached(
        self,
        ray_cluster: None,
        server_factory: object,
        files: dict[str, Path],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """relevance + utility on Ray workers write the local executor's labelled dataset
        with the same call and token counts; a second run makes 0 calls (the cache)."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        tasks = ("--task", "relevance,utility")
        local = dict(files, labelled=tmp_path / "local.jsonl")
        assert _annotate(local, server.url, *tasks, "--executor", "local") == 0
        local_line = _stats_line(capsys.readouterr().err)
        before = server.stats()["requests"]
        assert before == 18

        remote = dict(files, labelled=tmp_path / "ray.jsonl")
        assert _annotate(remote, server.url, *tasks, "--executor", "ray", "--concurrency", "3") == 0
        ray_line = _stats_line(capsys.readouterr().err)
        assert server.stats()["requests"] == before + 18
        assert remote["labelled"].read_text() == local["labelled"].read_text()
        # the same counts (calls, tokens, cached/computed), not the same seconds
        assert ray_line.rsplit(",", 1)[0] == local_line.rsplit(",", 1)[0]
        assert "18 computed with 18 model calls" in ray_line
        assert (tmp_path / "ray.cache.sqlite").exists()  # the cache is the driver's

        assert _annotate(remote, server.url, *tasks, "--executor", "ray") == 0
        assert "18 from the cache, 0 computed with 0 model calls" in capsys.readouterr().err
        assert server.stats()["requests"] == before + 18
        assert remote["labelled"].read_text() == local["labelled"].read_text()

    def test_runner_api_retries_and_rate_limit(
        self, ray_cluster: None, server_factory: object, tmp_path: Path
    ) -> None:
        """Runner(executor=RayExecutor(in_flight=2)): retryable failures (HTTP 503) are
        retried, counted and summed with the workers' calls; the rate limit holds over
        all workers together."""
        server = server_factory("--mode", "logprobs", "--fail-first", "2")  # type: ignore[operator]
        annotator = OpenAICompatibleAnnotator("tiny-chat", base_url=server.url)
        pairs = [(sid, doc) for sid, docs in RETRIEVED.items() for doc in docs]
        items = [UtilityItem(QUESTIONS[sid][0], PASSAGES[doc]) for sid, doc in pairs]
        cache = Cache(tmp_path / "c.sqlite")
        started = time.monotonic()
        with Runner(
            cache, backoff=0.01, rate_limit=20, executor=RayExecutor(in_flight=2)
        ) as runner:
            values = runner.run(utility_job(annotator, items))
            elapsed = time.monotonic() - started
            assert [v for v, _ in values] == pytest.approx(
                [_expected(sid, doc) for sid, doc in pairs], abs=1e-12
            )
            assert (runner.stats.computed, runner.stats.calls, runner.stats.retried) == (9, 11, 2)
            (pool,) = runner._pools.values()  # one pool of 2 actors, each with its annotator
            assert len(pool.actors) == 2
            assert runner.stats.prompt_tokens > 0
            assert server.stats()["requests"] == 11
            # 11 requests at 20/s over both workers: at least 10 intervals of 0.05 s
            assert elapsed >= 0.5
            again = runner.run(utility_job(annotator, items))
            assert again == values and runner.stats.calls == 11
        cache.close()
        annotator.close()

    def test_failure_keeps_finished_batches(
        self,
        ray_cluster: None,
        server_factory: object,
        files: dict[str, Path],
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """An endpoint that keeps failing: each item fails after its retries, as on
        threads; exit 3, the failures listed, the message says how to ask again."""
        server = server_factory("--mode", "fail")  # type: ignore[operator]
        code = _annotate(files, server.url, "--executor", "ray", "--retries", "1")
        assert code == 3
        err = capsys.readouterr().err
        assert "giving up after 2 attempts" in err and "to ask for those alone" in err
        assert "9 call(s) failed for good" in err
