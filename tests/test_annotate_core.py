"""The annotation machinery without a model: prompts, the judge's answer reader, the
SQLite cache under concurrent writers, the runner (retries, rate limit) and the
annotator registry."""

from __future__ import annotations

import importlib.metadata
import multiprocessing
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from engine.annotate import prompts
from engine.annotate.base import (
    GROUP,
    AnnotationError,
    AnnotatorLoadError,
    AnnotatorRegistry,
    BatchResult,
    RetryableError,
    Throttle,
    UnknownAnnotatorError,
    UtilityItem,
)
from engine.annotate.cache import Cache, Entry, cache_key
from engine.annotate.jobs import utility_job
from engine.annotate.runner import Runner

PAPER = Path(__file__).resolve().parent / "data" / "udcg-paper-prompts.txt"


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines())


class TestPrompts:
    @pytest.mark.parametrize(
        "template",
        [prompts.UTILITY_SYSTEM, prompts.RELEVANCE_TEMPLATE, prompts.GRADE_TEMPLATE],
        ids=["figure-4", "figure-5", "figure-6"],
    )
    def test_verbatim_from_the_paper(self, template: str) -> None:
        """Each prompt appears word for word in the paper (line-end blanks aside)."""
        assert _normalise(template.replace("{{", "{").replace("}}", "}")) in _normalise(
            PAPER.read_text("utf-8")
        )

    def test_user_message_as_the_reference(self) -> None:
        """Document, question, answer cue, as the reference implementation builds them."""
        assert prompts.utility_user_message("Q?", "P.") == "Document: P.\nQuestion: Q?\nAnswer:"

    def test_filled_templates(self) -> None:
        """The judge prompts carry the question, the answers list and the text."""
        text = prompts.relevance_prompt("who?", ["Ann", "Bo"], "Ann did it.")
        assert (
            "Question: who?\nAcceptable answers list: ['Ann', 'Bo']\nDocument: Ann did it." in text
        )
        assert '"grade": "A" or "B"' in text
        assert "Predicted answer: NO-RESPONSE" in prompts.grade_prompt("q", ["a"], "NO-RESPONSE")


def _entry(n: int) -> Entry:
    key, inputs = cache_key("utility", "a", "m", "", "v1", [f"q{n % 50}", f"p{n}"])
    return Entry(key, "utility", "a", "m", "", "v1", inputs, n / 1000)


def _write(path: str, start: int) -> None:
    cache = Cache(path)
    for n in range(start, start + 300, 3):
        cache.put_many([_entry(n), _entry(n + 1), _entry(n + 2)])
    cache.close()


class TestCache:
    def test_keys_depend_on_every_part(self) -> None:
        """Annotator, model, settings, prompt version and each text change the key."""
        base = ("utility", "a", "m", "s", "v1", ["q", "p"])
        keys = {cache_key(*base)[0]}
        for i, changed in enumerate(["grade", "b", "m2", "s2", "v2", ["q", "p2"]]):
            parts = list(base)
            parts[i] = changed
            keys.add(cache_key(*parts)[0])  # type: ignore[arg-type]
        assert len(keys) == 7

    def test_round_trip_and_wal(self, tmp_path: Path) -> None:
        """Values come back as stored; the database is in WAL mode."""
        cache = Cache(tmp_path / "c.sqlite")
        cache.put_many([_entry(1), attrs_evolve(_entry(2), truncated=True)])
        assert cache.get_many([_entry(1).key, _entry(2).key, "missing"]) == {
            _entry(1).key: (0.001, False),
            _entry(2).key: (0.002, True),
        }
        (mode,) = sqlite3.connect(tmp_path / "c.sqlite").execute("PRAGMA journal_mode").fetchone()
        assert mode == "wal"
        cache.close()

    def test_concurrent_processes_and_threads(self, tmp_path: Path) -> None:
        """Four processes and four threads writing overlapping rows: all there, file intact."""
        path = str(tmp_path / "c.sqlite")
        Cache(path).close()
        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=_write, args=(path, s)) for s in (0, 150, 300, 450)]
        for p in processes:
            p.start()
        cache = Cache(path)
        threads = [
            threading.Thread(
                target=lambda s=s: [cache.put_many([_entry(n)]) for n in range(s, s + 100)]
            )
            for s in (0, 200, 400, 600)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in processes:
            p.join(60)
            assert p.exitcode == 0
        assert len(cache) == 750
        assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)
        cache.close()


def attrs_evolve(entry: Entry, **changes: object) -> Entry:
    import attrs

    return attrs.evolve(entry, **changes)


class Flaky:
    """A real (model-free) annotator: p = len(passage) / 100; fails the first calls."""

    name: ClassVar[str] = "flaky"
    model = "length"

    def __init__(self, failures: int = 0, permanent: bool = False) -> None:
        self.failures = failures
        self.permanent = permanent
        self.calls = 0

    def cache_key(self) -> str:
        return ""

    def p_no_response(self, items: Sequence[UtilityItem], throttle: Throttle) -> BatchResult:
        throttle()
        self.calls += 1
        if self.calls <= self.failures:
            raise (AnnotationError if self.permanent else RetryableError)("503")
        return BatchResult([len(i.passage) / 100 for i in items], calls=1, prompt_tokens=len(items))

    def generate(
        self, prompts: Sequence[list[dict[str, str]]], max_tokens: int, throttle: Throttle
    ) -> BatchResult:
        raise NotImplementedError

    def close(self) -> None:
        pass


