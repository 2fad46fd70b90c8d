"""The async face (merge.aio, merge.store.aio): what docs/embedding.md ("asyncio") promises.

- a coroutine never runs the engine or a store on the event loop's thread (every call of the
  engine and of the store's primitives is watched, and the loop's thread never seen);
- the results are the synchronous calls' own, byte for byte, on both paths;
- bad input is returned (Rejection, Refused), never raised, on every task;
- many tasks appending at once: every await that returned is stored (they share commits);
- a closed AsyncEventStore refuses with a StoreError.
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import pytest

import merge.engine
from merge import EventStatus, Merger, Rejection, canonical_json, fold
from merge.aio import AsyncMerger, afold
from merge.store import AsyncEventStore, EventStore, Refused, Stored, StoreError

from .events import KEYS, history, subject_of

S1 = subject_of(1)


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pure":
        monkeypatch.setenv("PITH_MERGE_PURE", "1")
    return str(request.param)


@pytest.fixture
def threads_seen(monkeypatch: pytest.MonkeyPatch, store: EventStore) -> set[int]:
    """The threads that ran the engine or the store's primitives from now on."""
    seen: set[int] = set()

    def watched(owner: Any, name: str) -> None:
        real = getattr(owner, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            seen.add(threading.get_ident())
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, spy)

    for name in ("add", "extend", "extend_admitted"):
        watched(merge.engine.Merger, name)
    watched(merge.aio, "fold")
    for name in ("_group_writer", "_transaction", "read", "head", "count", "subjects", "close"):
        watched(type(store), name)
    return seen


def test_nothing_runs_on_the_loops_thread(store: EventStore, threads_seen: set[int]) -> None:
    inputs = list(history(1, 30))

    async def main() -> int:
        async with AsyncEventStore(store) as astore:
            await asyncio.gather(*(astore.append(item) for item in inputs))
            await astore.append_many(inputs[:5])
            await astore.fold(S1, keys=KEYS)
            merger = await astore.merger(S1, keys=KEYS)
            await merger.add(inputs[0])
            await merger.state_sha256()
            await astore.subjects()
            await astore.count(S1)
            await afold(inputs, subject=S1, keys=KEYS)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads_seen, "the spies saw nothing"
    assert loop_thread not in threads_seen


def test_the_async_face_gives_the_synchronous_results(store: EventStore, path: str) -> None:
    inputs = list(history(1, 40))
    shuffled = inputs[:]
    random.Random(3).shuffle(shuffled)
    bad = [b"{oops", b"[]", "\ud800"]
    expected = fold(inputs, subject=S1, keys=KEYS)

    async def main() -> None:
        astore = AsyncEventStore(store)
        stored = await asyncio.gather(*(astore.append(item) for item in [*shuffled, *bad]))
        assert all(isinstance(result, Stored) for result in stored[: len(inputs)])
        assert all(isinstance(result, Refused) for result in stored[len(inputs) :])
        assert sorted(await astore.events(S1)) == sorted(inputs)
        folded = await astore.fold(S1, keys=KEYS)
        assert canonical_json(folded.state) == canonical_json(expected.state)
        assert (await afold(shuffled, subject=S1, keys=KEYS)) == fold(shuffled, subject=S1, keys=KEYS)

        merger = AsyncMerger(Merger(subject=S1, keys=KEYS))
        results = await asyncio.gather(*(merger.add(item) for item in [*shuffled, *bad]))
        assert all(isinstance(result, EventStatus) for result in results[: len(inputs)])
        assert all(isinstance(result, Rejection) for result in results[len(inputs) :])
        assert await merger.state_sha256() == expected.state_sha256
        assert await merger.state_json() == canonical_json(expected.state)
        status, digest = await merger.add_and_hash(inputs[0])
        assert isinstance(status, EventStatus)
        assert status.duplicate
        assert digest == expected.state_sha256
        assert (await merger.state()) == expected.state
        await astore.aclose()

    asyncio.run(main())


def test_a_closed_async_store_refuses_with_a_store_error(store: EventStore) -> None:
    async def main() -> None:
        astore = AsyncEventStore(store)
        await astore.aclose()
        await astore.aclose()  # idempotent
        with pytest.raises(StoreError, match="closed"):
            await astore.append(history(1, 1)[0])

    asyncio.run(main())
