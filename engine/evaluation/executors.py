"""Where chunks of samples are scored: in this process (``local``), in a pool of threads
of this process (``threads``: numpy releases the GIL, so chunks score on every core), or
on a Ray cluster (``ray``, the optional extra ``ray``: ``pip install 'slotwise[ray]'``).

An executor maps a function over tasks and yields the results in task order, holding a
bounded number of tasks in flight, so streamed evaluations keep bounded memory whichever
executor runs them.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, runtime_checkable

from engine.cores import available, limited, one_blas_thread
from engine.errors import MissingDependencyError
from engine.lazy_pandas import defer_pandas

__all__ = [
    "IN_PROCESS",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "ThreadExecutor",
    "on_its_cpus",
    "resolve_executor",
]

T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class Executor(Protocol):
    """Runs ``fn`` over ``tasks`` (picklable, for remote executors) and yields the
    results in task order."""

    name: str

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]: ...


class LocalExecutor:
    """Scores every task in this process, one at a time."""

    name = "local"

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        return map(fn, tasks)

    def __repr__(self) -> str:
        return "LocalExecutor()"


class ThreadExecutor:
    """Scores tasks in a pool of ``workers`` threads (default: one per CPU it may use, see
    :func:`engine.cores.available`), at most twice as many in flight as there are workers."""

    name = "threads"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers or available()

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        with (
            one_blas_thread(),
            ThreadPoolExecutor(self.workers, thread_name_prefix="slotwise") as pool,
        ):
            pending: deque[Future[R]] = deque()
            for task in tasks:
                pending.append(pool.submit(fn, task))
                if len(pending) >= 2 * self.workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    def __repr__(self) -> str:
        return f"ThreadExecutor(workers={self.workers})"


#: The executors that score in this process (their tasks need not be compact).
IN_PROCESS = ("local", "threads")


class RayExecutor:
    """Scores tasks as Ray tasks on a cluster.

    ``address`` is passed to ``ray.init`` when Ray is not initialised yet: None uses
    ``RAY_ADDRESS`` if set, else starts a local instance; ``"auto"`` joins the cluster
    ``ray start`` started on this machine. An address that does not answer, or refuses
    the driver, is a :class:`~engine.errors.ClusterError` naming it and the fix
    (:func:`engine.evaluation.cluster.connect`). ``runtime_env`` (Ray's: ``env_vars``,
    ``py_modules``, ``pip``, ``working_dir``) goes to ``ray.init``. ``in_flight`` bounds the tasks submitted and not yet collected (default:
    twice the cluster's CPUs), which bounds the driver's memory.

    For annotation (``slotwise annotate``) the executor runs a pool of ``in_flight``
    actors (default: the runner's concurrency), each holding one annotator, created with
    ``actor_options`` (e.g. ``{"num_gpus": 1}`` for a model on a GPU).
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        in_flight: int | None = None,
        actor_options: dict[str, Any] | None = None,
        runtime_env: dict[str, Any] | None = None,
        **init_options: Any,
    ) -> None:
        if in_flight is not None and in_flight < 1:
            raise ValueError("in_flight must be at least 1")
        if runtime_env is not None:
            init_options["runtime_env"] = runtime_env
        self.address = address
        self.in_flight = in_flight
        self.actor_options = dict(actor_options or {})
        self.init_options = init_options

    def init(self) -> Any:
        """The ``ray`` module, initialised (``address``, else ``RAY_ADDRESS``, else a
        local instance) unless it already is."""
        from engine.evaluation.cluster import connect

        ray = _ray()
        if not ray.is_initialized():
            connect(ray, self.address, **self.init_options)
        return ray

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        from engine.evaluation.cluster import fetch

        ray = self.init()
        limit = self.in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(on_its_cpus(fn))
        pending: deque[Any] = deque()
        for task in tasks:
            pending.append(remote.remote(task))
            if len(pending) >= limit:
                yield fetch(ray, pending.popleft())
        while pending:
            yield fetch(ray, pending.popleft())

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r})"


def on_its_cpus(work: Callable[..., R]) -> Callable[..., R]:
    """``work`` run as a Ray task on the CPUs Ray gave it: slotwise's threads and Arrow's
    at most that many (a task of one CPU on a node of many starts no thread per CPU of
    the node, which would put several threads on every core)."""

    @functools.wraps(work)
    def task(*args: Any) -> R:
        import ray

        defer_pandas()  # a worker scores without importing pandas, as the CLI does
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
        with limited(max(1, math.floor(cpus))):
            return work(*args)

    return task


def _ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise MissingDependencyError("the ray executor", "ray", error) from error
    return ray


def resolve_executor(
    executor: str | Executor | None, ray: Mapping[str, Any] | None = None
) -> Executor:
    """``"local"`` (or None), ``"threads"``, ``"ray"`` (``ray``: the ``RayExecutor``'s
    options, e.g. slotwise.yaml's ``address`` and ``runtime_env``), or an executor object."""
    if executor is None or executor == "local":
        return LocalExecutor()
    if executor == "threads":
        return ThreadExecutor()
    if executor == "ray":
        return RayExecutor(**(ray or {}))
    if isinstance(executor, str):
        raise ValueError(
            f"unknown executor {executor!r}; use 'local', 'threads', 'ray' or an executor object"
        )
    if not callable(getattr(executor, "map", None)):
        raise TypeError(f"{executor!r} is not an executor (it has no map(fn, tasks) method)")
    return executor
