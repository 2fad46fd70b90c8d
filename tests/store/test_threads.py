"""One store object shared by the threads of a service (issue 38 item 3), on every adapter.

docs/embedding.md ("What is safe to share") promises exactly what these test: one store object
opened at start-up may be used by any number of threads at once, for appends (single and
batched), folds, reads and checks; every append that returned is stored, once; a call the
store cannot serve raises a :class:`StoreError`, never a driver's exception and never an
acknowledged append that is not stored; bad input is a :class:`Refused`, on every thread.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from merge import canonical_json, fold
from merge.store import EventStore, Refused, Stored, StoreError

from . import soak
from .adapters import CROSS_PROCESS, open_store
from .events import KEYS, history, subject_of

THREADS = 8


def run_threads(count: int, work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(i)`` on ``count`` threads started together; the exceptions they raised."""
    barrier = threading.Barrier(count, timeout=60)
    errors: list[BaseException] = []

    def body(number: int) -> None:
        try:
            barrier.wait()
            work(number)
        except BaseException as exc:  # collected for the assertion of the caller
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(number,)) for number in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    return errors


def test_threads_sharing_one_store_object_lose_no_acknowledged_append(store: EventStore) -> None:
    # Before: one PostgresStore shared by 8 threads acknowledged appends that never reached the
    # database, or failed with psycopg's "transaction commit at the wrong nesting level"; one
    # SQLiteStore refused every call off the thread that opened it.
    subjects = [subject_of(number) for number in range(1, THREADS + 1)]
    logs = {subject: list(history(number, 40)) for number, subject in enumerate(subjects, 1)}
    acknowledged: dict[str, list[bytes]] = {subject: [] for subject in subjects}
    refused: list[Refused] = []

    def work(number: int) -> None:
        subject = subjects[number]
        inputs = logs[subject]
        for start in range(0, len(inputs), 4):
            batch = [*inputs[start : start + 4], b"{oops"]  # bad input on every thread
            # Batches, and single appends too.
            results = store.append_many(batch) if start % 8 else [store.append(item) for item in batch]
            for item, result in zip(batch, results, strict=True):
                if isinstance(result, Stored):
                    acknowledged[subject].append(item)
                else:
                    refused.append(result)
            if start % 12 == 0:  # a reader among the writers
                store.fold(subject, keys=KEYS)

    errors = run_threads(THREADS, work)
    for subject in subjects:  # first: nothing acknowledged is missing
        stored = set(store.events(subject))
        missing = [item for item in acknowledged[subject] if item not in stored]
        assert missing == [], f"{len(missing)} acknowledged inputs of {subject} are not stored"
    assert errors == []
    assert len(refused) == len(subjects) * 10
    assert {result.code for result in refused} == {"not_json"}
    for subject in subjects:
        assert acknowledged[subject] == logs[subject]
        assert list(store.events(subject)) == logs[subject]
        state = store.fold(subject, keys=KEYS).state
        assert canonical_json(state) == canonical_json(fold(logs[subject], subject=subject, keys=KEYS).state)


def test_threads_appending_the_same_inputs_store_each_once(store: EventStore) -> None:
    subject = subject_of(1)
    inputs = list(history(1, 60))
    new: list[bytes] = []
    lock = threading.Lock()

    def work(number: int) -> None:
        mine = inputs[:]
        random.Random(number).shuffle(mine)
        for item in mine:
            result = store.append(item)
            assert isinstance(result, Stored)
            if result.new:
                with lock:
                    new.append(item)

    assert run_threads(THREADS, work) == []
    assert sorted(new) == sorted(inputs)  # each input new to exactly one append
    assert sorted(store.events(subject)) == sorted(inputs)
    assert canonical_json(store.fold(subject, keys=KEYS).state) == canonical_json(
        fold(list(store.events(subject)), subject=subject, keys=KEYS).state
    )


def test_a_closed_shared_store_refuses_every_thread_with_a_store_error(store: EventStore) -> None:
    store.append(history(1, 1)[0])
    store.close()
    outcomes: list[Any] = []

    def work(number: int) -> None:
        try:
            outcomes.append(store.append(history(1, 2)[1]))
        except StoreError as exc:
            outcomes.append(exc)

    assert run_threads(4, work) == []
    assert len(outcomes) == 4
    assert all(isinstance(outcome, StoreError) and "closed" in str(outcome) for outcome in outcomes)


def test_bad_input_is_refused_on_every_thread_never_raised(store: EventStore) -> None:
    bad = [b"{oops", b"[]", json.dumps({"event_id": "sha256:" + "0" * 64}).encode(), "\ud800", 7]
    results: list[Stored | Refused] = []

    def work(number: int) -> None:
        results.extend(store.append_many(bad))
        results.append(store.append(bad[number % len(bad)]))

    assert run_threads(THREADS, work) == []
    assert len(results) == THREADS * (len(bad) + 1)
    assert all(isinstance(result, Refused) for result in results)
    assert store.subjects() == []


