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
from ..identifiers import require_subject
from ..keys import KeySet
from ..state import FoldResult
from .base import EventStore, Refused, Stored, StoreError

__all__ = ["WORKERS", "AsyncEventStore"]

T = TypeVar("T")

#: An append waiting for the drain: the input, its ``subject=``, and where its result goes.
_Waiting = tuple[Any, "str | None", "asyncio.Future[Stored | Refused]", asyncio.AbstractEventLoop]

#: Threads of an :class:`AsyncEventStore`'s executor: how many calls run at once (appends
#: waiting together share a commit, so a few threads carry many tasks' appends).
WORKERS = 8


def _settle(settled: list[tuple[asyncio.Future[Any], Any]]) -> None:
    """On the loop: hand each waiting append its result (or the commit's error)."""
    for future, result in settled:
        if future.done():  # cancelled meanwhile (what it appended is stored all the same)
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


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

    async def _run(self, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise StoreError("the store is closed", path=self.store.location)
        return await off_loop(self._executor, call, *args, **kwargs)

    async def append(self, item: Any, *, subject: str | None = None) -> Stored | Refused:
        """:meth:`~merge.store.EventStore.append`: durable once the await returns.

        The appends awaited meanwhile are stored together: one worker thread drains them, all
        that wait, by one :meth:`~merge.store.EventStore.append_many` (one commit) per ``subject=``, while the
        next ones gather. A burst of a thousand appends costs the loop a future each, not a
        thread hand-off each. If the shared commit fails, every append in it raises its
        :class:`~merge.store.StoreError` (nothing of it is stored); a refused input is its
        own :class:`~merge.store.Refused`, as ever.
        """
        if self._closed:
            raise StoreError("the store is closed", path=self.store.location)
        if subject is not None:
            subject = require_subject(subject)  # a caller's mistake: raised here, not in the batch
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Stored | Refused] = loop.create_future()
        with self._waiting_lock:
            self._waiting.append((item, subject, future, loop))
            start, self._draining = not self._draining, True
        if start:
            self._executor.submit(self._drain)
        return await future

    def _drain(self) -> None:
        """On a worker thread: store every waiting append, batch after batch, until none waits."""
        while True:
            with self._waiting_lock:
                batch, self._waiting = self._waiting, []
                if not batch:
                    self._draining = False
                    return
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
                    # A loop closed meanwhile has nobody awaiting: what was stored stays stored.
                    with suppress(RuntimeError):
                        loop.call_soon_threadsafe(_settle, settled)

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
        """Close the store (on a worker thread), then end the threads. Idempotent; any call after
        it raises :class:`~merge.store.StoreError`."""
        if self._closed:
            return
        await self._run(self.store.close)
        self._closed = True
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncEventStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
