"""The replay's processes: a pool of spawned workers that never outlive it, and its signals.

Workers are spawned (a fresh interpreter each), die with the replay (even killed by SIGKILL) and
leave Ctrl-C to it; SIGTERM and SIGHUP unwind the replay (workers killed, spill files removed)
before they take their usual effect.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

_T = TypeVar("_T")

__all__: list[str] = []


@contextmanager
def _pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of spawned workers that never outlive the replay, whatever ends it."""
    # "spawn": a fresh interpreter per worker. Forking a process that may run threads (the
    # progress bar's refresher, a caller's) can deadlock the child.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init, initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM, an error): stop the workers now rather than wait for
        # their partitions. ``_processes`` is the only handle before Python 3.14's kill_workers.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _submitted(pool: ProcessPoolExecutor, task: Callable[..., _T], *args: Any) -> Future[_T] | None:
    """``pool.submit(task, *args)``, or ``None`` when the pool is broken: one of its workers died
    (killed, out of memory; issue 29 item 2), and the caller has the task's work done otherwise."""
    try:
        return pool.submit(task, *args)
    except BrokenProcessPool:
        return None


def _outcome(future: Future[_T] | None) -> _T | None:
    """What a task of :func:`_submitted` returned; ``None`` when it was not submitted or its
    worker died (the pool broke) before it returned."""
    if future is None:
        return None
    try:
        return future.result()
    except BrokenProcessPool:
        return None


def _ready() -> None:
    """A worker's first task: none, but submitting it starts the worker (see :func:`replay`)."""


def _worker_init(parent: int) -> None:
    """In each worker: die with the replay, and leave Ctrl-C to it (no worker tracebacks)."""
    # Ctrl-C reaches the whole process group; the replay stops its workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform == "linux":
        # PR_SET_PDEATHSIG (1): the kernel kills this worker when the replay dies, even by SIGKILL.
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    if os.getppid() != parent:  # the replay died before the line above took effect
        os._exit(1)


class _Signalled(BaseException):
    """SIGTERM or SIGHUP arrived: unwinds the replay (its cleanup runs), then the signal is re-sent."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signum)


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """While replaying: SIGTERM and SIGHUP end the replay cleanly, then take their usual effect.

    By default they kill a process on the spot, leaving its workers running and its spill files
    in TMPDIR. Here they unwind the replay (workers killed, spill files removed) and are then
    delivered again under the handler that was there before (by default: the process ends,
    killed by that signal). A signal the process ignores (``nohup``) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals
        return

    def stop(signum: int, frame: Any) -> None:
        raise _Signalled(signum)

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, stop)
    try:
        yield
    except _Signalled as caught:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        previous = {}
        os.kill(os.getpid(), caught.signum)  # the previous handler's turn (default: exit)
        raise KeyboardInterrupt from None  # a handler that returned: the replay is still stopped
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