ITEMS = [UtilityItem("q", "p" * n) for n in range(1, 11)]


class TestRunner:
    def test_batches_retries_and_counts(self, tmp_path: Path) -> None:
        """Retryable failures are retried; calls (the failed ones too), tokens and the
        retried calls are counted."""
        annotator = Flaky(failures=2)
        runner = Runner(Cache(tmp_path / "c.sqlite"), batch_size=4, backoff=0.001)
        values = runner.run(utility_job(annotator, ITEMS))
        assert [v for v, _ in values] == [n / 100 for n in range(1, 11)]
        assert (runner.stats.calls, runner.stats.retried, runner.stats.prompt_tokens) == (5, 2, 10)

    def test_permanent_error_is_not_retried(self, tmp_path: Path) -> None:
        """An AnnotationError stops the run at once."""
        annotator = Flaky(failures=1, permanent=True)
        runner = Runner(Cache(tmp_path / "c.sqlite"), retries=5, backoff=0.001)
        with pytest.raises(AnnotationError, match="503"):
            runner.run(utility_job(annotator, ITEMS))
        assert annotator.calls == 1

    def test_finished_batches_survive_a_failure(self, tmp_path: Path) -> None:
        """Batches done before the failing one are cached; the rerun computes the rest."""

        class FailsThird(Flaky):
            def p_no_response(
                self, items: Sequence[UtilityItem], throttle: Throttle
            ) -> BatchResult:
                if self.calls == 2 and not self.failures:
                    self.calls += 1
                    raise AnnotationError("boom")
                return super().p_no_response(items, throttle)

        cache = Cache(tmp_path / "c.sqlite")
        with pytest.raises(AnnotationError):
            Runner(cache, batch_size=2).run(utility_job(FailsThird(), ITEMS))
        kept = len(cache)  # the two batches before, and any that finished meanwhile
        assert kept in (4, 6, 8)
        again = Flaky()
        runner = Runner(cache, batch_size=2)
        runner.run(utility_job(again, ITEMS))
        assert (runner.stats.cached, runner.stats.computed) == (kept, 10 - kept)
        assert again.calls == (10 - kept) // 2

    def test_duplicates_are_computed_once(self, tmp_path: Path) -> None:
        """The same (question, passage) twice is one computation."""
        annotator = Flaky()
        runner = Runner(Cache(tmp_path / "c.sqlite"))
        runner.run(utility_job(annotator, [ITEMS[0], ITEMS[0], ITEMS[1]]))
        assert annotator.calls == 2

    def test_rate_limit(self, tmp_path: Path) -> None:
        """At 40 requests/s, 8 requests take at least 7/40 s, even on 4 threads."""
        runner = Runner(Cache(tmp_path / "c.sqlite"), concurrency=4, rate_limit=40)
        started = time.monotonic()
        runner.run(utility_job(Flaky(), ITEMS[:8]))
        assert time.monotonic() - started >= 7 / 40 - 0.01


class TestRegistry:
    def test_lists_without_importing(self) -> None:
        """The built-in annotators are listed; listing imports neither them nor torch."""
        code = (
            "import sys; from engine.annotate import AnnotatorRegistry; "
            "print(AnnotatorRegistry().names()); "
            "print(any(m in sys.modules for m in ('torch', 'httpx', 'engine.annotate.transformers_annotator')))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert out.stdout.split("\n")[:2] == ["['openai-compatible', 'transformers']", "False"]

    def test_unknown_name_suggests(self) -> None:
        """An unknown name lists what is available and the close match."""
        with pytest.raises(UnknownAnnotatorError, match=r"Did you mean: transformers\?"):
            AnnotatorRegistry().get("transformer")

    def test_broken_plugin_names_its_entry_point(self) -> None:
        """A plugin that fails to import is an AnnotatorLoadError with the cause."""
        registry = AnnotatorRegistry(
            lambda: [importlib.metadata.EntryPoint("bad", "no_such_module_xyz:Cls", GROUP)]
        )
        with pytest.raises(AnnotatorLoadError, match=re.escape("ModuleNotFoundError")) as info:
            registry.get("bad")
        assert isinstance(info.value.__cause__, ImportError)

    def test_not_an_annotator(self) -> None:
        """An entry point to something that is not an annotator class is refused."""
        registry = AnnotatorRegistry(
            lambda: [importlib.metadata.EntryPoint("x", "json:dumps", GROUP)]
        )
        with pytest.raises(AnnotatorLoadError, match="not a slotwise annotator"):
            registry.get("x")

    def test_conflicting_names(self) -> None:
        """Two plugins claiming one name is an error naming both."""
        registry = AnnotatorRegistry(
            lambda: [
                importlib.metadata.EntryPoint("flaky", "a:A", GROUP),
                importlib.metadata.EntryPoint("flaky", "b:B", GROUP),
            ]
        )
        with pytest.raises(AnnotatorLoadError, match=r"claimed by several plugins: .*a:A.*b:B"):
            registry.get("flaky")

    def test_loads_a_protocol_class(self) -> None:
        """A valid plugin loads, and satisfies the Annotator protocol."""
        from engine.annotate import Annotator

        registry = AnnotatorRegistry(
            lambda: [importlib.metadata.EntryPoint("flaky", "test_annotate_core:Flaky", GROUP)]
        )
        cls = registry.get("flaky")
        assert isinstance(cls(), Annotator)
