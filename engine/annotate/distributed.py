"""Annotation batches on Ray workers (``slotwise annotate --executor ray``).

The driver (this process) keeps the SQLite cache: the runner looks it up, sends only the
uncached items here in batches, and writes each batch to the cache as soon as it comes
back, so an interrupted run resumes as a local one does. The workers are a pool of Ray
actors, each holding one annotator, built on the worker from its constructor arguments
(the model is loaded once per actor, not per batch). Retries and waits on the endpoint's
limits are decided here, by the runner's rules (:meth:`Runner.retry`); a batch whose retries run
out, or whose request the endpoint refused, becomes a failure of its items and the others
go on, as on threads; the rate limit is shared by all workers through a small limiter
actor; the calls and tokens each batch cost come back with its values and are summed here.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.annotate.base import (
    AnnotationError,
    AnnotationInterrupted,
    BatchResult,
    ItemError,
    RetryableError,
)
from engine.annotate.outcomes import FailedStreak

if TYPE_CHECKING:
    from engine.annotate.runner import Job, Runner, Stats

__all__ = ["ActorPool", "run_on_ray"]


class _Worker:
    """A Ray actor holding one annotator (unpickled, i.e. built, on the worker)."""

    def __init__(self, annotator: Any, limiter: Any) -> None:
        self.annotator = annotator
        self.limiter = limiter

    def identity(self) -> tuple[str, str, str]:
        a = self.annotator
        return a.name, a.model, a.cache_key()

    def _throttle(self) -> None:
        if self.limiter is not None:
            import ray

            delay = ray.get(self.limiter.reserve.remote())
            if delay > 0:
                time.sleep(delay)

    def compute(self, call: Any, inputs: Sequence[Any]) -> tuple[str, Any]:
        """("ok", BatchResult), ("retry", RetryableError), ("failed", reason: these
        items alone) or ("error", message: the run stops)."""
        try:
            result: BatchResult = call(self.annotator, list(inputs), self._throttle)
        except RetryableError as error:
            return "retry", error
        except ItemError as error:
            return "failed", str(error)
        except AnnotationError as error:
            return "error", str(error)
        return "ok", result

    def close(self) -> None:
        self.annotator.close()


class _Limiter:
    """The rate limit shared by all workers: each request reserves the next slot."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next = 0.0

    def reserve(self) -> float:
        """Seconds the caller waits before its request."""
        now = time.monotonic()
        start = max(now, self.next)
        self.next = start + self.interval
        return start - now


class ActorPool:
    """``size`` actors holding ``annotator`` (and a limiter actor for ``rate_limit``)."""

    def __init__(
        self,
        ray: Any,
        annotator: Any,
        size: int,
        *,
        rate_limit: float | None = None,
        actor_options: dict[str, Any] | None = None,
    ) -> None:
        self.ray = ray
        self.limiter = ray.remote(num_cpus=0)(_Limiter).remote(rate_limit) if rate_limit else None
        worker = ray.remote(_Worker).options(**(actor_options or {}))
        self.actors = [worker.remote(annotator, self.limiter) for _ in range(size)]
        try:
            identities = ray.get([a.identity.remote() for a in self.actors])
        except Exception as error:
            self.close()
            cause = getattr(error, "cause", None) or error
            raise AnnotationError(
                f"cannot build the {annotator.name} annotator on a Ray worker: "
                f"{type(cause).__name__}: {cause}"
            ) from error
        expected = (annotator.name, annotator.model, annotator.cache_key())
        for identity in identities:
            if tuple(identity) != expected:
                self.close()
                raise AnnotationError(
                    f"the annotator built on a Ray worker is {identity}, not {expected} as "
                    "here: the workers must have the same model (and slotwise) as the driver"
                )

    def close(self) -> None:
        refs = [a.close.remote() for a in self.actors]
        try:
            self.ray.wait(refs, num_returns=len(refs), timeout=10)
        finally:
            for actor in [*self.actors, self.limiter]:
                if actor is not None:
                    self.ray.kill(actor)
            self.actors = []


def _pool(runner: Runner, annotator: Any) -> ActorPool:
    pool: ActorPool | None = runner._pools.get(id(annotator))
    if pool is None:
        executor: Any = runner.executor
        ray = executor.init()
        size = executor.in_flight or runner.concurrency
        pool = ActorPool(
            ray,
            annotator,
            size,
            rate_limit=runner.rate_limit,
            actor_options=executor.actor_options,
        )
        runner._pools[id(annotator)] = pool
    return pool


def run_on_ray(
    runner: Runner,
    job: Job,
    batches: list[list[int]],
    results: dict[str, tuple[Any, bool]],
    stats: Stats,
) -> None:
    """Computes ``batches`` of ``job`` on the runner's Ray actor pool, each cached here as
    it finishes. After an error that stops the run, the batches in flight finish (and are
    cached) before it is raised; Ctrl-C does not wait."""
    if job.remote is None:
        raise AnnotationError(f"{job.task}: this job cannot run on Ray (it has no remote form)")
    remote = job.remote
    pool = _pool(runner, remote.annotator)
    ray = pool.ray
    line = runner._progress(job.task, sum(map(len, batches)), stats)
    waiting: deque[tuple[list[int], int]] = deque((b, 0) for b in batches)
    delayed: list[tuple[float, list[int], int]] = []  # (when, batch, retries spent)
    idle = list(pool.actors)
    running: dict[Any, tuple[Any, list[int], int]] = {}
    failure: BaseException | None = None
    streak = FailedStreak(job.task)
    try:
        while running or (failure is None and (waiting or delayed)):
            if line is not None:
                line.show()
            now = time.monotonic()
            for item in [d for d in delayed if d[0] <= now]:
                delayed.remove(item)
                waiting.appendleft((item[1], item[2]))
            while failure is None and idle and waiting:
                batch, spent = waiting.popleft()
                actor = idle.pop()
                inputs = [remote.inputs[i] for i in batch]
                running[actor.compute.remote(remote.call, inputs)] = (actor, batch, spent)
            if not running:
                time.sleep(min(0.05, max(0.0, min(d[0] for d in delayed) - now)))
                continue
            done, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
            for ref in done:
                actor, batch, spent = running.pop(ref)
                idle.append(actor)
                try:
                    status, payload = ray.get(ref)
                    if status == "error":
                        raise AnnotationError(payload)
                    if status == "retry":
                        retry = runner.retry(job, spent, payload, stats)
                        if retry is not None:
                            delayed.append((time.monotonic() + retry[0], batch, retry[1]))
                            continue
                        entries = runner.gave_up(job, batch, spent, payload)
                    elif status == "failed":
                        entries = runner.failed(job, batch, payload)
                    else:
                        entries = runner.record(job, batch, payload, stats)
                    for entry in entries:
                        results[entry.key] = (entry.value, entry.truncated)
                    streak.add(entries)
                    if line is not None:
                        line.show(len(batch))
                except Exception as error:
                    failure = failure or error
        if failure is not None:
            raise failure
    except KeyboardInterrupt:
        for ref in running:
            with contextlib.suppress(Exception):  # best effort: close() kills the actors
                ray.cancel(ref)
        raise AnnotationInterrupted("interrupted") from None
    finally:
        if line is not None:
            line.stop()
