"""The async face (merge.aio, merge.store.aio): what docs/embedding.md ("asyncio") promises.

- a coroutine never runs the engine or a store on the event loop's thread (every call of the
  engine and of the store's primitives is watched, and the loop's thread never seen);
- the results are the synchronous calls' own, byte for byte, on both paths;
- bad input is returned (Rejection, Refused), never raised, on every task;
- many tasks appending at once: every await that returned is stored (they share commits);
- a closed AsyncEventStore refuses with a StoreError.

AsyncEventStore.append (a Future, not a coroutine; docs/embedding.md, "asyncio"):
- a burst made in one step of the loop is one batch, one append_many;
- its results come back a slice of SETTLE_SLICE per loop iteration;
- a failed commit raises its StoreError in every append of it; a mistake of the call is raised
  by the await; a cancelled append is stored all the same;
- aclose stores the appends handed over before it; loops of several threads share one object.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import merge.engine
import merge.store.aio
from merge import EventStatus, InputError, Merger, Rejection, canonical_json, fold
from merge.aio import AsyncMerger, afold
from merge.store import AsyncEventStore, EventStore, Refused, Stored, StoreError
from merge.store.aio import SETTLE_SLICE

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


def test_append_is_a_future_that_gather_wait_for_and_ensure_future_take(store: EventStore) -> None:
    inputs = list(history(1, 3))

    async def main() -> None:
        async with AsyncEventStore(store) as astore:
            future = astore.append(inputs[0])
            assert isinstance(future, asyncio.Future)
            assert asyncio.ensure_future(future) is future
            assert isinstance(await future, Stored)
            assert isinstance(await asyncio.wait_for(astore.append(inputs[1]), timeout=60), Stored)
            # The same input again: the store's idempotence, through the batch.
            again = await asyncio.gather(astore.append(inputs[2]), astore.append(inputs[2]))
            assert [result.new for result in again] == [True, False]  # type: ignore[union-attr]

    asyncio.run(main())


def test_a_burst_made_in_one_step_is_one_batch(
    connect: Callable[[], EventStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = connect()
    inputs = list(history(1, 50))
    calls: list[int] = []
    real = store.append_many

    def counted(items: Any, *, subject: str | None = None) -> Any:
        calls.append(len(items))
        return real(items, subject=subject)

    monkeypatch.setattr(store, "append_many", counted)

    async def main() -> list[Stored | Refused]:
        async with AsyncEventStore(store) as astore:
            return await asyncio.gather(*(astore.append(item) for item in inputs))

    results = asyncio.run(main())
    assert calls == [len(inputs)]  # the drain started after the step: it found them all
    assert [result.event_id for result in results] == [  # type: ignore[union-attr]
        stored.event_id  # type: ignore[union-attr]
        for stored in connect().append_many(inputs)
    ]  # in the order of the calls


def test_a_bursts_results_come_back_a_slice_per_loop_iteration(store: EventStore) -> None:
    inputs = list(history(1, 2 * SETTLE_SLICE + 5))
    done_when_the_first_woke: list[int] = []

    async def main() -> list[Stored | Refused]:
        async with AsyncEventStore(store) as astore:
            futures = [astore.append(item) for item in inputs]
            futures[0].add_done_callback(
                lambda _: done_when_the_first_woke.append(sum(future.done() for future in futures))
            )
            return await asyncio.gather(*futures)

    results = asyncio.run(main())
    assert all(isinstance(result, Stored) for result in results)
    # Its callback runs in the iteration after its slice was settled: the next is not yet.
    assert done_when_the_first_woke == [SETTLE_SLICE]


def test_a_failed_commit_raises_its_store_error_in_every_append_of_it(
    connect: Callable[[], EventStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = connect()
    inputs = list(history(1, 10))

    @contextmanager
    def failing(self: EventStore) -> Iterator[Callable[[Any], list[bool]]]:
        raise StoreError("the disk is full", path=self.location)
        yield  # (a generator: the context manager's body, never reached)

    monkeypatch.setattr(type(store), "_group_writer", failing)

    async def main() -> list[object]:
        raised: list[object] = []
        async with AsyncEventStore(store) as astore:
            for future in [astore.append(item) for item in inputs]:
                try:
                    raised.append(("returned", await future))
                except StoreError as exc:
                    raised.append(exc)
        return raised

    outcomes = asyncio.run(main())
    assert len(outcomes) == len(inputs)
    assert all(isinstance(outcome, StoreError) and "disk is full" in str(outcome) for outcome in outcomes)
    monkeypatch.undo()
    assert connect().count(S1) == 0


def test_a_mistake_of_the_call_is_raised_by_the_await(store: EventStore) -> None:
    async def main() -> None:
        async with AsyncEventStore(store) as astore:
            future = astore.append(history(1, 1)[0], subject=7)  # type: ignore[arg-type]
            with pytest.raises(InputError, match="subject must be a string"):
                await future

    asyncio.run(main())


def test_a_cancelled_append_is_stored_all_the_same(connect: Callable[[], EventStore]) -> None:
    store = connect()
    inputs = list(history(1, 12))

    async def main() -> list[Stored | Refused]:
        async with AsyncEventStore(store) as astore:
            futures = [astore.append(item) for item in inputs]
            futures[3].cancel()
            # (bounded: a settling that stumbled on the cancelled one would leave the rest waiting)
            rest = await asyncio.wait_for(asyncio.gather(*futures[:3], *futures[4:]), timeout=60)
            assert futures[3].cancelled()
            return rest

    rest = asyncio.run(main())
    assert all(isinstance(result, Stored) for result in rest)
    assert sorted(connect().events(S1)) == sorted(inputs)


def test_aclose_stores_the_appends_handed_over_before_it(connect: Callable[[], EventStore]) -> None:
    store = connect()
    inputs = list(history(1, 20))

    async def main() -> list[Stored | Refused]:
        astore = AsyncEventStore(store)
        futures = [astore.append(item) for item in inputs]  # their drain has not started yet
        await astore.aclose()
        late = astore.append(inputs[0])
        with pytest.raises(StoreError, match="closed"):
            await late
        return await asyncio.gather(*futures)

    results = asyncio.run(main())
    assert all(isinstance(result, Stored) for result in results)
    assert sorted(connect().events(S1)) == sorted(inputs)


def test_loops_of_several_threads_share_one_async_store(connect: Callable[[], EventStore]) -> None:
    store = connect()
    subjects = [1, 2, 3, 4]
    results: dict[int, list[Stored | Refused]] = {}
    astore = AsyncEventStore(store)
    # Every loop hands its appends over before any drain starts: one batch of all four loops,
    # whose results each go back to the loop that awaits them.
    all_handed = threading.Barrier(len(subjects), timeout=60)

    def serve(number: int) -> None:
        async def main() -> list[Stored | Refused]:
            futures = [astore.append(item) for item in history(number, 15)]
            all_handed.wait()
            return await asyncio.wait_for(asyncio.gather(*futures), timeout=60)

        # (debug: a loop's futures settled from another thread raise there, not pass unseen)
        results[number] = asyncio.run(main(), debug=True)

    threads = [threading.Thread(target=serve, args=(number,), daemon=True) for number in subjects]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    asyncio.run(astore.aclose())
    assert sorted(results) == subjects
    for number in subjects:
        assert [result.subject for result in results[number]] == [subject_of(number)] * 15  # type: ignore[union-attr]
        assert sorted(connect().events(subject_of(number))) == sorted(history(number, 15))
