"""EventStore.backup on every adapter: a consistent SQLite copy, written whole or not at all."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from merge.store import EventStore, SQLiteStore, StoreError

from .events import history, subject_of
from .test_contract import (
    Writer,
    expected_fold,
    folded,
    writers,  # noqa: F401 (the fixture, for the test that runs a writer)
)

S1, S2 = subject_of(1), subject_of(2)


def test_a_backup_is_a_store_with_the_same_inputs_and_checkpoints(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.append_many([*history(1, 20), *history(2, 10)])
    expected = folded(store, S1)  # leaves a checkpoint
    (out := tmp_path / "backups").mkdir()
    assert store.backup(out / "backup.db") == 30
    with SQLiteStore(out / "backup.db") as copy:
        copy.verify_integrity()
        assert copy.subjects() == store.subjects() == sorted([S1, S2])
        for subject in (S1, S2):  # the same inputs, in the same order, with their seq
            assert list(copy.read(subject)) == list(store.read(subject))

        def no_reading(*args: Any, **kwargs: Any) -> Iterator[tuple[int, bytes]]:
            raise AssertionError("the checkpoint was not in the backup")

        monkeypatch.setattr(copy, "read", no_reading)
        assert folded(copy, S1) == expected
    assert [path.name for path in out.iterdir()] == ["backup.db"]  # no temporary file left


def test_a_backup_never_overwrites_and_needs_its_folder(store: EventStore, tmp_path: Path) -> None:
    store.append_many(history(1, 3))
    (out := tmp_path / "backups").mkdir()
    taken = out / "taken.db"
    taken.write_bytes(b"something precious")
    with pytest.raises(StoreError, match="already exists") as caught:
        store.backup(taken)
    assert caught.value.path == str(taken)
    assert taken.read_bytes() == b"something precious"
    with pytest.raises(StoreError, match="the folder to write the backup in does not exist"):
        store.backup(out / "missing" / "backup.db")
    assert [path.name for path in out.iterdir()] == ["taken.db"]


def test_a_backup_of_an_empty_store(store: EventStore, tmp_path: Path) -> None:
    assert store.backup(tmp_path / "backup.db") == 0
    with SQLiteStore(tmp_path / "backup.db") as copy:
        assert copy.subjects() == []


@pytest.mark.usefixtures("writers")
def test_a_backup_taken_while_a_writer_runs_is_one_snapshot(
    request: pytest.FixtureRequest, connect: Callable[[], EventStore], tmp_path: Path
) -> None:
    start_writer: Callable[..., Writer] = request.getfixturevalue("writers")
    inputs = list(history(1, 300))
    writer = start_writer(inputs, batch=3)
    store = connect()
    writer.start()
    writer.read_until(lambda line: line.startswith("ack") and int(line.split()[1]) >= 30)
    acked = writer.acked
    copied = store.backup(tmp_path / "backup.db")
    writer.kill()
    with SQLiteStore(tmp_path / "backup.db") as copy:
        stored = list(copy.events(S1))
    assert len(stored) == copied >= acked  # everything acknowledged before the backup began...
    assert stored == inputs[: len(stored)]
    assert len(stored) % 3 == 0  # ...and whole batches only: the snapshot of one moment
    with SQLiteStore(tmp_path / "backup.db") as copy:
        assert folded(copy, S1) == expected_fold(stored, S1)
