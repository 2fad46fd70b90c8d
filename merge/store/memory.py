"""An event store in memory: for tests, tools and services that keep nothing across restarts.

It keeps the same contract as the database adapters (the contract suite runs on it too), but
nothing survives the process: :meth:`MemoryStore.backup` is the way to keep what it holds.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from os import PathLike

import msgspec

from .base import BackupRow, Checkpoint, EventStore, PreparedInput, StoreError
from .sqlite import write_backup

__all__ = ["MemoryStore"]


class _Data(msgspec.Struct):
    """What several handles of one memory store share (what a database file is to SQLite)."""

    rows: list[BackupRow] = msgspec.field(default_factory=list)
    by_subject: dict[str, list[BackupRow]] = msgspec.field(default_factory=dict)
    digests: set[tuple[str, bytes]] = msgspec.field(default_factory=set)
    checkpoints: dict[tuple[str, str], Checkpoint] = msgspec.field(default_factory=dict)
    # The databases' write lock: held by a handle's open write transaction; ``writer`` names the
    # thread that holds it (the same thread asking again, from its batch's iterator, is refused).
    lock: threading.Lock = msgspec.field(default_factory=threading.Lock)
    writer: int | None = None


class MemoryStore(EventStore):
    """An :class:`~merge.store.EventStore` in this process's memory.

    ``MemoryStore()`` is a new, empty store; ``MemoryStore(share=other)`` another handle on
    ``other``'s inputs (as two connections to one database: closing one leaves the other).
    ``threads``, ``cache_size``: see :class:`~merge.store.EventStore`.
    """

    def __init__(
        self, *, share: MemoryStore | None = None, threads: int | None = 1, cache_size: int = 8
    ) -> None:
        super().__init__(threads=threads, cache_size=cache_size)
        self.location = "memory"
        self._shared = share._data() if share is not None else _Data()
        self._open = True

    def __repr__(self) -> str:
        return f"MemoryStore(<{len(self._shared.rows)} inputs>)"

    @contextmanager
    def _transaction(self) -> Iterator[Callable[[PreparedInput], bool]]:
        data = self._data()
        if data.writer == threading.get_ident():  # a handle writing from another's open batch's iterator
            raise StoreError(
                "the store is locked by another handle's open write transaction", path=self.location
            )
        pending: list[PreparedInput] = []
        keys: set[tuple[str, bytes]] = set()

        def insert(prepared: PreparedInput) -> bool:
            key = (prepared.subject, prepared.digest)
            if key in data.digests or key in keys:
                return False
            keys.add(key)
            pending.append(prepared)
            return True

        with data.lock:  # other threads' transactions wait, as on a database's write lock
            data.writer = threading.get_ident()
            try:
                yield insert  # nothing is visible, or kept, before the block ends normally
            finally:
                data.writer = None
            for prepared in pending:
                seq = data.rows[-1][0] + 1 if data.rows else 1
                row = (seq, prepared.subject, prepared.event_id, prepared.digest, prepared.raw)
                data.rows.append(row)
                data.by_subject.setdefault(prepared.subject, []).append(row)
            data.digests |= keys

    def subjects(self) -> list[str]:
        return sorted(self._data().by_subject)

    def head(self, subject: str) -> int:
        rows = self._data().by_subject.get(subject)
        return rows[-1][0] if rows else 0

    def count(self, subject: str) -> int:
        return len(self._data().by_subject.get(subject, ()))

    def read(self, subject: str, *, after: int = 0) -> Iterator[tuple[int, bytes]]:
        rows = self._data().by_subject.get(subject, [])
        for seq, _, _, _, raw in rows[bisect_right(rows, after, key=lambda row: row[0]) :]:
            yield seq, raw

    def _load_checkpoint(self, subject: str, context: str) -> Checkpoint | None:
        return self._data().checkpoints.get((subject, context))

    def _save_checkpoint(self, subject: str, context: str, checkpoint: Checkpoint) -> None:
        checkpoints = self._data().checkpoints
        known = checkpoints.get((subject, context))
        if known is None or checkpoint.seq >= known.seq:  # as the databases: never go back
            checkpoints[(subject, context)] = checkpoint

    def _rows(self) -> Iterator[tuple[str, int, bytes, bytes]]:
        for seq, subject, _, digest, raw in list(self._data().rows):
            yield subject, seq, digest, raw

    def _checkpoints(self) -> Iterator[tuple[str, Checkpoint]]:
        for (subject, _), checkpoint in list(self._data().checkpoints.items()):
            yield subject, checkpoint

    def _check_storage(self) -> list[str]:
        self._data()  # no pages or indexes to check: only a closed handle cannot be checked
        return []

    def backup(self, dest: str | PathLike[str]) -> int:
        data = self._data()
        checkpoints = [(s, c, point.seq, point.state) for (s, c), point in data.checkpoints.items()]
        return write_backup(dest, list(data.rows), checkpoints)

    def close(self) -> None:
        self._open = False

    def _data(self) -> _Data:
        if not self._open:
            raise StoreError("the store is closed", path=self.location)
        return self._shared
