"""Calling a system once per sample and gathering each call's outcome (an output or an
error row) in dataset order: on threads of their own for a plain function or a framework
retriever, or concurrently on an event loop; at most ``concurrency`` calls at a time.

A call still running ``timeout`` seconds after it started is an error row, and its thread
is left to finish alone (a daemon thread, so that it holds up neither the run nor the
process's exit) while a new one takes its place; a cancelled call is an error row; Ctrl-C
stops the run at once, and what was gathered is kept (:class:`~engine.errors.RunInterrupted`).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from engine.evaluation.scorer import Outcomes
from engine.evaluation.systems import System
from engine.io.files import format_suffix
from engine.io.writer import atomic_write

if TYPE_CHECKING:
    import asyncio

__all__ = ["Collected", "call_in_threads", "call_on_loop", "in_thread", "progress_bar", "timed_out"]


@attrs.frozen
class Collected:
    """What a system returned for the samples of a dataset, before any scoring: the
    ``outputs`` (``{sample_id: actual_output}``, framework documents read as ``{"id",
    "text", "score"}`` items) and the ``errors`` (``{sample_id: reason}``: failed,
    timed-out and cancelled calls, invalid outputs). ``Evaluation.evaluate(collected)``
    scores them, the errors as error rows."""

    outputs: Mapping[str, Any]
    errors: Mapping[str, str]
    samples: int  # in the dataset
    dataset: str | None = None  # its name

    def __len__(self) -> int:
        """How many samples have an outcome (an output or an error)."""
        return len(self.outputs) + len(self.errors)

    def __repr__(self) -> str:
        return (
            f"<Collected {self.dataset or 'dataset'}: {len(self.outputs)} outputs, "
            f"{len(self.errors)} errors of {self.samples} samples>"
        )

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the outputs as an outputs file (atomically): a JSON object ``{sample_id:
        actual_output}``, or JSONL ``{"id", "actual_output"}`` lines for a ``.jsonl``
        path; what ``slotwise run --outputs``, ``slotwise annotate --runs`` and
        ``evaluate`` read. The errors are not written: their samples have no output."""
        if format_suffix(Path(path)) == ".jsonl":
            lines = (orjson.dumps({"id": i, "actual_output": o}) for i, o in self.outputs.items())
            atomic_write(path, b"".join(line + b"\n" for line in lines))
        else:
            atomic_write(path, orjson.dumps(dict(self.outputs), option=orjson.OPT_INDENT_2) + b"\n")
        return Path(path)


def timed_out(timeout: float) -> TimeoutError:
    """The error of a call that ran past ``timeout`` seconds."""
    return TimeoutError(f"no output within timeout={timeout:g} s")


class _Threads:
    """``call`` on each argument, on daemon threads, at most ``width`` running; a
    timed-out call's thread is abandoned (it exits when its call returns) and a new
    thread takes its place."""

    def __init__(self, call: Callable[[Any], Any], arguments: Sequence[Any], width: int) -> None:
        self._call = call
        self._arguments = arguments
        self.futures: list[Future[Any]] = [Future() for _ in arguments]
        self.started: list[float | None] = [None] * len(arguments)
        self._next = itertools.count()
        self._lock = threading.Lock()
        self._abandoned: set[int] = set()
        self._stopped = False
        for _ in range(min(width, len(arguments))):
            self._spawn()

    def _spawn(self) -> None:
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(self._work,), daemon=True)
        thread.name = "slotwise-system"
        thread.start()

    def _work(self) -> None:
        while not self._stopped:
            index = next(self._next)
            if index >= len(self.futures):
                return
            future = self.futures[index]
            if not future.set_running_or_notify_cancel():
                continue
            self.started[index] = time.monotonic()
            try:
                future.set_result(self._call(self._arguments[index]))
            except BaseException as error:  # the run records it; the thread goes on
                future.set_exception(error)
            with self._lock:
                if index in self._abandoned:
                    return

    def abandon(self, index: int) -> bool:
        """Leave call ``index`` to finish alone and start a thread in its place; False
        when it has finished meanwhile (its outcome stands)."""
        with self._lock:
            if self.futures[index].done():
                return False
            self._abandoned.add(index)
        self._spawn()
        return True

    def wait(self, index: int, timeout: float | None) -> bool:
        """Wait for call ``index``; False when it ran past ``timeout`` seconds."""
        future = self.futures[index]
        while not future.done():
            started = self.started[index]
            if timeout is None or started is None:
                wait([future], timeout=timeout)
                continue
            left = started + timeout - time.monotonic()
            if left <= 0:
                return False
            wait([future], timeout=left)
        return True

    def stop(self) -> None:
        """Start no more calls (those running finish alone)."""
        self._stopped = True
        for future in self.futures:
            future.cancel()


