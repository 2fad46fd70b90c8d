"""The async face of the engine: :func:`afold` and :class:`AsyncMerger`, for services on asyncio.

The contract (docs/embedding.md, "asyncio"): a coroutine here never runs the engine on the event
loop's thread. Every call is handed to a worker thread (an executor) and awaited, as httpx's
``AsyncClient`` faces the same transport as its ``Client``: one engine, one set of results,
byte for byte those of the synchronous calls. The loop only waits; what it still feels is the
GIL, which the compiled path releases while it judges and verifies (``bench/loop_stall.py``
measures the loop's longest stall). The stores' async face is
:class:`merge.store.aio.AsyncEventStore`.

Bad input stays data here too: a rejected input is a :class:`merge.Rejection` returned by
``await add(...)``, never an exception.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

from .batch import fold, fold_stream_encoded
from .canonical import canonical_json
from .engine import AddResult, Merger
from .keys import KeySet
from .native.fold import EncodedFold
from .signatures import SignatureVerifier
from .state import FoldResult, State

__all__ = ["AsyncMerger", "afold", "afold_json", "fold_json", "off_loop"]

T = TypeVar("T")


async def off_loop(executor: Executor | None, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` on a thread of ``executor`` (``None``: the loop's default), awaited.

    The one way this module and :mod:`merge.store.aio` reach the engine and the stores: the
    loop's thread never runs them.
    """
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, partial(call, *args, **kwargs))


async def afold(
    inputs: Iterable[Any],
    *,
    subject: str,
    keys: KeySet | Iterable[Mapping[str, Any]],
    threads: int | None = None,
    verifier: SignatureVerifier | None = None,
    executor: Executor | None = None,
) -> FoldResult:
    """:func:`merge.fold`, awaited: the same result, computed on a worker thread.

    ``inputs`` is read on that thread: give a list (or a store's rows), not an iterator that
    the loop's own tasks also advance. ``executor``: where to run it (``None``: the loop's
    default executor).
    """
    return await off_loop(
        executor, fold, inputs, subject=subject, keys=keys, threads=threads, verifier=verifier
    )


def fold_json(
    inputs: Iterable[Any],
    *,
    subject: str,
    keys: KeySet | Iterable[Mapping[str, Any]],
    threads: int | None = None,
) -> EncodedFold:
    """:func:`merge.fold` with the state as its canonical JSON (``state_json``), never decoded.

    What a service serves is the state's bytes (its ``state_sha256`` inside): on the compiled
    path they are the fold's own, and no State object is built (decoding a state of 4.3 MB
    holds the GIL about 22 ms in one piece, a stall of every other thread; see
    :func:`afold_json`). On the pure path, ``canonical_json(fold(...).state)``: the same bytes.
    """
    key_set = KeySet.parse(keys)
    encoded = fold_stream_encoded(inputs, subject=subject, keys=key_set, threads=threads)
    if encoded is not None:  # the compiled path's own bytes (merge.batch chooses the path)
        return encoded
    result = fold(inputs, subject=subject, keys=key_set, threads=threads)
    return EncodedFold(canonical_json(result.state), result.rejected, result.superseded or ())


async def afold_json(
    inputs: Iterable[Any],
    *,
    subject: str,
    keys: KeySet | Iterable[Mapping[str, Any]],
    threads: int | None = None,
    executor: Executor | None = None,
) -> EncodedFold:
    """:func:`fold_json`, awaited, on a worker thread: the fold a loop that must stay responsive
    waits for (no state object is decoded, so no long hold of the GIL on the compiled path)."""
    return await off_loop(executor, fold_json, inputs, subject=subject, keys=keys, threads=threads)


class AsyncMerger:
    """A :class:`merge.Merger` faced for asyncio: every call runs on a worker thread, in turn.

    ``merger``: the engine (yours, or :meth:`merge.store.aio.AsyncEventStore.merger`'s).
    ``lock``: what serializes the calls (by default a new ``threading.Lock``); pass the lock
    your threads hold around the same ``merger`` to share one engine between threaded and
    async code. ``executor``: where the calls run (``None``: the loop's default).
    """

    def __init__(
        self,
        merger: Merger,
        *,
        lock: AbstractContextManager[Any] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.merger = merger
        self.lock: AbstractContextManager[Any] = threading.Lock() if lock is None else lock
        self.executor = executor

    def _locked(self, call: Callable[[], T]) -> T:
        with self.lock:
            return call()

    async def _run(self, call: Callable[[], T]) -> T:
        return await off_loop(self.executor, self._locked, call)

    async def add(self, item: Any) -> AddResult:
        """:meth:`merge.Merger.add`: a :class:`merge.Rejection` or the :class:`merge.EventStatus`."""
        return await self._run(partial(self.merger.add, item))

    async def extend(self, items: Iterable[Any]) -> list[AddResult]:
        """:meth:`merge.Merger.extend` (``items`` is read on the worker thread: give a list)."""
        return await self._run(partial(self.merger.extend, items))

    async def add_and_hash(self, item: Any) -> tuple[AddResult, str]:
        """Add ``item`` and read ``state_sha256`` after it, in one turn: the state it made."""

        def both() -> tuple[AddResult, str]:
            return self.merger.add(item), self.merger.state_sha256

        return await self._run(both)

    async def state(self) -> State:
        """:attr:`merge.Merger.state`: a copy of the state, decoded on the worker thread."""
        return await self._run(lambda: self.merger.state)

    async def state_sha256(self) -> str:
        """:attr:`merge.Merger.state_sha256`."""
        return await self._run(lambda: self.merger.state_sha256)

    async def state_json(self) -> bytes:
        """:attr:`merge.Merger.state_json`: the state's canonical JSON."""
        return await self._run(lambda: self.merger.state_json)

    async def result(self) -> FoldResult:
        """:attr:`merge.Merger.result`."""
        return await self._run(lambda: self.merger.result)
