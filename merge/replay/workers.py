"""The replay's processes: a pool of spawned workers that never outlive it, and its signals.

Workers are spawned (a fresh interpreter each), die with the replay (even killed by SIGKILL) and
leave Ctrl-C to it; SIGTERM and SIGHUP unwind the replay (workers killed, spill files removed)
before they take their usual effect.
"""

from __future__ import annotations

import atexit
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
from typing import Any, Final, TypeVar

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
        pool.shutdown(wait=True)  # in the try: Ctrl-C while the workers finish stops them too
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM, an error): stop the workers now rather than wait for
        # their partitions. ``_processes`` is the only handle before Python 3.14's kill_workers.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        raise


def _submitted(pool: ProcessPoolExecutor, task: Callable[..., _T], *args: Any) -> Future[_T] | None:
    """``pool.submit(task, *args)``, or ``None`` when the pool is broken: one of its workers died
    (killed, out of memory; issue 29 item 2), and the caller has the task's work done otherwise."""
    try:
        with _signals_held():  # a submit may start a worker
            return pool.submit(task, *args)
    except BrokenProcessPool:
        return None


#: The signals that stop a replay (Ctrl-C, and :func:`_stopped_by_signals`'): held by :func:`_signals_held`.
_HELD: Final = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP held back while what must not be cut in half is done: a
    worker started (issue 29 item 5), the spill directory made and taken charge of.

    A worker is born with them blocked (a thread's signal mask goes through fork and exec), and
    ignores Ctrl-C from its initializer on (:func:`_worker_init`): the Ctrl-C that reaches the
    whole process group never interrupts a worker's own start (its imports, the unpickling of
    its task: a traceback of multiprocessing). Here, one that arrives meanwhile is held too (it
    would leave a worker half started, waiting for what this process was writing it, or the
    pool's own thread half started, which the pool's shutdown then fails to join: a traceback),
    then delivered, under the handler that was there, once the block is done.
    """
    if threading.current_thread() is not threading.main_thread():
        # Python runs handlers in the main thread only: the mask, for the workers, is all there is.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    held: list[int] = []
    previous = {
        signum: signal.signal(signum, lambda signum, _: held.append(signum))
        for signum in _HELD
        if signal.getsignal(signum) not in (None, signal.SIG_IGN)  # None: not set from Python
    }
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one that was pending is held now
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for number in dict.fromkeys(held):
            signal.raise_signal(number)  # its handler's turn (Ctrl-C: KeyboardInterrupt)


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
    """A worker's first task: submitting it starts the worker (see :func:`replay`), and once it
    has run, the worker is ready to scan and fold. So it imports what those tasks run (the
    scan, the fold, the compiled path): meanwhile the replay reads the corpus itself, rather
    than handing files over to a worker that would import all that before reading one."""
    from . import corpus  # noqa: F401 (imported for what it imports)


def _worker_init(parent: int) -> None:
    """In each worker: die with the replay, and leave Ctrl-C to it (no worker tracebacks)."""
    # Ctrl-C reaches the whole process group; the replay stops its workers itself. It was
    # blocked since the worker was spawned (_signals_held): ignored now, then let through.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)
    if sys.platform == "linux":
        # PR_SET_PDEATHSIG (1): the kernel kills this worker when the replay dies, even by SIGKILL.
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    if os.getppid() != parent:  # the replay died before the line above took effect
        os._exit(1)
    # Registered last, so run first: the worker's end skips the interpreter's teardown.
    atexit.register(_end_at_once)


def _end_at_once() -> None:
    """A worker's end once its pool has let it go (multiprocessing has flushed its standard
    streams): the process ends without the interpreter's teardown (every module's objects
    freed one by one: ~20 ms of CPU a worker, which the replay waited for at its end,
    docs/performance.md), as a forked child of multiprocessing ends. Nothing of the worker
    needs it: its tasks closed their files and sent their results, and it runs no thread of
    its own."""
    os._exit(0)


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
