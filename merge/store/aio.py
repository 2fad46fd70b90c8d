"""The async face of an event store, for services on asyncio: :class:`AsyncEventStore`.

It wraps one :class:`~merge.store.EventStore` (any adapter) and runs every call on a thread of
its own executor, never on the event loop's thread (the contract of :mod:`merge.aio`): the
same store object, the same results, awaited. Since a store object may be shared by threads
(each its own connection), the executor's threads are just more of them: appends awaited at
the same moment from many tasks share commits (group commit, :meth:`~merge.store.EventStore.append_many`),
and the same object may serve a threaded part of the service at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from os import PathLike
from types import TracebackType
from typing import Any, TypeVar

from ..aio import AsyncMerger, off_loop
from ..errors import MergeError
from ..identifiers import require_subject
from ..keys import KeySet
from ..state import FoldResult
from .base import EventStore, Refused, Stored, StoreError

__all__ = ["SETTLE_SLICE", "WORKERS", "AsyncEventStore"]

T = TypeVar("T")

#: An append waiting for the drain: the input, its ``subject=``, and where its result goes.
_Waiting = tuple[Any, "str | None", "asyncio.Future[Stored | Refused]", asyncio.AbstractEventLoop]

#: Threads of an :class:`AsyncEventStore`'s executor: how many calls run at once (appends
#: waiting together share a commit, so a few threads carry many tasks' appends).
WORKERS = 8


#: How many waiting appends one iteration of the loop settles: a burst's results are handed out a
#: slice per loop iteration, so the tasks they wake run a slice at a time, between the loop's
#: other callbacks (a ticker, a request's I/O), never a thousand in one iteration.
SETTLE_SLICE = 64


def _settle(
    loop: asyncio.AbstractEventLoop, settled: list[tuple[asyncio.Future[Any], Any]], start: int = 0
) -> None:
    """On the loop: hand each waiting append of one slice its result (or the commit's error),
    then leave the next slice to the loop's next iteration."""
    end = start + SETTLE_SLICE
    for future, result in settled[start:end]:
        if future.done():  # cancelled meanwhile (what it appended is stored all the same)
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
    if end < len(settled):
        # Queued behind the wake-ups these results just scheduled: the loop's next iteration
        # runs this slice's awaiters, then settles the next slice.
        loop.call_soon(_settle, loop, settled, end)


def _post(loop: asyncio.AbstractEventLoop, settled: list[tuple[asyncio.Future[Any], Any]]) -> None:
    """From any thread: settle ``settled`` on ``loop`` (its futures belong to it)."""
    # A loop closed meanwhile has nobody awaiting: what was stored stays stored.
    with suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, loop, settled)


