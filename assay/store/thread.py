"""The store's own thread (docs/architecture.md, "The shared session's store"): one long-lived
thread per store object runs its transactions in order, off the trio thread, and wakes the
awaiting task through the run's token."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import trio

__all__ = ["StoreThread", "value_of"]

_IDLE_S = 30.0  # a store thread without work for this long ends (the next call starts another)

R = TypeVar("R")


def value_of(got: R | BaseException) -> R:
    """What a store thread's work gave: its value, or its exception raised."""
    if isinstance(got, BaseException):
        raise got
    return got


class StoreThread:
    """One long-lived thread that runs a store object's work in order, fed by a queue and
    waking the awaiting task through its run's token: one hop costs a queue put and a
    ``run_sync_soon`` (``trio.to_thread.run_sync`` adds a capacity limiter, a thread cache
    hand-off and a context copy: about twice as long, bench/bench_shared_session.py). The
    thread ends after :data:`_IDLE_S` idle or at :meth:`stop`; a later :meth:`run` starts
    another."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._queue: queue.SimpleQueue[Callable[[], None] | None] | None = None

    def _loop(self, jobs: queue.SimpleQueue[Callable[[], None] | None]) -> None:
        while True:
            try:
                job = jobs.get(timeout=_IDLE_S)
            except queue.Empty:
                with self._mutex:
                    if self._queue is jobs and jobs.empty():
                        self._queue = None
                        return
                continue
            if job is None:
                return
            job()

    def _put(self, job: Callable[[], None]) -> None:
        with self._mutex:
            jobs = self._queue
            if jobs is None:
                jobs = self._queue = queue.SimpleQueue()
                threading.Thread(target=self._loop, args=(jobs,), name="assay-store", daemon=True).start()
            jobs.put(job)

    def stop(self) -> None:
        """End the thread once the work queued is done."""
        with self._mutex:
            jobs, self._queue = self._queue, None
        if jobs is not None:
            jobs.put(None)

    async def run(self, work: Callable[[], R], stop: threading.Event | None = None) -> tuple[R | BaseException, bool]:
        """``work()`` on the thread; what it gave (:func:`value_of` unwraps it) and whether the
        awaiting task was cancelled meanwhile. A cancellation sets ``stop`` (the work gives up
        waiting for the lock) but the result is still awaited, so what the work did is always
        known; the cancellation itself comes at the caller's next checkpoint."""
        await trio.lowlevel.checkpoint_if_cancelled()
        token = trio.lowlevel.current_trio_token()
        task = trio.lowlevel.current_task()
        box: list[R | BaseException] = []
        cancelled: list[bool] = []

        def job() -> None:
            try:
                box.append(work())
            except BaseException as exc:  # handed to the awaiting task
                box.append(exc)
            try:
                token.run_sync_soon(trio.lowlevel.reschedule, task)
            except trio.RunFinishedError:  # not reached: the task waits for it
                pass

        def abort(_raise_cancel: Any) -> trio.lowlevel.Abort:
            cancelled.append(True)
            if stop is not None:
                stop.set()
            return trio.lowlevel.Abort.FAILED  # the result is still delivered

        self._put(job)
        await trio.lowlevel.wait_task_rescheduled(abort)
        return box[0], bool(cancelled)