def call_in_threads(
    system: System,
    arguments: Sequence[tuple[str, Any]],
    outcomes: Outcomes,
    advance: Callable[[], None],
    *,
    concurrency: int,
    timeout: float | None,
) -> None:
    """Call ``system`` with each ``(sample_id, argument)`` and record the outcomes in
    order; a call past ``timeout`` seconds is an error row."""
    calls = _Threads(system.call, [argument for _, argument in arguments], max(1, concurrency))
    index = 0
    try:
        for index, (sample_id, _) in enumerate(arguments):
            if calls.wait(index, timeout) or not calls.abandon(index):
                outcomes.add(sample_id, calls.futures[index])
            else:
                assert timeout is not None
                outcomes.fail(sample_id, timed_out(timeout))
            advance()
    except KeyboardInterrupt:
        _finished(arguments[index:], calls.futures[index:], outcomes)
        raise
    finally:
        calls.stop()


def _finished(
    arguments: Sequence[tuple[str, Any]],
    calls: Sequence[Future[Any] | asyncio.Future[Any]],
    outcomes: Outcomes,
) -> None:
    """Record the calls that finished though the run had not reached them (it stops):
    what was done is kept."""
    for (sample_id, _), call in zip(arguments, calls, strict=True):
        if sample_id in outcomes.outputs or sample_id in outcomes.errors:
            continue
        if call.done() and not call.cancelled():
            with contextlib.suppress(Exception):  # on_error="raise": not now
                outcomes.add(sample_id, call)


async def call_on_loop(
    system: System,
    arguments: Sequence[tuple[str, Any]],
    outcomes: Outcomes,
    advance: Callable[[], None],
    *,
    concurrency: int,
    timeout: float | None,
) -> None:
    """:func:`call_in_threads` on the running event loop: an awaitable system is awaited,
    any other called on a daemon thread."""
    import asyncio  # (imported by whoever runs this coroutine)

    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(argument: Any) -> Any:
        async with limit:
            call = system.acall(argument) if system.awaitable else in_thread(system.call, argument)
            if timeout is None:
                return await call
            try:
                async with asyncio.timeout(timeout) as scope:
                    return await call
            except TimeoutError:
                if scope.expired():
                    raise timed_out(timeout) from None
                raise

    tasks = [asyncio.ensure_future(one(argument)) for _, argument in arguments]
    try:
        for (sample_id, _), task in zip(arguments, tasks, strict=True):
            await asyncio.wait([task])
            outcomes.add(sample_id, task)
            advance()
    except asyncio.CancelledError:  # the run is cancelled (Ctrl-C in run())
        _finished(arguments, tasks, outcomes)
        raise
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def in_thread(call: Callable[[Any], Any], argument: Any) -> asyncio.Future[Any]:
    """``call(argument)`` on a daemon thread of its own, as a future of the running loop
    (unlike ``asyncio.to_thread``, a call that never returns holds up no loop shutdown)."""
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile (a timeout, the run stopping)
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (call(argument), None)
        except BaseException as error:
            outcome = (None, error)
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it
            loop.call_soon_threadsafe(settle, *outcome)

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(work,), daemon=True, name="slotwise-system").start()
    return future


class progress_bar:
    """A rich progress bar of the system's calls on a terminal (or when forced); a no-op
    otherwise."""

    def __init__(self, enabled: bool | None, total: int) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total = total

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.console import Console
        from rich.progress import Progress

        self._bar = Progress(console=Console(stderr=True), transient=False)
        self._bar.start()
        task = self._bar.add_task("running system", total=self.total)
        return lambda: self._bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()