class AsyncEventStore:
    """``store``'s calls, awaited: each runs on one of ``workers`` threads of this object's own.

    ``await astore.aclose()`` (or ``async with``) closes the store and ends the threads.
    Errors are the store's own (:class:`~merge.store.StoreError`); bad input is a
    :class:`~merge.store.Refused`, returned.
    """

    def __init__(self, store: EventStore, *, workers: int = WORKERS) -> None:
        self.store = store
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="pith-merge store")
        self._closed = False
        # Appends waiting for the drain (see append): a plain lock, taken on the loop only to
        # put one in the list; the drain takes the whole list at once.
        self._waiting: list[_Waiting] = []
        self._waiting_lock = threading.Lock()
        self._draining = False
        self._drain_lock = threading.Lock()
        # The loops whose drain start is queued (see _start_drain): one call_soon per step.
        self._starting: set[asyncio.AbstractEventLoop] = set()

    def _closed_error(self) -> StoreError:
        return StoreError("the store is closed", path=self.store.location)

    async def _run(self, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise self._closed_error()
        return await off_loop(self._executor, call, *args, **kwargs)

    def append(self, item: Any, *, subject: str | None = None) -> asyncio.Future[Stored | Refused]:
        """:meth:`~merge.store.EventStore.append`, as an :class:`asyncio.Future` to await: durable
        once the await returns.

        Called on a running loop; ``await astore.append(item)``, ``asyncio.gather`` and
        ``asyncio.wait_for`` take it as a coroutine's result, and ``asyncio.ensure_future`` as
        it is (it is no coroutine: ``asyncio.create_task`` refuses it). A plain method, not an
        ``async def``, so that a burst of appends costs the loop a future each, not a task each
        (a task's creation, first step and wake-up). A mistake of the call (a closed store, a
        ``subject=`` that is no subject) is raised by the await, as a coroutine's would be.

        The appends awaited meanwhile are stored together: one worker thread drains them, all
        that wait, by one :meth:`~merge.store.EventStore.append_many` (one commit) per
        ``subject=``, while the next ones gather. The drain starts after the loop's current
        step, so a burst made in one step is one batch, and its admission does not compete for
        the GIL with the step making it. The results come back a slice of
        :data:`~merge.store.aio.SETTLE_SLICE` per loop iteration. If the shared commit fails,
        every append in it raises its :class:`~merge.store.StoreError` (nothing of it is
        stored); a refused input is its own :class:`~merge.store.Refused`, as ever. Cancelling
        the await does not take the input back: once handed over it is stored all the same.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Stored | Refused] = loop.create_future()
        try:
            if self._closed:
                raise self._closed_error()
            if subject is not None:
                subject = require_subject(subject)  # a caller's mistake: its own, not the batch's
        except MergeError as exc:
            future.set_exception(exc)
            return future
        with self._waiting_lock:
            self._waiting.append((item, subject, future, loop))
            schedule = loop not in self._starting
            self._starting.add(loop)
        if schedule:
            loop.call_soon(self._start_drain, loop)
        return future

    def _start_drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop, after the step that appended: hand what waits to a worker thread."""
        with self._waiting_lock:
            self._starting.discard(loop)
            start, self._draining = not self._draining, True
        if not start:  # the running drain takes these too
            return
        try:
            self._executor.submit(self._drain)
        except RuntimeError:  # the executor was shut down (aclose) meanwhile: nothing drains now
            with self._waiting_lock:
                waiting, self._waiting, self._draining = self._waiting, [], False
            closed = self._closed_error()
            for _, _, future, owner in waiting:
                _post(owner, [(future, closed)])

    def _drain(self) -> None:
        """On a worker thread: store every waiting append, batch after batch, until none waits."""
        with self._drain_lock:  # (aclose's own drain waits here for one under way)
            while self._store_batch():
                pass

    def _store_batch(self) -> bool:
        """Store the appends waiting now (one append_many per subject=) and send each its
        result; False when none waited (and the drain ends)."""
        with self._waiting_lock:
            batch, self._waiting = self._waiting, []
            if not batch:
                self._draining = False
                return False
        by_subject: dict[str | None, list[_Waiting]] = {}
        for waiting in batch:
            by_subject.setdefault(waiting[1], []).append(waiting)
        for subject, group in by_subject.items():
            outcome: list[Stored | Refused] | BaseException
            try:
                outcome = self.store.append_many([waiting[0] for waiting in group], subject=subject)
            except BaseException as exc:  # every append of the commit hears it
                outcome = exc
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
            for index, (_, _, future, loop) in enumerate(group):
                result = outcome if isinstance(outcome, BaseException) else outcome[index]
                by_loop.setdefault(loop, []).append((future, result))
            for loop, settled in by_loop.items():
                _post(loop, settled)
        return True

    async def append_many(
        self, items: Iterable[Any], *, subject: str | None = None
    ) -> list[Stored | Refused]:
        """:meth:`~merge.store.EventStore.append_many` (``items`` is read on a worker thread: a list)."""
        return await self._run(self.store.append_many, items, subject=subject)

    async def fold(self, subject: str, *, keys: KeySet | Iterable[Mapping[str, Any]]) -> FoldResult:
        """:meth:`~merge.store.EventStore.fold`."""
        return await self._run(self.store.fold, subject, keys=keys)

    async def merger(self, subject: str, *, keys: KeySet | Iterable[Mapping[str, Any]]) -> AsyncMerger:
        """:meth:`~merge.store.EventStore.merger`, faced for asyncio (its calls on this store's threads)."""
        merger = await self._run(self.store.merger, subject, keys=keys)
        return AsyncMerger(merger, executor=self._executor)

    async def subjects(self) -> list[str]:
        """:meth:`~merge.store.EventStore.subjects`."""
        return await self._run(self.store.subjects)

    async def head(self, subject: str) -> int:
        """:meth:`~merge.store.EventStore.head`."""
        return await self._run(self.store.head, subject)

    async def count(self, subject: str) -> int:
        """:meth:`~merge.store.EventStore.count`."""
        return await self._run(self.store.count, subject)

    async def events(self, subject: str) -> list[bytes]:
        """The subject's stored inputs in arrival order (:meth:`~merge.store.EventStore.events`, listed)."""
        return await self._run(lambda: list(self.store.events(subject)))

    async def verify_integrity(self) -> None:
        """:meth:`~merge.store.EventStore.verify_integrity`."""
        await self._run(self.store.verify_integrity)

    async def backup(self, dest: str | PathLike[str]) -> int:
        """:meth:`~merge.store.EventStore.backup`."""
        return await self._run(self.store.backup, dest)

    async def aclose(self) -> None:
        """Store the appends handed over before it, close the store (on a worker thread), then
        end the threads. Idempotent; any call after it raises :class:`~merge.store.StoreError`."""
        if self._closed:
            return
        self._closed = True  # no call is taken from now on; those made before are served
        try:
            await off_loop(self._executor, self._drain_and_close)
        finally:
            self._executor.shutdown(wait=False)

    def _drain_and_close(self) -> None:
        # An append made in the step that closes has not started its drain yet (_start_drain
        # runs after the step): drained here, it is stored, not refused by a closed store.
        self._drain()
        self.store.close()

    async def __aenter__(self) -> AsyncEventStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