@pytest.mark.parametrize("kill_after", [0, 3, 11, 25])
def test_appends_sharing_commits_are_durable_once_acknowledged(
    adapter: str, location: str, tmp_path: Path, kill_after: int
) -> None:
    # The short slice of `python -m tests.store.soak --threads 8` (make stress): 8 threads of a
    # writer process append one input per call to one store object and share commits; the
    # writer is killed with SIGKILL once `kill_after` appends have returned (others are under
    # way then): every acknowledged input is stored, and the store verifies.
    if adapter not in CROSS_PROCESS:
        pytest.skip(f"a {adapter} store lives in one process: no writer process can open it")
    open_store(adapter, location).close()
    acked = soak.group_round(adapter, location, kill_after + 1, tmp_path, kill_after, THREADS)
    assert acked >= kill_after


def test_appends_of_threads_at_the_same_moment_share_commits(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits: list[int] = []
    real = type(store)._group_writer

    @contextmanager
    def slow_commit(self: EventStore) -> Iterator[Callable[[list[Any]], list[bool]]]:
        stored: list[Any] = []
        with real(self) as store_rows:
            yield lambda rows: stored.extend(rows) or store_rows(rows)
            time.sleep(0.05)  # a slow disk: the others arrive while this commit is under way
        commits.append(len(stored))

    monkeypatch.setattr(type(store), "_group_writer", slow_commit)
    inputs = list(history(1, 4 * THREADS))

    def work(number: int) -> None:
        for item in inputs[number::THREADS]:
            assert isinstance(store.append(item), Stored)

    assert run_threads(THREADS, work) == []
    assert sum(commits) == len(inputs)
    assert len(commits) < len(inputs) // 2, commits  # shared: far fewer commits than appends
    assert max(commits) > 1
    assert sorted(store.events(subject_of(1))) == sorted(inputs)


def test_a_gathering_leader_is_woken_once_a_commit_not_by_each_arrival(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gathering leader sleeps on a gate (waited on with a timeout) until the append that
    # completes its group comes: one wake-up a commit. Before, each arrival released the gate,
    # and the leader took the GIL to store that caller's rows and slept on a new gate: up to 7
    # wake-ups a commit of 8, each a context switch and a turn of the GIL.
    gates = 0
    commits = 0
    real_gate = store._new_gate

    class Counted:
        """The store's gate (compiled or pure), its waits with a timeout counted."""

        def __init__(self) -> None:
            self.gate = real_gate()

        def wait(self, timeout: float | None = None) -> bool:
            nonlocal gates
            if timeout is not None:  # (a gate; a waiting append's wake-up has no timeout)
                gates += 1
            return self.gate.wait(timeout)

        def open(self) -> None:
            self.gate.open()

    real = type(store)._group_writer

    @contextmanager
    def counted_commit(self: EventStore) -> Iterator[Callable[[list[Any]], list[bool]]]:
        nonlocal commits
        with real(self) as store_rows:
            yield store_rows
        commits += 1

    monkeypatch.setattr(store, "_new_gate", Counted)
    monkeypatch.setattr(store, "_open_all", lambda counted: [gate.open() for gate in counted])
    monkeypatch.setattr(type(store), "_group_writer", counted_commit)
    inputs = list(history(1, 4 * THREADS))
    pauses = random.Random(7)

    def work(number: int) -> None:
        for item in inputs[number::THREADS]:
            # The appends of a round come spread over 0-3 ms, inside GATHER_SECONDS: a leader
            # gathers them (when the last commit was shared), and would be woken by each if
            # arrivals woke it (18-20 gates for 6-10 commits, measured so).
            time.sleep(pauses.uniform(0, 0.003))
            assert isinstance(store.append(item), Stored)

    assert run_threads(THREADS, work) == []
    assert sorted(store.events(subject_of(1))) == sorted(inputs)
    assert gates <= commits, (gates, commits)


def test_a_shared_commit_that_fails_fails_every_append_in_it_and_stores_none(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = type(store)._group_writer
    failed_once = False

    @contextmanager
    def failing_once(self: EventStore) -> Iterator[Callable[[list[Any]], list[bool]]]:
        nonlocal failed_once
        stored: list[Any] = []
        with real(self) as store_rows:
            yield lambda rows: stored.extend(rows) or store_rows(rows)
            # The first commit shared by several appends (all 8, when they all came within the
            # gathering; else those that waited during a first commit of fewer): its rows were
            # stored, and the commit fails (the transaction is rolled back).
            if len(stored) > 1 and not failed_once:
                failed_once = True
                raise StoreError("the disk is full", path=self.location)
            time.sleep(0.05)

    monkeypatch.setattr(type(store), "_group_writer", failing_once)
    inputs = list(history(1, THREADS))
    outcomes: dict[bytes, object] = {}

    def work(number: int) -> None:
        try:
            outcomes[inputs[number]] = store.append(inputs[number])
        except StoreError as exc:
            outcomes[inputs[number]] = exc

    assert run_threads(THREADS, work) == []
    failed = [item for item, outcome in outcomes.items() if isinstance(outcome, StoreError)]
    assert len(failed) > 1, "no commit shared by several appends failed"
    assert all("the disk is full" in str(outcomes[item]) for item in failed)
    stored = set(store.events(subject_of(1)))
    assert all(item not in stored for item in failed)
    assert all(item in stored for item, outcome in outcomes.items() if isinstance(outcome, Stored))
