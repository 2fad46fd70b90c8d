"""MemoryStore specifics: handles sharing one store, and its write lock (the contract suite: the rest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from merge.store import MemoryStore, StoreError

from .events import history, subject_of

S1 = subject_of(1)


def test_handles_share_the_inputs_and_close_alone() -> None:
    first = MemoryStore()
    second = MemoryStore(share=first)
    first.append_many(history(1, 5))
    assert list(second.events(S1)) == list(history(1, 5))
    first.close()
    with pytest.raises(StoreError, match="closed"):
        first.count(S1)
    assert second.count(S1) == 5  # the other handle, as a second connection, goes on
    assert MemoryStore().count(S1) == 0  # a new store is empty


def test_a_write_inside_another_handles_open_batch_is_refused() -> None:
    store = MemoryStore()
    other = MemoryStore(share=store)
    inputs = list(history(1, 6))
    refused: list[StoreError] = []

    def meddling() -> Iterator[bytes]:
        yield from inputs[:3]
        with pytest.raises(StoreError, match="locked") as caught:
            other.append(inputs[3])  # while the batch holds the write lock
        refused.append(caught.value)
        yield from inputs[3:]

    assert all(result.new for result in store.append_many(meddling()))  # type: ignore[union-attr]
    assert len(refused) == 1
    assert list(other.events(S1)) == inputs  # each once
    assert other.append(inputs[0]).new is False  # type: ignore[union-attr]  # the lock is released
