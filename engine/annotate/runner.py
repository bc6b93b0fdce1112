"""Running an annotation task over many items: cache look-up first, then the missing
items in batches on a thread pool, each batch retried on retryable failures (with
exponential backoff, up to ``retries`` times), the endpoint's limits (a 429 or 503 with
``Retry-After``) waited out without spending a retry (up to ``max_wait`` seconds in all),
requests throttled to a rate limit, a progress line on a terminal, and a tally of calls
(retried ones included) and tokens.

Each finished batch is written to the cache before the next result is awaited, so an
interrupted or failed run loses at most the batches in flight. Only answers are cached:
an answer its job cannot read (``Job.readable``) is returned but not stored, and a cached
answer is read again by the job's reader (``Job.reread``), so a stricter reader never
trusts an older reading. A batch whose retries run out, or whose request the endpoint
refuses, becomes a :class:`Failure` for each of its items and the other batches go on;
only a failure of the endpoint as a whole (401, 404...) or
:data:`~engine.annotate.outcomes.FAILED_IN_A_ROW` failed batches in a row stop the run.

With ``executor="ray"`` the batches run on Ray workers instead of threads
(:mod:`engine.annotate.distributed`): the cache stays here, in the driver, which sends
only the uncached items and writes each batch as it comes back.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import attrs

from engine.annotate.base import (
    AnnotationError,
    AnnotationInterrupted,
    BatchResult,
    ItemError,
    RateLimited,
    RetryableError,
    Throttle,
)
from engine.annotate.cache import Cache, Entry
from engine.annotate.distributed import run_on_ray
from engine.annotate.outcomes import FailedStreak, Failure
from engine.evaluation.executors import Executor, LocalExecutor, RayExecutor, resolve_executor
from engine.logs import log
from engine.redact import redact

__all__ = [
    "AnnotationInterrupted",
    "Job",
    "ProgressLine",
    "RateLimiter",
    "Remote",
    "Runner",
    "Stats",
]


@attrs.define
class Stats:
    """What a run did and cost."""

    items: int = 0
    cached: int = 0
    computed: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncated: int = 0
    retried: int = 0
    """Calls tried again (after a failure, or the endpoint's limit); counted in ``calls``."""
    waited: float = 0.0
    """Seconds waited on the endpoint's limits (wall clock: concurrent waits count once)."""
    unreadable: int = 0
    failed: int = 0
    seconds: float = 0.0

    def add(self, other: Stats) -> None:
        for field in attrs.fields(Stats):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def line(self) -> str:
        return (
            f"{self.items} annotations: {self.cached} from the cache, {self.computed} computed "
            f"with {self.calls} model calls ({self.retried} retried; {self.prompt_tokens} "
            f"prompt + {self.completion_tokens} completion tokens), {self.unreadable} "
            f"unreadable, {self.failed} failed, {self.truncated} passages truncated, "
            f"{self.waited:.0f}s waited on rate limits, {self.seconds:.1f}s"
        )

    def waits(self) -> str:
        """The retries and waits so far, for the progress line ("" while there are none)."""
        if not self.retried:
            return ""
        return f"{self.retried} retried calls, {self.waited:.0f} s waited on rate limits"


class RateLimiter:
    """At most ``rate`` requests per second across all threads (None: unlimited)."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


@attrs.frozen
class Remote:
    """How a worker elsewhere computes a batch of a job: ``call(annotator, [inputs[i] for
    i in batch], throttle)``, with the annotator and ``call`` pickled to it (an annotator
    pickles as its constructor arguments; ``call`` is a module-level function)."""

    annotator: Any
    call: Callable[[Any, Sequence[Any], Throttle], BatchResult]
    inputs: Sequence[Any]


@attrs.frozen
class Job:
    """One task over items: their cache entries (without values) in order, and the call
    that computes a batch of them."""

    task: str
    entries: Sequence[Entry]
    compute: Callable[[Sequence[int], Throttle], BatchResult]
    """Computes the values of the items at these indices (into ``entries``)."""
    remote: Remote | None = None
    """The same computation for a Ray worker (None: this job runs only here)."""
    reread: Callable[[Any], Any] | None = None
    """A cached value read again from what it stored (None: cached values are final)."""
    readable: Callable[[Any], bool] | None = None
    """Whether a value is an answer; one that is not is never cached (None: every one is)."""
    prompts: Sequence[str] = ()
    """Each item's prompt text, for cost estimates (empty: not a prompted job)."""

    def is_answer(self, value: Any) -> bool:
        return self.readable is None or self.readable(value)


class Runner:
    """Runs jobs against a cache with batching, concurrency, retries and a rate limit.

    ``retries``: how often a failed call is tried again (with ``backoff * 2**n`` seconds
    between, or the server's ``Retry-After``); the endpoint's limits (:class:`RateLimited`)
    are waited out without spending one, until ``max_wait`` seconds have been waited on
    them in all, when the run stops (:class:`AnnotationError`).

    ``executor``: ``"local"`` (default: ``concurrency`` threads here) or ``"ray"`` / a
    :class:`~engine.executors.RayExecutor` (a pool of Ray actors, each holding one
    annotator, built once: ``in_flight`` of them, default ``concurrency``). Call
    :meth:`close` (or use the runner as a context manager) to release the actors.
    """

    def __init__(
        self,
        cache: Cache,
        *,
        batch_size: int = 1,
        concurrency: int = 1,
        retries: int = 4,
        backoff: float = 0.5,
        max_wait: float = 300.0,
        rate_limit: float | None = None,
        progress: bool | None = None,
        executor: str | Executor | None = None,
    ) -> None:
        self.executor = resolve_executor(executor)
        if not isinstance(self.executor, LocalExecutor | RayExecutor):
            raise ValueError(
                f"annotation runs on the local or the Ray executor, not {self.executor!r}"
            )
        self.cache = cache
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.retries = retries
        self.backoff = backoff
        self.max_wait = max_wait
        self.rate_limit = rate_limit
        self.throttle = RateLimiter(rate_limit)
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.stats = Stats()
        self._stats_lock = threading.Lock()
        self._waits_end = 0.0  # when the latest wait on a limit ends (time.monotonic)
        self._pools: dict[int, Any] = {}  # id(annotator) -> its Ray actor pool

    def close(self) -> None:
        """Release the Ray actors (and their models); the cache is the caller's."""
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, job: Job) -> list[tuple[Any, bool]]:
        """(value, truncated) for every entry of the job, in order; the value of an item
        that failed is a :class:`Failure`."""
        started = time.monotonic()
        stats = Stats(items=len(job.entries))
        results, indices = self.lookup(job)
        stats.cached = sum(1 for e in job.entries if e.key in results)
        batches = [
            indices[i : i + self.batch_size] for i in range(0, len(indices), self.batch_size)
        ]
        try:
            self._run_batches(job, batches, results, stats)
        finally:
            stats.seconds = time.monotonic() - started
            stats.computed = sum(1 for i in indices if job.entries[i].key in results)
            outcomes = [
                results[job.entries[i].key][0] for i in indices if job.entries[i].key in results
            ]
            stats.failed = sum(isinstance(v, Failure) for v in outcomes)
            stats.unreadable = sum(
                not isinstance(v, Failure) and not job.is_answer(v) for v in outcomes
            )
            stats.computed -= stats.failed
            with self._stats_lock:
                self.stats.add(stats)
            log.info("annotate.job_finished", task=job.task, **attrs.asdict(stats))
        return [results[e.key] for e in job.entries]

    def lookup(self, job: Job) -> tuple[dict[str, tuple[Any, bool]], list[int]]:
        """The job's answers in the cache (key -> (value, truncated), read again by the
        job's reader) and the indices of the items to compute (each key once)."""
        results: dict[str, tuple[Any, bool]] = {}
        for key, (value, truncated) in self.cache.get_many(e.key for e in job.entries).items():
            value = value if job.reread is None else job.reread(value)
            if job.is_answer(value):
                results[key] = (value, truncated)
        pending: dict[str, int] = {}
        for index, entry in enumerate(job.entries):
            if entry.key not in results:
                pending.setdefault(entry.key, index)
        return results, list(pending.values())

    def _run_batches(
        self,
        job: Job,
        batches: list[list[int]],
        results: dict[str, tuple[Any, bool]],
        stats: Stats,
    ) -> None:
        if not batches:
            return
        if isinstance(self.executor, RayExecutor):
            run_on_ray(self, job, batches, results, stats)
            return
        line = self._progress(job.task, sum(map(len, batches)), stats)
        stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="annotate")
        interrupted = False
        streak = FailedStreak(job.task)
        # a few batches queued per thread, not all of them: waiting on every batch's future
        # each round made a run quadratic in its batches (94 pairs/s at 15,000 pairs)
        waiting = iter(batches)
        in_flight: dict[Future[list[Entry]], list[int]] = {}
        try:
            while True:
                while len(in_flight) < 2 * self.concurrency:
                    batch = next(waiting, None)
                    if batch is None:
                        break
                    in_flight[pool.submit(self._attempt, job, batch, stats, stop)] = batch
                if not in_flight:
                    break
                done, _ = wait(in_flight, timeout=0.2, return_when=FIRST_COMPLETED)
                # batches that returned first, so that an error leaves the others recorded;
                # the error that stopped the run before the batches it stopped
                for future in sorted(done, key=_stopping_last):
                    entries = future.result()  # raises an error that stops the run
                    for entry in entries:
                        results[entry.key] = (entry.value, entry.truncated)
                    streak.add(entries)
                    if line is not None:
                        line.show(len(in_flight[future]))
                    del in_flight[future]
                if line is not None:
                    line.show()
        except KeyboardInterrupt:
            interrupted = True
            raise AnnotationInterrupted("interrupted") from None
        finally:
            stop.set()
            # after an error, batches in flight finish (and are cached); Ctrl-C does not wait
            pool.shutdown(wait=not interrupted, cancel_futures=True)
            if line is not None:
                line.stop()

    def _attempt(
        self, job: Job, batch: list[int], stats: Stats, stop: threading.Event
    ) -> list[Entry]:
        """One batch, retried on retryable failures, and cached (from this worker thread,
        on its own connection) as soon as it is done; its items' :class:`Failure` when
        the retries run out or the endpoint refuses the request."""
        spent = 0
        while True:
            if stop.is_set():
                raise AnnotationInterrupted("stopped")
            try:
                result = job.compute(batch, self.throttle)
            except RetryableError as error:
                retry = self.retry(job, spent, error, stats)
                if retry is None:
                    return self.gave_up(job, batch, spent, error)
                delay, spent = retry
                stop.wait(delay)
                continue
            except ItemError as error:
                return self.failed(job, batch, str(error))
            except Exception:
                stop.set()  # the run stops here: no other batch starts a request
                raise
            return self.record(job, batch, result, stats)

    def retry(
        self, job: Job, spent: int, error: RetryableError, stats: Stats
    ) -> tuple[float, int] | None:
        """After a failed call (its calls and tokens counted), with ``spent`` retries
        spent: (the wait before trying again, the retries then spent), or None when the
        retries are spent. The endpoint's limit is waited out (its ``Retry-After``)
        without spending one; a wait past ``max_wait`` in all stops the run. Another
        failure waits the server's ``Retry-After``, else ``backoff * 2**spent``."""
        limited = isinstance(error, RateLimited)
        with self._stats_lock:
            stats.calls += error.calls
            stats.prompt_tokens += error.prompt_tokens
            stats.completion_tokens += error.completion_tokens
            if not limited and spent >= self.retries:
                return None
            delay = error.retry_after
            if delay is None:
                delay = self.backoff * 2**spent
            if limited:
                now = time.monotonic()
                added = max(0.0, now + delay - max(now, self._waits_end))
                waited = self.stats.waited + stats.waited
                if waited + added > self.max_wait:
                    raise AnnotationError(
                        f"{job.task}: {error}; waited {waited:.0f} s on the endpoint's rate "
                        f"limits in all, and another {delay:g} s would pass --max-wait "
                        f"{self.max_wait:g} s: run again later, or with a larger --max-wait"
                    )
                self._waits_end = max(self._waits_end, now + delay)
                stats.waited += added
            stats.retried += 1
        log.debug("annotate.retry", task=job.task, spent=spent, delay=delay, reason=str(error))
        return delay, spent + (not limited)

    def gave_up(
        self, job: Job, batch: Sequence[int], spent: int, error: RetryableError
    ) -> list[Entry]:
        """The batch's failures once its retries are spent."""
        reason = (
            f"giving up after {spent + 1} attempts (--retries {self.retries}; a larger "
            f"--retries tries longer): {error}"
        )
        return self.failed(job, batch, reason)

    @staticmethod
    def failed(job: Job, batch: Sequence[int], reason: str) -> list[Entry]:
        """The batch's entries as failures (not cached), the reason shown without secrets
        whichever annotator gave it."""
        reason = redact(reason)
        log.warning("annotate.failed", task=job.task, items=len(batch), reason=reason)
        return [attrs.evolve(job.entries[i], value=Failure(reason)) for i in batch]

    def record(
        self, job: Job, batch: Sequence[int], result: BatchResult, stats: Stats
    ) -> list[Entry]:
        """A computed batch's entries, its answers written to the cache, and tallied."""
        if len(result.values) != len(batch):
            raise AnnotationError(
                f"{job.task}: the annotator returned {len(result.values)} values for a batch of {len(batch)}"
            )
        truncated = result.truncated or [False] * len(batch)
        entries = [
            attrs.evolve(job.entries[i], value=v, truncated=t)
            for i, v, t in zip(batch, result.values, truncated, strict=True)
        ]
        self.cache.put_many([e for e in entries if job.is_answer(e.value)])
        with self._stats_lock:
            stats.calls += result.calls
            stats.prompt_tokens += result.prompt_tokens
            stats.completion_tokens += result.completion_tokens
            stats.truncated += sum(truncated)
        return entries

    def _progress(self, task: str, total: int, stats: Stats) -> ProgressLine | None:
        """The job's progress line (None: not shown)."""
        return ProgressLine(task, total, stats) if self.progress else None


class ProgressLine:
    """A job's progress on stderr, one line updated in place (rich): the items done and,
    once there are some, the retried calls and the time waited on rate limits; gone
    when the job ends (the tally line says the same)."""

    def __init__(self, task: str, total: int, stats: Stats) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.stats = stats
        self._progress = Progress(
            TextColumn(f"annotate {task}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[waits]}"),
            console=Console(file=sys.stderr),
            transient=True,
        )
        self._bar = self._progress.add_task(task, total=total, waits="")
        self._progress.start()

    def show(self, done: int = 0) -> None:
        """``done`` more items finished; the retries and waits so far."""
        self._progress.update(self._bar, advance=done, waits=self.stats.waits())

    def stop(self) -> None:
        self._progress.stop()


def _stopping_last(future: Future[list[Entry]]) -> tuple[bool, bool]:
    """The order a round's finished batches are taken in: those that returned, then the
    error that stops the run, then the batches it stopped before they began."""
    error = future.exception()
    return error is not None, isinstance(error, AnnotationInterrupted)
